# Session 50, device call 2. (1) RMSNorm 16384 read twice above 512 rows (patch
# rmsnorm_16384_reread_session49.patch, applied in the working tree): GPU tests, A/B against HEAD
# (.ab_base). (2) LayerNorm 4096-class small-row variants, A/B against HEAD: v1 (.ab_v1) the
# persistent LayerNorm builds take the one-row path at one row a thread; v2 (.ab_v2) shifted rows
# (4095) on a one-row build of 256 threads a row, and gamma and beta loaded with x on the builds
# that load the weight early (the aligned latency builds). (3) On an H200, issue 11's RMSNorm grid
# with its peers. Carry .cubins_rmsall .ab_base .ab_v1 .ab_v2 .cubins_copy .cubins_fill .whl.
# (packs of the trees: session49_scripts/build_rms.py DIR, and build_class.py DIR layer 4096, for each.)
source benchmarks/results/patches/session48_scripts/common.sh
cat $OUT/gpu.txt
run_tree() { local t=$1 f=$2; shift 2
  case $t in new) T=$ROOT; P=$ROOT/.cubins_rmsall;; base) T=$ROOT/.ab_base; P=$ROOT/.ab_base/.cubins;;
    v1|v2) T=$ROOT/.ab_$t; P=$ROOT/.ab_$t/.cubins;; esac
  echo "== $t $*" >> $OUT/$f
  PYTHONPATH=/tmp/site:$T CUTEFI_PACK_PATH=$P:$ROOT/.cubins_copy:$ROOT/.cubins_fill timeout 60 python $BM "$@" \
    2>&1 | grep -E "^routine|^rmsnorm|^layernorm|rror" >> $OUT/$f; }
test_tree() { local t=$1; shift
  case $t in new) T=$ROOT; P=$ROOT/.cubins_rmsall;; v1|v2) T=$ROOT/.ab_$t; P=$ROOT/.ab_$t/.cubins;; esac
  (cd $ROOT/tests && PYTHONPATH=$T CUTEFI_PACK_PATH=$P:$ROOT/.cubins_copy:$ROOT/.cubins_fill FILE=tests_$t.txt \
    step t_$t 70 python -m pytest -q -p no:cacheprovider -x "$@"); }
test_tree new test_gpu_rmsnorm.py test_gpu_norm_latency.py -k "16384 or latency"
LN_TESTS="test_gpu_layernorm.py test_gpu_norm_quant.py test_gpu_norm_latency.py"
test_tree v1 $LN_TESTS -k "bf16 and (4095 or 4096 or 4000 or 3001) and (layer or Layer)"
test_tree v2 $LN_TESTS -k "bf16 and (4095 or 4096 or 4000 or 3001) and (layer or Layer)"
LN="--routine layernorm --rows 1 128 512 2048 16384 --hidden 4095 4096 --param-bits 16 32 --backends cutefi --refcheck"
LQ="--routine layernorm_quant --rows 1 128 512 16384 --hidden 4095 4096 --backends cutefi --refcheck"
for r in 1 2; do for t in base v1 v2; do
  left 120 && run_tree $t ln.txt $LN; left 120 && run_tree $t ln.txt $LQ
done; done
for r in 1 2; do for t in base new; do
  left 90 && run_tree $t ab.txt --routine rmsnorm --rows 1 128 256 512 768 1024 4096 16384 65536 --hidden 16384 --backends cutefi --refcheck
done; done
if grep -q H200 $OUT/gpu.txt; then
  export PYTHONPATH=/tmp/site:$ROOT
  FILE=grid.txt step grid 200 python $BM --routine rmsnorm --rows 1 128 4096 16384 65536 --hidden 2048 4096 8192 16384 \
    --refcheck --output $OUT/rmsnorm_grid_h200.csv $OUT/rmsnorm_grid_h200.json
fi
for t in new v1 v2; do echo "tests $t:"; grep -E "^FAILED|^ERROR|passed|failed" $OUT/tests_$t.txt | head -5; done
awk '{print $1, $2, $3, $4, $5, $6}' $OUT/ln.txt | grep -v "^routine"; awk '{print $1, $2, $3, $4, $5, $6}' $OUT/ab.txt | grep -v "^routine"
grep -E "rmsnorm" $OUT/grid.txt 2>/dev/null | awk '{print $2, $3, $5, $6, $11}'
