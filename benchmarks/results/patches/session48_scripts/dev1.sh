# Session 48, device calls 1 and 2 (2: the kernel's loads moved before the page lookups): the append kernel taking pieces_per_cta pieces a CTA (working tree)
# against the landed one (.ab_base: HEAD's cutefi/ and its pack): GPU tests, memcheck, an A/B of
# the routines, a sweep of pieces a CTA, the routines with their peers.
# Carry .cubins_append2 .cubins_copy .cubins_fill .ab_base .whl.
ROOT=$PWD
export CUTEFI_CACHE_DIR=/tmp/cc PYTHONUNBUFFERED=1
pip install -q --no-deps --target /tmp/site .whl/*.whl > /dev/null 2>&1
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/gpu.txt
packs() { local p=""; for d in "$@"; do p="$p:$d"; done; export CUTEFI_PACK_PATH=${p#:}; }
NEW="$ROOT/.cubins_append2 $ROOT/.cubins_copy $ROOT/.cubins_fill"
DEADLINE=${DEADLINE:-560}
left() { [ $((DEADLINE - SECONDS)) -gt "$1" ]; }
step() { local name=$1 limit=$2; shift 2; left 20 || { echo "skipped $name"; return; }
  local t=$(( limit < DEADLINE - SECONDS ? limit : DEADLINE - SECONDS )); echo "== $name" >> $OUT/$FILE
  timeout $t "$@" >> $OUT/$FILE 2>&1; echo "== $name ($SECONDS s): $(grep -E 'passed|failed|error|ERROR SUMMARY' $OUT/$FILE | tail -1)"; }
S=benchmarks/results/patches/session48_scripts
BM=benchmarks/results/patches/session46_scripts/bm.py
cd $ROOT/tests; export PYTHONPATH=$ROOT; packs $NEW
FILE=tests.txt step t_append 150 python -m pytest -q -p no:cacheprovider test_gpu_append_kv.py
FILE=tests.txt step memcheck 90 compute-sanitizer --tool memcheck --report-api-errors no python -m pytest -q \
  -p no:cacheprovider test_gpu_append_kv.py -k "many_tokens or mla or own_strides or out_of_range or graph"
cd $ROOT
ARGS="--routine append_paged_kv_cache append_paged_mla_kv_cache --requests 64 --tokens-per-request 1 4 16 64 512 --backends cutefi"
ARGS2="--routine append_paged_kv_cache append_paged_mla_kv_cache --requests 256 --tokens-per-request 1 8 --backends cutefi"
for round in 1 2; do for tree in base new; do
  if [ $tree = base ]; then export PYTHONPATH=/tmp/site:$ROOT/.ab_base; packs $ROOT/.ab_base/.cubins $ROOT/.cubins_copy $ROOT/.cubins_fill
  else export PYTHONPATH=/tmp/site:$ROOT; packs $NEW; fi
  FILE=ab.txt step ab_${tree}_$round 45 python $BM $ARGS
  FILE=ab.txt step ab2_${tree}_$round 30 python $BM $ARGS2
done; done
export PYTHONPATH=/tmp/site:$ROOT; packs $NEW
FILE=sweep.txt step sweep 120 python $S/sweep_ppc.py $ARGS
FILE=sweep.txt step sweep2 60 python $S/sweep_ppc.py $ARGS2
[ -z "$NO_APP" ] && FILE=app.txt step app 90 python $BM --routine append_paged_kv_cache append_paged_mla_kv_cache \
  --requests 64 --tokens-per-request 1 16 512 --refcheck --output $OUT/app.csv $OUT/app.json
grep -E "^FAILED|^ERROR" $OUT/tests.txt | head
