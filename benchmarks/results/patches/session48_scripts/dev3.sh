# Session 48, device call 3: the append kernel, working tree (a shared-memory table of the CTA's
# tokens' pages) and .ab_v2 (the same kernel but each thread looks up its own pieces' pages, no
# barrier), both with the pieces-a-CTA rule of launch.py (8 CTAs an SM), against the landed kernel
# (.ab_base): GPU tests of both, an A/B in two rounds, the routines with their peers.
# Carry .cubins_append2 .cubins_copy .cubins_fill .ab_base .ab_v2 .whl.
ROOT=$PWD
export CUTEFI_CACHE_DIR=/tmp/cc PYTHONUNBUFFERED=1
pip install -q --no-deps --target /tmp/site .whl/*.whl > /dev/null 2>&1
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/gpu.txt
packs() { local p=""; for d in "$@"; do p="$p:$d"; done; export CUTEFI_PACK_PATH=${p#:}; }
COMMON="$ROOT/.cubins_copy $ROOT/.cubins_fill"
DEADLINE=${DEADLINE:-560}
left() { [ $((DEADLINE - SECONDS)) -gt "$1" ]; }
step() { local name=$1 limit=$2; shift 2; left 20 || { echo "skipped $name"; return; }
  local t=$(( limit < DEADLINE - SECONDS ? limit : DEADLINE - SECONDS )); echo "== $name" >> $OUT/$FILE
  timeout $t "$@" >> $OUT/$FILE 2>&1; echo "== $name ($SECONDS s): $(grep -E 'passed|failed|error|ERROR SUMMARY' $OUT/$FILE | tail -1)"; }
tree() { case $1 in base) export PYTHONPATH=/tmp/site:$ROOT/.ab_base; packs $ROOT/.ab_base/.cubins $COMMON;;
  new) export PYTHONPATH=/tmp/site:$ROOT; packs $ROOT/.cubins_append2 $COMMON;;
  v2) export PYTHONPATH=/tmp/site:$ROOT/.ab_v2; packs $ROOT/.ab_v2/.cubins $COMMON;; esac; }
BM=$ROOT/benchmarks/results/patches/session46_scripts/bm.py
cd $ROOT/tests
for t in new v2; do tree $t; PYTHONPATH=$PYTHONPATH:$ROOT/tests FILE=tests.txt step t_$t 60 python -m pytest -q -p no:cacheprovider --rootdir $ROOT/tests $ROOT/tests/test_gpu_append_kv.py; done
cd $ROOT
ARGS="--routine append_paged_kv_cache append_paged_mla_kv_cache --requests 64 --tokens-per-request 1 4 16 64 512 --backends cutefi"
ARGS2="--routine append_paged_kv_cache append_paged_mla_kv_cache --requests 256 --tokens-per-request 1 8 --backends cutefi"
for round in 1 2; do for t in base new v2; do tree $t
  FILE=ab.txt step ab_${t}_$round 45 python $BM $ARGS
  FILE=ab.txt step ab2_${t}_$round 30 python $BM $ARGS2
done; done
tree new
FILE=app.txt step app 90 python $BM --routine append_paged_kv_cache append_paged_mla_kv_cache \
  --requests 64 --tokens-per-request 1 16 512 --refcheck --output $OUT/app.csv $OUT/app.json
grep -E "^FAILED|^ERROR" $OUT/tests.txt | head
touch $OUT/sweep.txt; python $ROOT/benchmarks/results/patches/session48_scripts/summarize.py $OUT
