#!/usr/bin/env bash
# Run cutefi's GPU tier and the foundation measurements in one go.
#   usage: benchmarks/run_gpu.sh OUT_DIR
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
python3 -m pytest -m gpu -q -p no:cacheprovider -rs tests 2>&1 | tee "$out/gpu_tests.txt" || rc=1
if command -v compute-sanitizer >/dev/null; then
  # API errors are reported separately: cutefi probes one parameter past the last on purpose
  compute-sanitizer --tool memcheck --report-api-errors no python3 -m pytest -m gpu -q \
    -p no:cacheprovider tests/test_gpu_foundation.py -k "copy and not graph" > "$out/memcheck.txt" 2>&1
  tail -n 3 "$out/memcheck.txt"
fi
python3 -m cutefi.bench.foundation --out "$out/foundation.json" --profile "$out/first_call_profile.txt" > "$out/foundation.log" 2>&1 || rc=1
tail -n 40 "$out/foundation.log"
python3 -m cutefi.bench.norm --out "$out/norm.json" > "$out/norm.log" 2>&1 || rc=1
tail -n 200 "$out/norm.log"
python3 -m cutefi.bench.rope --out "$out/rope.json" > "$out/rope.log" 2>&1 || rc=1
tail -n 60 "$out/rope.log"
exit $rc
