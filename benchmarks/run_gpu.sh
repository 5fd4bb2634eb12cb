#!/usr/bin/env bash
# Run cutefi's GPU tier and the measurements in one go.
#   usage: benchmarks/run_gpu.sh OUT_DIR
#   SKIP_TESTS=1: no GPU tier or memcheck; SKIP_FOUNDATION=1, SKIP_SUITE=1: stop before those.
#   With two GPUs it also runs tests/test_multi_gpu.py and the torchrun check; with .oldtree/ (a
#   checkout of the landed tree with its own .cubins) the same-run bandwidth comparison.
# CUPTI timing needs cupti-python importable (else cutefi-bench falls back to CUDA events).
# Cubins come from $CUTEFI_PACK_PATH (default: ./.cubins, made by `cutefi aot --out .cubins`);
# the machine needs torch and cuda-python only. Results land in OUT_DIR.
set -uo pipefail
out=${1:?usage: benchmarks/run_gpu.sh OUT_DIR}
mkdir -p "$out"
cd "$(dirname "$0")/.."
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
export PYTHONUNBUFFERED=1
export CUTEFI_PACK_PATH=${CUTEFI_PACK_PATH:-$PWD/.cubins}
export CUTEFI_CACHE_DIR=${CUTEFI_CACHE_DIR:-$(mktemp -d)/cache}
rc=0
# an installed package has bytecode; measure the first call as users get it, not with .py compiles
python3 -m compileall -q cutefi >/dev/null
python3 -m cutefi.cli env 2>&1 | tee "$out/env.txt"
if [ -z "${SKIP_TESTS:-}" ]; then
  python3 -m pytest -m gpu -q -p no:cacheprovider -rs tests 2>&1 | tee "$out/gpu_tests.txt" || rc=1
  if command -v compute-sanitizer >/dev/null; then
    # API errors are reported separately: cutefi probes one parameter past the last on purpose
    compute-sanitizer --tool memcheck --report-api-errors no python3 -m pytest -m gpu -q \
      -p no:cacheprovider tests/test_gpu_foundation.py -k "copy and not graph" > "$out/memcheck.txt" 2>&1
    tail -n 3 "$out/memcheck.txt"
    # the norm and RoPE kernels on odd sizes (7 rows/tokens, strided rows, ragged batches)
    compute-sanitizer --tool memcheck --report-api-errors no python3 -m pytest -m gpu -q -p no:cacheprovider \
      tests/test_gpu_rmsnorm.py tests/test_gpu_layernorm.py tests/test_gpu_rope.py -k "M7- or nnz7" \
      > "$out/memcheck_norm_rope.txt" 2>&1
    tail -n 3 "$out/memcheck_norm_rope.txt"
    # the shifted norms (odd sizes, misaligned pointers, uneven 3-D views) and FP8 outputs
    compute-sanitizer --tool memcheck --report-api-errors no python3 -m pytest -m gpu -q -p no:cacheprovider \
      tests/test_gpu_norm_layouts.py tests/test_gpu_norm_quant.py \
      -k "qk_norm or misaligned or every_hidden_size[111 or every_hidden_size[4095 or (layernorm_quant and 111) or graph" \
      > "$out/memcheck_norm_layouts.txt" 2>&1
    tail -n 3 "$out/memcheck_norm_layouts.txt"
  fi
fi
if [ "$(python3 -c 'import torch; print(torch.cuda.device_count())')" -ge 2 ]; then
  # one process driving both GPUs, then one process per GPU (NVLink multicast stays off)
  export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
  python3 -m pytest -q -p no:cacheprovider -rs tests/test_multi_gpu.py 2>&1 | tee "$out/multi_gpu_tests.txt" || rc=1
  torchrun --nproc-per-node 2 benchmarks/multi_gpu_torchrun.py --out "$out" > "$out/torchrun.log" 2>&1 || rc=1
  tail -n 5 "$out/torchrun.log"
fi
if [ -d .oldtree/cutefi ]; then
  # same-run bandwidth, host cost and first call of the landed tree (.oldtree, its own .cubins) and this one
  python3 -m compileall -q .oldtree/cutefi >/dev/null
  python3 benchmarks/compare_trees.py --tree landed=.oldtree --tree new=. --rounds 3 \
    --out "$out/compare_trees.json" > "$out/compare_trees.log" 2>&1 || rc=1
  tail -n 30 "$out/compare_trees.log"
fi
[ -n "${SKIP_FOUNDATION:-}" ] && exit $rc
python3 -m cutefi.bench.foundation --out "$out/foundation.json" --profile "$out/first_call_profile.txt" > "$out/foundation.log" 2>&1 || rc=1
tail -n 40 "$out/foundation.log"
# where a launch's host time goes (raw libcuda, Kernel.launch, public calls, torch.add)
python3 benchmarks/launch_microbench.py --out "$out/launch_microbench.json" > "$out/launch_microbench.log" 2>&1 || rc=1
[ -n "${SKIP_SUITE:-}" ] && exit $rc
# the default suite: every routine, cutefi and every installed peer, float32 refcheck
python3 -m cutefi.bench.cli --refcheck --output "$out/suite.csv" "$out/suite.json" --plot "$out/suite.png" \
  > "$out/suite.log" 2>&1 || rc=1
cat "$out/suite.log"
exit $rc
