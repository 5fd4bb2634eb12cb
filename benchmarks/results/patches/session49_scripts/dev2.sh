# Session 49, device call 2: RMSNorm 8192 / 16384 columns read twice (tuning.REREAD_ROWS) at other
# splits and access widths, against the landed builds; then issue 11's RMSNorm grid with its peers.
# Trees: head (the working tree, pack .cubins_rms), v1 (.ab_v1: 8192 and 16384 at 1024 threads a row,
# 8-byte accesses), v2 (.ab_v2: 8192 at 512 threads a row with 8-byte accesses, 16384 at 1024 threads
# with 16-byte ones, session 39's form). Packs: build_rms.py per tree. Carry .cubins_rms .ab_v1 .ab_v2
# .cubins_copy .cubins_fill .whl.
source benchmarks/results/patches/session48_scripts/common.sh
run_tree() { local t=$1; shift
  case $t in head) T=$ROOT; P=$ROOT/.cubins_rms;; *) T=$ROOT/.ab_$t; P=$ROOT/.ab_$t/.cubins;; esac
  echo "== $t $*" >> $OUT/ab.txt
  PYTHONPATH=/tmp/site:$T CUTEFI_PACK_PATH=$P:$ROOT/.cubins_copy:$ROOT/.cubins_fill timeout 150 python $BM "$@" \
    2>&1 | grep -E "^rmsnorm|rror" >> $OUT/ab.txt; }
for r in 1 2; do for t in head v1 v2; do
  left 60 && run_tree $t --routine rmsnorm --rows 4096 16384 65536 --hidden 8192 16384 --backends cutefi --refcheck
done; done
left 200 && run_tree head --routine rmsnorm --rows 1 128 4096 16384 65536 --hidden 2048 4096 8192 16384 \
  --refcheck --output $OUT/grid_head.csv $OUT/grid_head.json
left 120 && run_tree v1 --routine rmsnorm --rows 4096 16384 65536 --hidden 8192 16384 --refcheck \
  --output $OUT/peers_v1.csv $OUT/peers_v1.json
cat $OUT/ab.txt | awk '{print $1, $2, $3, $4, $5}' | head -120
