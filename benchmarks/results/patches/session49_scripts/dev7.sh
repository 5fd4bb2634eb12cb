# Session 49, device call 7: RMSNorm 16384 with its latency build (the build that holds x, up to 512
# rows) and its read-twice build above: A/B against HEAD (.ab_base) around the row limit, and the
# RMSNorm and latency-build GPU tests. Carry .cubins_rmsall .ab_base .cubins_copy .cubins_fill .whl.
source benchmarks/results/patches/session48_scripts/common.sh
run_tree() { local t=$1; shift
  case $t in new) T=$ROOT; P=$ROOT/.cubins_rmsall;; base) T=$ROOT/.ab_base; P=$ROOT/.ab_base/.cubins;; esac
  echo "== $t $*" >> $OUT/ab.txt
  PYTHONPATH=/tmp/site:$T CUTEFI_PACK_PATH=$P:$ROOT/.cubins_copy:$ROOT/.cubins_fill timeout 40 python $BM "$@" \
    2>&1 | grep -E "^rmsnorm|rror" >> $OUT/ab.txt; }
packs $ROOT/.cubins_rmsall $COMMON
cd $ROOT/tests; export PYTHONPATH=$ROOT
FILE=tests.txt step t_rms 50 python -m pytest -q -p no:cacheprovider test_gpu_rmsnorm.py test_gpu_norm_latency.py \
  -k "16384 or latency"
cd $ROOT
for t in base new; do
  left 20 && run_tree $t --routine rmsnorm --rows 1 128 256 512 768 1024 16384 --hidden 16384 --backends cutefi --refcheck
done
grep -E "^FAILED|^ERROR|passed|failed" $OUT/tests.txt | head; awk '{print $1, $2, $3, $4, $5, $6}' $OUT/ab.txt
