# Session 49, device call 1 (from the repository root): the 16-bit LayerNorm parameter builds
# (layernorm_params16_session48.patch, landed in this commit) and the by-pieces append build on HND/FP8 caches.
# Carry .cubins_ln .cubins_copy .cubins_fill .cubins_append2 .whl (built from this tree just before).
source benchmarks/results/patches/session48_scripts/common.sh
packs $ROOT/.cubins_ln $ROOT/.cubins_append2 $COMMON
cd $ROOT/tests; export PYTHONPATH=$ROOT
FILE=tests.txt step t_ln16 170 python -m pytest -q -p no:cacheprovider test_gpu_layernorm.py test_gpu_norm_quant.py \
  -k "16bit or layernorm"
FILE=tests.txt step t_append 90 python -m pytest -q -p no:cacheprovider test_gpu_append_kv.py
cd $ROOT; export PYTHONPATH=/tmp/site:$ROOT
FILE=bench.txt step ln_params 130 python $BM --routine layernorm --rows 1 128 4096 16384 \
  --hidden 4095 4096 --param-bits 32 16 --refcheck --wall --output $OUT/ln16.csv $OUT/ln16.json
cd $ROOT/tests; export PYTHONPATH=$ROOT
FILE=tests.txt step t_compile 90 python -m pytest -q -p no:cacheprovider test_gpu_compile.py -k "layernorm"
FILE=tests.txt step memcheck 80 compute-sanitizer --tool memcheck --report-api-errors no python -m pytest -q \
  -p no:cacheprovider test_gpu_layernorm.py test_gpu_norm_quant.py -k "16bit"
cd $ROOT; export PYTHONPATH=/tmp/site:$ROOT
if grep -q H200 $OUT/gpu.txt; then
FILE=bench.txt step append 120 python $BM --routine append_paged_kv_cache append_paged_mla_kv_cache \
  --requests 64 256 --tokens-per-request 1 16 512 --refcheck --output $OUT/append_h200.csv $OUT/append_h200.json
fi
grep -E "^FAILED|^ERROR" $OUT/tests.txt | head; grep -E " cutefi " $OUT/bench.txt | head -40
