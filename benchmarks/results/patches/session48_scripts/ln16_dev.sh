# For a later session (session 48 had no device time left): LayerNorm reading bf16/fp16 gamma and
# beta as they are (benchmarks/results/patches/layernorm_params16_session48.patch, not landed: new
# builds norm.layernorm_params16 / norm.layernorm_latency_params16, the same kernel with 16-bit
# parameter pointers widened in registers; the plan takes them where gamma and beta both have the
# input's dtype. CPU-checked in session 48: every fp32 LayerNorm build's SASS unchanged (19 bf16
# builds on sm_90a compared), the 124 new builds compile for all 8 targets and spill only where their
# fp32 twins do (tests/known_spills.json in the patch), the CPU tests pass).
# Prepare on the CPU machine from the landed tree: `git apply` the patch; build .cubins_ln
# (cutefi aot --arch 9.0a --only norm.layernorm --prune: the fp32 builds and the *_params16 ones),
# .cubins_copy (copy), .cubins_fill (fill.fill); .whl (CUPTI wheels). Carry those four.
# Then: GPU tests of the 16-bit parameters (bit for bit the fp32 builds' output), opcheck, memcheck,
# and the cost of 16-bit parameters against fp32 ones in one run (cutefi-bench --param-bits 32 16;
# before the patch a 16-bit call ran on two fp32 copies: +4.3 us GPU, +22 us eager at one row on an
# H100, benchmarks/results/ln_params_widening_h100_session48.json). Land the patch if all pass and the 16-bit rows match
# the fp32 ones.
source benchmarks/results/patches/session48_scripts/common.sh
packs $ROOT/.cubins_ln $COMMON
cd $ROOT/tests; export PYTHONPATH=$ROOT
FILE=tests.txt step t_ln16 150 python -m pytest -q -p no:cacheprovider test_gpu_layernorm.py test_gpu_norm_quant.py \
  -k "16bit or layernorm"
FILE=tests.txt step t_compile 120 python -m pytest -q -p no:cacheprovider test_gpu_compile.py -k "layernorm"
FILE=tests.txt step memcheck 90 compute-sanitizer --tool memcheck --report-api-errors no python -m pytest -q \
  -p no:cacheprovider test_gpu_layernorm.py test_gpu_norm_quant.py -k "16bit"
cd $ROOT; export PYTHONPATH=/tmp/site:$ROOT
FILE=bench.txt step ln_params 150 python $BM --routine layernorm --rows 1 128 4096 16384 \
  --hidden 4095 4096 --param-bits 32 16 --refcheck --wall --output $OUT/ln16.csv $OUT/ln16.json
grep -E "^FAILED|^ERROR" $OUT/tests.txt | head; grep -E " cutefi " $OUT/bench.txt | head -40
