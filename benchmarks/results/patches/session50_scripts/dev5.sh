# Session 50, device call 5 (NOT RUN: no machine could be started; for a later session):
# (1) the latency-build GPU tests again (dev3's failed on the test's own check of the 16-bit builds' entry names, "_lat_p16"), under memcheck for the LayerNorm
# ones, and the 16-bit FP8 LayerNorm tests; (2) an RMSNorm 4096 latency build for shifted rows
# (256 threads a row, the weight read in the row's frame with x; .ab_v1 = the tree with
# patches/rms_shifted_latency_session50.patch applied) against HEAD's one-row
# shifted build (.ab_base), alternated. Packs: build_class.py DIR rms 4096 for both trees.
# (Landing the patch also takes test_build_all's rmsnorm_latency count to 2 * 12.)
# Carry .cubins_rmsall .cubins_ln .ab_base .ab_v1 .cubins_copy .cubins_fill .whl.
source benchmarks/results/patches/session48_scripts/common.sh
cat $OUT/gpu.txt
packs $ROOT/.cubins_rmsall $ROOT/.cubins_ln $COMMON
cd $ROOT/tests; export PYTHONPATH=$ROOT
FILE=tests.txt step latency 60 python -m pytest -q -p no:cacheprovider test_gpu_norm_latency.py
FILE=tests.txt step quant16 60 python -m pytest -q -p no:cacheprovider test_gpu_norm_quant.py -k "16bit"
cd $ROOT
run_tree() { local t=$1; shift; T=$ROOT/.ab_$t
  echo "== $t $*" >> $OUT/ab.txt
  PYTHONPATH=/tmp/site:$T CUTEFI_PACK_PATH=$T/.cubins:$ROOT/.cubins_copy:$ROOT/.cubins_fill timeout 60 python $BM "$@" \
    2>&1 | grep -E "^routine|^rmsnorm|rror" >> $OUT/ab.txt; }
(cd tests; PYTHONPATH=$ROOT/.ab_v1 CUTEFI_PACK_PATH=$ROOT/.ab_v1/.cubins:$ROOT/.cubins_copy:$ROOT/.cubins_fill FILE=tests.txt step v1 60 \
  python -m pytest -q -p no:cacheprovider test_gpu_norm_latency.py -k "bf16 and (rms-N4095 or rms-N3797)")
for r in 1 2; do for t in base v1; do
  left 30 && run_tree $t --routine rmsnorm --rows 1 128 256 512 1024 --hidden 4095 4096 --backends cutefi --refcheck
done; done
(cd tests; FILE=tests.txt step memcheck 100 compute-sanitizer --tool memcheck --error-exitcode 1 python -m pytest -q \
  -p no:cacheprovider test_gpu_norm_latency.py -k "layer and (N4095 or N3797)")
grep -E "^FAILED|^ERROR|passed|failed|ERROR SUMMARY" $OUT/tests.txt | head -20
awk '/^==/ {t=$2} /^rmsnorm/ {print t, $2, $3, $5}' $OUT/ab.txt
