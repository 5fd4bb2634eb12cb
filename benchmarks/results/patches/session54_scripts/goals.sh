# Session 54: issue 11's goals in one call on one GPU (asked as nvidia-h200): the RMSNorm grid against
# torch eager and torch.compile; LayerNorm, the fused add, the three FP8 norms and RMSNorm at 4095 and
# 4096 columns (16384 and 65536 rows) with the same peers; then every norm GPU test, the torch.compile /
# opcheck tests, and memcheck of the odd-size cases. CUPTI medians, warm L2, --refcheck.
# carry: .cubins_ng (norm., attention., prefill., copy, fill) .cubins_rope .whl
source benchmarks/results/patches/session48_scripts/common.sh
export PYTHONPATH=/tmp/site:$ROOT
packs $ROOT/.cubins_ng $ROOT/.cubins_rope
git log --oneline -1 > $OUT/tree.txt 2>/dev/null
FILE=bench.txt step grid 170 python $BM --refcheck --routine rmsnorm --rows 1 128 4096 16384 65536 \
  --hidden 2048 4096 8192 16384 --output $OUT/rmsnorm_grid_${G}_session54.csv $OUT/rmsnorm_grid_${G}_session54.json
FILE=bench.txt step goals 200 python $BM --refcheck --routine layernorm layernorm_quant rmsnorm_quant \
  fused_add_rmsnorm fused_add_rmsnorm_quant rmsnorm --rows 16384 65536 --hidden 4095 4096 \
  --output $OUT/norm_goals_${G}_session54.csv $OUT/norm_goals_${G}_session54.json
cd $ROOT/tests
FILE=tests.txt step norm 120 $PT test_gpu_rmsnorm.py test_gpu_layernorm.py test_gpu_norm_quant.py \
  test_gpu_norm_layouts.py test_gpu_norm_latency.py test_gpu_norm_packed.py test_gpu_norm_long.py test_gpu_norm_silu.py
FILE=tests.txt step compile 80 $PT test_gpu_compile.py
FILE=tests.txt step memcheck 60 $SAN --tool memcheck $PT test_gpu_norm_quant.py test_gpu_layernorm.py \
  test_gpu_rmsnorm.py test_gpu_norm_layouts.py -k "(4095 or 111) and not fp16"
cd $ROOT
cat $OUT/gpu.txt
grep -h -E "^FAILED|^ERROR|passed|failed|ERROR SUMMARY|^== " $OUT/tests*.txt | head -30
grep -E " cutefi | copy " $OUT/bench.txt 2>/dev/null | cut -c1-160 | head -80
