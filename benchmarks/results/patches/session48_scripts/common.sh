# Session 48 device scripts' shared start (sourced from the repository root on the device): the
# CUPTI wheels, the GPU's name, and the helpers: packs DIR... (CUTEFI_PACK_PATH), step NAME LIMIT
# CMD... (CMD's output appended to $OUT/$FILE, cut at the call's DEADLINE), tree base|new|v2 (a
# source tree and its pack: .ab_base, the working tree, .ab_v2).
ROOT=$PWD
export CUTEFI_CACHE_DIR=/tmp/cc PYTHONUNBUFFERED=1
pip install -q --no-deps --target /tmp/site .whl/*.whl > /dev/null 2>&1
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/gpu.txt
# the GPU's tag for file names (h100, h200), and the sanitizer and pytest commands the scripts share
G=$(grep -o "H[0-9][0-9]*" $OUT/gpu.txt | head -1 | tr A-Z a-z)
SAN="compute-sanitizer --report-api-errors no --error-exitcode 1"
PT="python -m pytest -q -p no:cacheprovider"
packs() { local p=""; for d in "$@"; do p="$p:$d"; done; export CUTEFI_PACK_PATH=${p#:}; }
COMMON="$ROOT/.cubins_copy $ROOT/.cubins_fill"
DEADLINE=${DEADLINE:-560}
left() { [ $((DEADLINE - SECONDS)) -gt "$1" ]; }
step() { local name=$1 limit=$2; shift 2; left 20 || { echo "skipped $name"; return; }
  local t=$(( limit < DEADLINE - SECONDS ? limit : DEADLINE - SECONDS )); echo "== $name" >> $OUT/$FILE
  timeout $t "$@" >> $OUT/$FILE 2>&1; echo "== $name ($SECONDS s): $(grep -E 'passed|failed|error|ERROR SUMMARY' $OUT/$FILE | tail -1)"; }
tree() { case $1 in base) export PYTHONPATH=/tmp/site:$ROOT/.ab_base; packs $ROOT/.ab_base/.cubins $COMMON;;
  new) export PYTHONPATH=/tmp/site:$ROOT; packs $ROOT/.cubins_append2 $COMMON;;
  v2) export PYTHONPATH=/tmp/site:$ROOT/.ab_v2; packs $ROOT/.ab_v2/.cubins $COMMON;; esac; }
BM=$ROOT/benchmarks/results/patches/session46_scripts/bm.py
S=$ROOT/benchmarks/results/patches/session48_scripts
# the A/B shapes: decode-sized to prefill-sized appends, GQA (8 x 128) and MLA (512 + 64)
ARGS="--routine append_paged_kv_cache append_paged_mla_kv_cache --requests 64 --tokens-per-request 1 4 16 64 512 --backends cutefi"
ARGS2="--routine append_paged_kv_cache append_paged_mla_kv_cache --requests 256 --tokens-per-request 1 8 --backends cutefi"
