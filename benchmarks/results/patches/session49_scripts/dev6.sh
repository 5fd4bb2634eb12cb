# Session 49, device call 6 (run on a short lease): the RMSNorm 16384 A/B (one
# round) and its GPU tests, then the attention fuzz tests, then racecheck of the append kernel.
# Carry .cubins_attn .cubins_prefill .cubins_append2 .cubins_rmsall .ab_base .cubins_copy .cubins_fill .whl.
source benchmarks/results/patches/session48_scripts/common.sh
run_tree() { local t=$1; shift
  case $t in new) T=$ROOT; P=$ROOT/.cubins_rmsall;; base) T=$ROOT/.ab_base; P=$ROOT/.ab_base/.cubins;; esac
  echo "== $t $*" >> $OUT/ab.txt
  PYTHONPATH=/tmp/site:$T CUTEFI_PACK_PATH=$P:$ROOT/.cubins_copy:$ROOT/.cubins_fill timeout 60 python $BM "$@" \
    2>&1 | grep -E "^rmsnorm|rror" >> $OUT/ab.txt; }
for t in base new; do
  left 60 && run_tree $t --routine rmsnorm --rows 1 128 1024 4096 16384 65536 --hidden 16384 --backends cutefi --refcheck
done
packs $ROOT/.cubins_rmsall $COMMON
cd $ROOT/tests; export PYTHONPATH=$ROOT
FILE=tests.txt step t_rms 60 python -m pytest -q -p no:cacheprovider test_gpu_rmsnorm.py -k "16384 or 8192"
packs $ROOT/.cubins_attn $ROOT/.cubins_prefill $ROOT/.cubins_append2 $COMMON
FILE=fuzz.txt step fuzz 120 python -m pytest -q -p no:cacheprovider -rf test_gpu_attention_fuzz.py -s
FILE=race.txt step racecheck 60 compute-sanitizer --tool racecheck --report-api-errors no python -m pytest -q \
  -p no:cacheprovider test_gpu_append_kv.py -k "many_tokens and 263"
grep -E "^FAILED|^ERROR|passed|failed|RACECHECK SUMMARY" $OUT/fuzz.txt $OUT/race.txt $OUT/tests.txt | head -30
awk '{print $1, $2, $3, $4, $5}' $OUT/ab.txt
