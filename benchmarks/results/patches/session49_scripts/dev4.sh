# Session 49, device call 4: RMSNorm 16384 read twice at 1024 threads a row with 8-byte accesses
# (tuning.REREAD_ROWS, the working tree) against the landed build (.ab_base: HEAD's cutefi with its
# pack from build_rms.py), one process a tree, alternated twice; the new build with its peers; the
# RMSNorm GPU tests. Carry .cubins_rmsall (cutefi aot --arch 9.0a --only norm.rmsnorm) .ab_base
# .cubins_copy .cubins_fill .whl.
source benchmarks/results/patches/session48_scripts/common.sh
run_tree() { local t=$1; shift
  case $t in new) T=$ROOT; P=$ROOT/.cubins_rmsall;; base) T=$ROOT/.ab_base; P=$ROOT/.ab_base/.cubins;; esac
  echo "== $t $*" >> $OUT/ab.txt
  PYTHONPATH=/tmp/site:$T CUTEFI_PACK_PATH=$P:$ROOT/.cubins_copy:$ROOT/.cubins_fill timeout 150 python $BM "$@" \
    2>&1 | grep -E "^rmsnorm|rror" >> $OUT/ab.txt; }
for r in 1 2; do for t in base new; do
  left 60 && run_tree $t --routine rmsnorm --rows 1 128 1024 4096 16384 65536 --hidden 16384 --backends cutefi --refcheck
done; done
left 100 && run_tree new --routine rmsnorm --rows 1 128 4096 16384 65536 --hidden 16384 --refcheck \
  --output $OUT/peers_new.csv $OUT/peers_new.json
packs $ROOT/.cubins_rmsall $COMMON
cd $ROOT/tests; export PYTHONPATH=$ROOT
FILE=tests.txt step t_rms 200 python -m pytest -q -p no:cacheprovider test_gpu_rmsnorm.py test_gpu_norm_layouts.py
grep -E "^FAILED|^ERROR" $OUT/tests.txt | head; cat $OUT/ab.txt | awk '{print $1, $2, $3, $4, $5}'
