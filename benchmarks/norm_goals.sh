#!/usr/bin/env bash
# Issue 11's measured goals in one run (H200): rmsnorm against torch eager / torch.compile over
# M x N, fused_add_rmsnorm, layernorm and the FP8 quant routines at 16384 x 4096, and the odd
# hidden size 4095 against 4096. cutefi-bench prints the copy ceiling of the same run.
#   usage: benchmarks/norm_goals.sh OUT_DIR     (cubins from $CUTEFI_PACK_PATH, default ./.cubins)
set -uo pipefail
out=${1:?usage: benchmarks/norm_goals.sh OUT_DIR}
mkdir -p "$out"
cd "$(dirname "$0")/.."
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
export CUTEFI_PACK_PATH=${CUTEFI_PACK_PATH:-$PWD/.cubins}
bench="python3 -m cutefi.bench.cli --refcheck"
rc=0
$bench --routine rmsnorm --backends cutefi torch torch.compile --rows 1 128 4096 16384 65536 \
  --hidden 2048 4096 8192 16384 --output "$out/rmsnorm_grid.csv" "$out/rmsnorm_grid.json" \
  > "$out/rmsnorm_grid.log" 2>&1 || rc=1
$bench --routine fused_add_rmsnorm layernorm rmsnorm_quant fused_add_rmsnorm_quant layernorm_quant rmsnorm \
  --rows 16384 --hidden 4095 4096 --output "$out/norm_16384.csv" "$out/norm_16384.json" \
  > "$out/norm_16384.log" 2>&1 || rc=1
tail -n 60 "$out/rmsnorm_grid.log" "$out/norm_16384.log"
exit $rc
