# Session 50, device call 3: the landed form of dev2's variants. The norm GPU tests on the
# working tree (RMSNorm 16384 read twice above 1024 rows; LayerNorm 4096's shifted latency
# builds up to 256 rows, gamma and beta loaded with x on the latency builds, the one-row path
# of the persistent LayerNorm builds), memcheck of the shifted latency builds, and the A/B
# against HEAD (.ab_base), alternated. Carry .cubins_rmsall .cubins_ln .ab_base .cubins_copy
# .cubins_fill .whl.
# (.ab_base: HEAD's cutefi; its pack from session49_scripts/build_rms.py DIR and build_class.py DIR
# layer 1024 2048 4096 16384.)
source benchmarks/results/patches/session48_scripts/common.sh
cat $OUT/gpu.txt
packs $ROOT/.cubins_rmsall $ROOT/.cubins_ln $COMMON
NEWPACK=$CUTEFI_PACK_PATH
run_tree() { local t=$1 f=$2; shift 2
  case $t in new) T=$ROOT; P=$NEWPACK;; base) T=$ROOT/.ab_base; P=$ROOT/.ab_base/.cubins:$ROOT/.cubins_copy:$ROOT/.cubins_fill;; esac
  echo "== $t $*" >> $OUT/$f
  PYTHONPATH=/tmp/site:$T CUTEFI_PACK_PATH=$P timeout 60 python $BM "$@" 2>&1 | grep -E "^routine|^rmsnorm|^layernorm|rror" >> $OUT/$f; }
cd $ROOT/tests; export PYTHONPATH=$ROOT
FILE=tests.txt step latency 60 python -m pytest -q -p no:cacheprovider test_gpu_norm_latency.py
FILE=tests.txt step memcheck 60 compute-sanitizer --tool memcheck --error-exitcode 1 python -m pytest -q -p no:cacheprovider \
  test_gpu_norm_latency.py -k "layer and (N4095 or N3800)"
cd $ROOT
LN="--routine layernorm --rows 1 128 192 256 384 512 2048 16384 --hidden 4095 4096 --param-bits 16 32 --backends cutefi --refcheck"
LQ="--routine layernorm_quant --rows 1 128 512 16384 --hidden 4095 4096 --backends cutefi --refcheck"
LA="--routine layernorm --rows 1 128 512 2048 --hidden 1024 2048 16384 --param-bits 16 32 --backends cutefi --refcheck"
RMS="--routine rmsnorm --rows 512 768 1024 1280 4096 16384 --hidden 16384 --backends cutefi --refcheck"
ab() { for t in base new; do
  left 60 && run_tree $t ab.txt $LN; left 60 && run_tree $t ab.txt $LQ; left 60 && run_tree $t ab.txt $LA; left 60 && run_tree $t ab.txt $RMS
done; }
ab
# (the RMSNorm kernels' SASS is unchanged but for the 16384 latency limit: their tests at 16384)
(cd tests; FILE=tests.txt step norm 150 python -m pytest -q -p no:cacheprovider test_gpu_layernorm.py test_gpu_rmsnorm.py test_gpu_norm_layouts.py \
  test_gpu_norm_long.py test_gpu_norm_quant.py -k "layer or Layer or 16384")
ab
grep -E "^FAILED|^ERROR|passed|failed|ERROR SUMMARY" $OUT/tests.txt | head -20
