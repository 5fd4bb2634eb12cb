# Session 54 (for a later session: no GPU was lent in 54): hidden 4095 against 4096, four trees (prepare_ab.sh),
# one process a tree, trees alternated twice, CUPTI medians, --refcheck (float64 reference):
#   base HEAD; a: staged-weight one-row RMSNorm; b: parked-weight FP8 RMSNorm ring at 1024 an SM;
#   c: b and LayerNorm's gamma/beta parked (5 CTAs an SM). RMSNorm routines on base/a/b, LayerNorm on base/c.
# Then each patched tree's GPU tests of its builds, memcheck and racecheck of a subset.
# carry: .ab_base .ab_a .ab_b .ab_c .whl. Argument: bench, tests or both (two calls fit the 600 s limit better).
PART=${1:-both}
source benchmarks/results/patches/session48_scripts/common.sh
W=/tmp/s54which.py; printf 'import cutefi\nprint("cutefi from", cutefi.__file__)\n' > $W
use() { export PYTHONPATH=/tmp/site:$ROOT/.ab_$1; packs $ROOT/.ab_$1/.cubins; }
ROWS="--rows 1 128 1024 4096 16384 65536 --hidden 4095 4096 --backends cutefi --refcheck"
[ $PART = tests ] || for r in 1 2; do
  for t in base a b; do
    use $t; python $W >> $OUT/ab.txt
    FILE=ab.txt step rms_$t$r 60 python $BM --routine rmsnorm_quant rmsnorm fused_rmsnorm_silu $ROWS \
      --output $OUT/ab_rms_${t}_$r.json
  done
  for t in base c; do
    use $t; python $W >> $OUT/ab.txt
    FILE=ab.txt step ln_$t$r 50 python $BM --routine layernorm layernorm_quant $ROWS --output $OUT/ab_ln_${t}_$r.json
  done
done
cd $ROOT/tests
[ $PART = bench ] || {
K="(4095 or 3001 or 2999 or 4001) and not fused"
for t in a b c; do
  use $t
  FILE=tests_$t.txt step tests_$t 60 $PT test_gpu_rmsnorm.py test_gpu_norm_quant.py test_gpu_norm_silu.py \
    test_gpu_layernorm.py -k "$K"
  FILE=tests_$t.txt step latency_$t 30 $PT test_gpu_norm_latency.py -k "N409"
  FILE=tests_$t.txt step memcheck_$t 50 $SAN --tool memcheck $PT test_gpu_norm_quant.py test_gpu_rmsnorm.py \
    test_gpu_layernorm.py -k "$K and (bf16 or bfloat16) and 4095"
done
use c; FILE=tests_c.txt step racecheck_c 30 $SAN --tool racecheck $PT test_gpu_norm_quant.py -k "4095 and bf16 and e4m3"
}
cd $ROOT
cat $OUT/gpu.txt
grep -h -E "^FAILED|^ERROR|passed|failed|ERROR SUMMARY|RACECHECK SUMMARY|^== " $OUT/tests*.txt | head -40
grep -E "cutefi from| cutefi |^== " $OUT/ab.txt | cut -c1-150
