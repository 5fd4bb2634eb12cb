# For a later session (not run in session 48: its device time ran out, and every machine it got was
# an H100): the append routines with their peers on an H200, as landed in session 48, and LayerNorm
# with fp32 against 16-bit gamma/beta (the cost of the fp32 copies a 16-bit call runs on). Build the
# packs first from the landed tree (cutefi aot --arch 9.0a --out DIR --only <substring> --prune):
# .cubins_append2 (attention.append), .cubins_ln (norm.layernorm), .cubins_copy (copy), .cubins_fill
# (fill.fill); carry them and .whl (the CUPTI wheels). Writes append_h200.csv/json, ln_params_h200.csv/json.
source benchmarks/results/patches/session48_scripts/common.sh
packs $ROOT/.cubins_append2 $ROOT/.cubins_ln $COMMON
export PYTHONPATH=/tmp/site:$ROOT
FILE=bench.txt step append 150 python $BM --routine append_paged_kv_cache append_paged_mla_kv_cache \
  --requests 64 256 --tokens-per-request 1 16 512 --refcheck --output $OUT/append_h200.csv $OUT/append_h200.json
FILE=bench.txt step ln_params 120 python $BM --routine layernorm --rows 1 128 4096 16384 --hidden 4096 \
  --param-bits 32 16 --refcheck --wall --output $OUT/ln_params_h200.csv $OUT/ln_params_h200.json
grep -E " cutefi |torch" $OUT/bench.txt | head -60
