# Session 47, second device call (NOT RUN: no machine could be started before the device time ran
# out). The append kernel's new CTA shape (whole tokens a CTA, loads of a round before its stores;
# benchmarks/results/patches/append_whole_tokens_session47.patch, not landed): its GPU tests, an A/B
# against the landed kernel, the routines with their peers, memcheck; and LayerNorm's fp32 against
# 16-bit gamma/beta cost. To run it: copy the landed tree's cutefi/ to .ab_base/ (git archive HEAD cutefi
# | tar -x -C .ab_base) and build its pack (cutefi aot --arch 9.0a --only attention.append --out
# .ab_base/.cubins, run inside .ab_base), then `git apply` the patch and build .cubins_append from the
# patched tree (prepare_dev2.sh does all of it). Carry .cubins_append .cubins_copy .cubins_fill .cubins_ln
# .ab_base .whl.
ROOT=$PWD
export CUTEFI_CACHE_DIR=/tmp/cc PYTHONUNBUFFERED=1
pip install -q --no-deps --target /tmp/site .whl/*.whl > /dev/null 2>&1
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/gpu.txt
packs() { local p=""; for d in "$@"; do p="$p:$d"; done; export CUTEFI_PACK_PATH=${p#:}; }
NEW="$ROOT/.cubins_append $ROOT/.cubins_copy $ROOT/.cubins_fill"
DEADLINE=${DEADLINE:-560}  # seconds of this call the steps may use (the device budget may be short)
left() { [ $((DEADLINE - SECONDS)) -gt "$1" ]; }
step() { local name=$1 limit=$2; shift 2; left 20 || { echo "skipped $name"; return; }
  local t=$(( limit < DEADLINE - SECONDS ? limit : DEADLINE - SECONDS )); echo "== $name" >> $OUT/$FILE
  timeout $t "$@" >> $OUT/$FILE 2>&1; echo "== $name ($SECONDS s): $(grep -E 'passed|failed|error|ERROR SUMMARY' $OUT/$FILE | tail -1)"; }
cd $ROOT/tests
export PYTHONPATH=$ROOT
packs $NEW
FILE=tests.txt step t_append 120 python -m pytest -q -p no:cacheprovider test_gpu_append_kv.py
cd $ROOT
BM=benchmarks/results/patches/session46_scripts/bm.py
ARGS="--routine append_paged_kv_cache append_paged_mla_kv_cache --requests 64 --tokens-per-request 1 16 512 --backends cutefi"
for tree in base new; do
  if [ $tree = base ]; then export PYTHONPATH=/tmp/site:$ROOT/.ab_base; packs $ROOT/.ab_base/.cubins $ROOT/.cubins_copy $ROOT/.cubins_fill
  else export PYTHONPATH=/tmp/site:$ROOT; packs $NEW; fi
  FILE=ab.txt step ab_$tree 45 python $BM $ARGS
done
export PYTHONPATH=/tmp/site:$ROOT; packs $NEW
FILE=app.txt step app 80 python $BM --routine append_paged_kv_cache append_paged_mla_kv_cache --requests 64 \
  --tokens-per-request 1 512 --refcheck --output $OUT/app.csv $OUT/app.json
cd $ROOT/tests
export PYTHONPATH=$ROOT
FILE=memcheck.txt step memcheck 60 compute-sanitizer --tool memcheck --report-api-errors no python -m pytest -q \
  -p no:cacheprovider test_gpu_append_kv.py -k "many_tokens or mla or own_strides or out_of_range or graph"
cd $ROOT
packs $ROOT/.cubins_ln $ROOT/.cubins_copy $ROOT/.cubins_fill
FILE=tests.txt step ln_params 40 python benchmarks/results/patches/session47_scripts/ln_params.py $OUT/ln_params.json
grep -E "^FAILED|^ERROR" $OUT/tests.txt | head; grep -E " cutefi " $OUT/ab.txt; grep cutefi -A2 $OUT/app.txt | head -40
grep "{" $OUT/tests.txt | tail -8
