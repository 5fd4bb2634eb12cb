# Session 51, adaptive device call (nvidia-h200 asked; an H100 may come): the norm tests session 50
# could not run and every decode/merge/append test (issue 12), with memcheck/racecheck of a subset;
# then on an H200 issue 12's goal testlist, single_decode wall time, plan() host time and ncu of
# 64 x 4096 against SDPA's kernel; then (any GPU) every prefill test (issue 15).
# Pack: .cubins_ng = the attention., attention.append, prefill., norm.rmsnorm, norm.layernorm, copy and
# fill packs (cutefi aot --arch 9.0a --only ...) in one folder, *.ptx deleted; .whl: CUPTI.
source benchmarks/results/patches/session48_scripts/common.sh
export PYTHONPATH=/tmp/site:$ROOT
packs $ROOT/.cubins_ng
PT="python -m pytest -q -p no:cacheprovider"
SAN="compute-sanitizer --report-api-errors no --error-exitcode 1"
cd $ROOT/tests
FILE=tests.txt step norm 100 $PT test_gpu_norm_latency.py test_gpu_layernorm.py test_gpu_norm_quant.py -k "latency or 16bit"
FILE=tests.txt step decode 150 $PT test_gpu_decode.py test_gpu_decode_forms.py test_gpu_merge.py \
  test_gpu_append_kv.py test_gpu_attention_fuzz.py test_gpu_pdl.py
FILE=tests.txt step memcheck 60 $SAN --tool memcheck $PT test_gpu_decode.py test_gpu_norm_latency.py \
  -k "merged_in_kernel or (layer and (N4095 or N3797))"
FILE=tests.txt step racecheck 40 $SAN --tool racecheck $PT test_gpu_decode.py -k "merged_in_kernel"
cd $ROOT
if grep -q H200 $OUT/gpu.txt; then
  FILE=bench.txt step goals 150 python $BM --testlist benchmarks/cases/decode_issue12.txt --refcheck \
    --output $OUT/decode_h200_session51.csv $OUT/decode_h200_session51.json
  FILE=bench.txt step wall 40 python $BM --routine single_decode batch_decode --batch 1 --kv-len 2048 --wall
  FILE=bench.txt step plan 30 python benchmarks/decode_plan_time.py
  FILE=ncu.txt step ncu 60 ncu --clock-control none -k "regex:decode|flash|fmha|attn|Attention|sdpa" \
    --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats \
    --metrics dram__bytes_read.sum,lts__t_sectors_srcunit_tex_op_read.sum python3 benchmarks/profile_decode_l2.py
fi
cd $ROOT/tests
FILE=tests_prefill.txt step prefill 170 $PT test_gpu_prefill.py test_gpu_prefill_compat.py test_gpu_prefill_compile.py \
  test_gpu_prefill_fp8.py test_gpu_prefill_masks.py test_gpu_prefill_mla.py test_gpu_prefill_mma_sync.py \
  test_gpu_prefill_paged.py test_gpu_prefill_repeat.py test_gpu_prefill_rope.py
cat $OUT/gpu.txt
grep -h -E "^FAILED|^ERROR|passed|failed|ERROR SUMMARY|RACECHECK SUMMARY" $OUT/tests*.txt | head -30
grep -E "cutefi|torch|cudnn|wall|plan|median" $OUT/bench.txt 2>/dev/null | cut -c1-200 | head -60
grep -E "cutefi_|flash|fmha|Duration|DRAM Throughput|Achieved Occ|Registers|Long Score|dram__bytes|lts__t_sectors" $OUT/ncu.txt 2>/dev/null | head -30
