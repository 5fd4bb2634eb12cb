# Session 51, device call 1 (nvidia-h200): (1) the norm GPU tests session 50 could not run (latency
# builds, 16-bit LayerNorm parameters, 16-bit FP8 LayerNorm, memcheck of the shifted latency
# builds); (2) issue 12 on the H200: every decode/merge/append GPU test, memcheck and racecheck
# of a subset, the goal testlist (benchmarks/cases/decode_issue12.txt) with SDPA/cuDNN in the same
# run, single_decode's wall time, plan() host time, ncu of the 64 x 4096 decode against SDPA's.
# Packs (cutefi aot --arch 9.0a --only ...): .cubins_attn (attention.), .cubins_append2, .cubins_prefill,
# .cubins_ln (norm.layernorm), .cubins_rmsall (norm.rmsnorm), .cubins_copy, .cubins_fill; .whl: CUPTI.
source benchmarks/results/patches/session48_scripts/common.sh
export PYTHONPATH=/tmp/site:$ROOT
packs $ROOT/.cubins_attn $ROOT/.cubins_append2 $ROOT/.cubins_prefill $ROOT/.cubins_ln $ROOT/.cubins_rmsall $COMMON
cd $ROOT/tests
FILE=tests.txt step norm_pending 100 python -m pytest -q -p no:cacheprovider test_gpu_norm_latency.py \
  test_gpu_layernorm.py test_gpu_norm_quant.py -k "latency or 16bit"
FILE=tests.txt step decode 150 python -m pytest -q -p no:cacheprovider test_gpu_decode.py test_gpu_decode_forms.py \
  test_gpu_merge.py test_gpu_append_kv.py test_gpu_attention_fuzz.py test_gpu_pdl.py
FILE=tests.txt step memcheck 90 compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 1 \
  python -m pytest -q -p no:cacheprovider test_gpu_decode.py test_gpu_norm_latency.py \
  -k "merged_in_kernel or (layer and (N4095 or N3797))"
FILE=tests.txt step racecheck 40 compute-sanitizer --tool racecheck --report-api-errors no --error-exitcode 1 \
  python -m pytest -q -p no:cacheprovider test_gpu_decode.py -k "merged_in_kernel or packed_kv_heads"
cd $ROOT
FILE=bench.txt step goals 150 python $BM --testlist benchmarks/cases/decode_issue12.txt --refcheck \
  --output $OUT/decode_h200_session51.csv $OUT/decode_h200_session51.json
FILE=bench.txt step wall 40 python $BM --routine single_decode batch_decode --batch 1 --kv-len 2048 --wall
FILE=bench.txt step plan 40 python benchmarks/decode_plan_time.py
FILE=ncu.txt step ncu 70 ncu --clock-control none -k "regex:decode|flash|fmha|attn|Attention|sdpa" \
  --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats \
  --metrics dram__bytes_read.sum,lts__t_sectors_srcunit_tex_op_read.sum,gpu__time_duration.sum \
  python3 benchmarks/profile_decode_l2.py
grep -E "^FAILED|^ERROR|passed|failed|ERROR SUMMARY|RACECHECK SUMMARY|skipped " $OUT/tests.txt | head -30
grep -E "cutefi|torch|cudnn|wall|plan|median" $OUT/bench.txt | cut -c1-200 | head -70
grep -E "cutefi_|flash|fmha|Duration|DRAM Throughput|Achieved Occ|Registers|Long Score|dram__bytes|lts__t_sectors" $OUT/ncu.txt | head -40
