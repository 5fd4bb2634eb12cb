# Session 50, device call 4: the latency-build GPU tests again (dev3's failed on the test's own
# check of the 16-bit builds' entry names, "_lat_p16"), under memcheck for the LayerNorm ones.
# Carry .cubins_rmsall .cubins_ln .cubins_copy .cubins_fill .whl.
source benchmarks/results/patches/session48_scripts/common.sh
cat $OUT/gpu.txt
packs $ROOT/.cubins_rmsall $ROOT/.cubins_ln $COMMON
cd $ROOT/tests; export PYTHONPATH=$ROOT
FILE=tests.txt step latency 60 python -m pytest -q -p no:cacheprovider test_gpu_norm_latency.py
FILE=tests.txt step memcheck 120 compute-sanitizer --tool memcheck --error-exitcode 1 python -m pytest -q -p no:cacheprovider \
  test_gpu_norm_latency.py -k "layer"
FILE=tests.txt step quant16 60 python -m pytest -q -p no:cacheprovider test_gpu_norm_quant.py -k "16bit"
FILE=tests.txt step compile 120 python -m pytest -q -p no:cacheprovider test_gpu_compile.py -k "norm or layer"
grep -E "^FAILED|^ERROR|passed|failed|ERROR SUMMARY" $OUT/tests.txt | head -20
