# Session 52, issues 12 and 15 on one GPU (nvidia-h200 asked): every decode/merge/append/prefill GPU
# test, memcheck and racecheck of a subset of each, the goal testlists with their peers (CUPTI),
# single_decode wall time, plan() host time, ncu of the decode and non-causal prefill goals against
# cuDNN's kernels. carry: .cubins_ng (attention., attention.append, prefill., norm., copy, fill packs)
# .cubins_rope .whl
source benchmarks/results/patches/session48_scripts/common.sh
export PYTHONPATH=/tmp/site:$ROOT
packs $ROOT/.cubins_ng $ROOT/.cubins_rope
PT="$PT -x"
cd $ROOT/tests
FILE=tests.txt step decode 120 $PT test_gpu_decode.py test_gpu_decode_forms.py test_gpu_merge.py \
  test_gpu_append_kv.py test_gpu_attention_fuzz.py test_gpu_pdl.py
FILE=tests.txt step prefill 60 $PT test_gpu_prefill.py test_gpu_prefill_compat.py test_gpu_prefill_compile.py \
  test_gpu_prefill_fp8.py test_gpu_prefill_masks.py test_gpu_prefill_mla.py test_gpu_prefill_mma_sync.py \
  test_gpu_prefill_paged.py test_gpu_prefill_repeat.py test_gpu_prefill_rope.py
FILE=tests.txt step memcheck 50 $SAN --tool memcheck $PT test_gpu_decode.py test_gpu_prefill.py \
  -k "(merged_in_kernel and 128) or (test_single and True-128)"
FILE=tests.txt step racecheck_d 45 $SAN --tool racecheck $PT test_gpu_decode.py -k "merged_in_kernel and 128"
FILE=tests.txt step racecheck_p 45 $SAN --tool racecheck $PT test_gpu_prefill.py -k "test_single and (7-300-True-128 or 513-777-True-128)"
cd $ROOT
FILE=bench.txt step dgoals 110 python $BM --testlist benchmarks/cases/decode_issue12.txt --refcheck \
  --output $OUT/decode_${G}_session52.json
FILE=bench.txt step pgoals 90 python $BM --testlist benchmarks/cases/prefill_issue15.txt --refcheck \
  --output $OUT/prefill_${G}_session52.json
FILE=bench.txt step wall 25 python $BM --routine single_decode batch_decode --batch 1 --kv-len 2048 --wall
FILE=bench.txt step plan 25 python benchmarks/decode_plan_time.py
FILE=ncu.txt step ncu_d 40 ncu --clock-control none -k "regex:decode|flash|fmha|attn|Attention|sdpa" -c 4 \
  --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats \
  --metrics dram__bytes_read.sum python3 benchmarks/profile_decode_l2.py
FILE=ncu.txt step ncu_p 45 ncu --clock-control none -k "regex:cutefi_prefill|fprop" -c 6 \
  --section SpeedOfLight --section Occupancy --section WarpStateStats --section ComputeWorkloadAnalysis \
  python3 benchmarks/profile_prefill.py --causal 0 --cudnn
cat $OUT/gpu.txt
grep -h -E "^FAILED|^ERROR|passed|failed|ERROR SUMMARY|RACECHECK SUMMARY|^== " $OUT/tests*.txt | head -30
grep -E "ratio|wall|plan|median" $OUT/bench.txt 2>/dev/null | cut -c1-220 | head -60
grep -E "cutefi_|flash|fmha|fprop|Duration|DRAM Throughput|Compute \(SM\)|Achieved Occ|Registers|dram__bytes" $OUT/ncu.txt 2>/dev/null | head -40
