# Session 48's device calls, one script: the append kernel of the working tree (and of .ab_v2 where
# TREES names it) against the landed one (.ab_base: HEAD b083494's cutefi/ and its pack). Steps: GPU
# tests of each new tree, memcheck of the working tree, an A/B of the routines in two rounds (trees
# alternated), SWEEP=1: pieces a CTA forced to each value (sweep_ppc.py), APP=1: the routines with
# their peers (--refcheck, CSV/JSON). Carry .cubins_append2 .cubins_copy .cubins_fill .ab_base
# (.ab_v2) .whl. The calls, in order:
#   1-3  TREES="base new" SWEEP=1 (1 also APP=1): the by-pieces build alone; 2: its loads before the
#        page lookups; 3: its divisions as multiplies;
#   4    TREES="base new v2" APP=1: with the rule of 8 CTAs an SM; v2 looks up pages a thread, no
#        barrier;
#   5    TREES="base new" APP=1: the two builds; their pack was built before a last edit of launch.py
#        (a comment), so it held no cubin of the tree's kernel keys: nothing of the new tree ran;
#   6    the same, pack rebuilt (APP cut by the deadline): the two builds, as landed.
source benchmarks/results/patches/session48_scripts/common.sh
TREES=${TREES:-base new}
cd $ROOT/tests
for t in $TREES; do [ $t = base ] && continue; tree $t
  FILE=tests.txt step t_$t 60 python -m pytest -q -p no:cacheprovider test_gpu_append_kv.py; done
tree new
FILE=tests.txt step memcheck 60 compute-sanitizer --tool memcheck --report-api-errors no python -m pytest -q \
  -p no:cacheprovider test_gpu_append_kv.py -k "many_tokens or mla or own_strides or out_of_range or graph"
cd $ROOT
for round in 1 2; do for t in $TREES; do tree $t
  FILE=ab.txt step ab_${t}_$round 45 python $BM $ARGS
  FILE=ab.txt step ab2_${t}_$round 30 python $BM $ARGS2
done; done
tree new
touch $OUT/sweep.txt
[ -n "$SWEEP" ] && FILE=sweep.txt step sweep 120 python $S/sweep_ppc.py $ARGS
[ -n "$SWEEP" ] && FILE=sweep.txt step sweep2 60 python $S/sweep_ppc.py $ARGS2
[ -n "$APP" ] && FILE=app.txt step app 90 python $BM --routine append_paged_kv_cache append_paged_mla_kv_cache \
  --requests 64 --tokens-per-request 1 16 512 --refcheck --output $OUT/app.csv $OUT/app.json
grep -E "^FAILED|^ERROR" $OUT/tests.txt | head
python $S/summarize.py $OUT
