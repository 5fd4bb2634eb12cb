# Builds what session47_scripts/dev2.sh carries, on the CPU machine, from a clean checkout of the landed
# tree: .ab_base (the landed cutefi/ and its append pack), then the append-kernel patch applied to the
# working tree and its pack, and the LayerNorm / copy / fill packs. Run from the repository root with
# the venv active; then `run` dev2.sh with the carry list in its header, and `git checkout cutefi tests`
# afterwards if the patch is not to be kept.
set -euo pipefail
ROOT=$PWD
aot() { (cd "$1" && PYTHONPATH=$PWD CUTEFI_CACHE_DIR=/tmp/cc_prep python -c "import sys; from cutefi.cli import main; \
sys.argv=['cutefi','aot','--arch','9.0a','--out','$2','--jobs','2','--only','$3','--prune']; sys.exit(main())" | tail -1); }
rm -rf .ab_base && mkdir -p .ab_base && git archive HEAD cutefi | tar -x -C .ab_base
aot .ab_base $ROOT/.ab_base/.cubins attention.append
git apply benchmarks/results/patches/append_whole_tokens_session47.patch
aot . $ROOT/.cubins_append attention.append
aot . $ROOT/.cubins_ln norm.layernorm
aot . $ROOT/.cubins_copy copy
aot . $ROOT/.cubins_fill fill.fill
mkdir -p .whl
pip download -q "cupti-python==13.2.0" --no-deps -d .whl --python-version 3.12 --only-binary=:all: \
  --platform manylinux_2_28_x86_64
pip download -q "nvidia-cuda-cupti==13.2.*" --no-deps -d .whl
du -shc .ab_base .cubins_append .cubins_ln .cubins_copy .cubins_fill .whl | tail -1
