# Session 49, device call 3: decode and prefill attention on seeded random calls
# (tests/test_gpu_attention_fuzz.py), then racecheck of the append kernel's by-pieces build (shared
# page lookups). Carry .cubins_attn .cubins_prefill .cubins_append2 .cubins_copy .cubins_fill
# (built from this tree: cutefi aot --arch 9.0a --only attention. / prefill. / ...).
source benchmarks/results/patches/session48_scripts/common.sh
packs $ROOT/.cubins_attn $ROOT/.cubins_prefill $ROOT/.cubins_append2 $COMMON
cd $ROOT/tests; export PYTHONPATH=$ROOT
FILE=fuzz.txt step fuzz 360 python -m pytest -q -p no:cacheprovider -rf test_gpu_attention_fuzz.py -s
FILE=race.txt step racecheck 120 compute-sanitizer --tool racecheck --report-api-errors no python -m pytest -q \
  -p no:cacheprovider test_gpu_append_kv.py -k "many_tokens and (263 or 4999)"
grep -E "^FAILED|^ERROR|passed|failed|RACECHECK SUMMARY|hazard" $OUT/fuzz.txt $OUT/race.txt | head -40
