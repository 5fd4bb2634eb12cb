#!/usr/bin/env bash
# Dense GEMM on the GPU machine in one go: the GPU tests, then issue 13's measurements against
# cuBLAS in the same run (Llama-3 linear-layer grid, warm and cold L2; bf16/fp16 4096^3 and 8192^3).
#   usage: benchmarks/gemm_run.sh OUT_DIR     (SKIP_TESTS=1, SKIP_GRID=1 skip those parts)
# Cubins from $CUTEFI_PACK_PATH (default ./.cubins: `cutefi aot --arch 9.0a --only gemm --out .cubins`);
# a cupti-python wheel in ./.whl gives CUPTI timing (else CUDA events).
set -uo pipefail
out=${1:?usage: benchmarks/gemm_run.sh OUT_DIR}
mkdir -p "$out"
cd "$(dirname "$0")/.."
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl
fi
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
export CUTEFI_PACK_PATH=${CUTEFI_PACK_PATH:-$PWD/.cubins} CUTEFI_CACHE_DIR=${CUTEFI_CACHE_DIR:-/tmp/cutefi-cache}
rc=0
if [ -z "${SKIP_TESTS:-}" ]; then
  python3 -m pytest -q -p no:cacheprovider -rs tests/test_gpu_gemm.py 2>&1 | tail -n 15 | tee "$out/gemm_tests.txt" || rc=1
fi
bench="python3 -m cutefi.bench.cli --backends cutefi cublas --refcheck"
if [ -z "${SKIP_GRID:-}" ]; then
  $bench --testlist benchmarks/cases/gemm_llama.txt --output "$out/gemm_llama.csv" "$out/gemm_llama.json" \
    > "$out/gemm_llama.txt" 2>&1 || rc=1
  tail -n 60 "$out/gemm_llama.txt"
  # the same grid with L2 flushed before every call (as a weight is in a model's forward pass)
  $bench --cold-l2 --testlist benchmarks/cases/gemm_llama.txt --output "$out/gemm_llama_cold.csv" \
    "$out/gemm_llama_cold.json" > "$out/gemm_llama_cold.txt" 2>&1 || rc=1
fi
printf '%s\n' "--routine mm_bf16 --dtype bf16 fp16 --m 4096 --n 4096 --k 4096" \
  "--routine mm_bf16 --dtype bf16 fp16 --m 8192 --n 8192 --k 8192" > /tmp/gemm_cubes.txt
$bench --testlist /tmp/gemm_cubes.txt --output "$out/gemm_cubes.csv" "$out/gemm_cubes.json" \
  > "$out/gemm_cubes.txt" 2>&1 || rc=1
tail -n 20 "$out/gemm_cubes.txt"
exit $rc
