# Session 52, issue 15 alone (nvidia-h200 asked), for a call with ~7 device minutes: every prefill
# GPU test, memcheck and racecheck of a causal d128 subset, prefill_issue15.txt with its peers
# (CUPTI, --refcheck), ncu of the non-causal 4 x 4096 prefill against cuDNN's kernel.
# carry: .cubins_ng .cubins_rope .whl
source benchmarks/results/patches/session48_scripts/common.sh
export PYTHONPATH=/tmp/site:$ROOT
packs $ROOT/.cubins_ng $ROOT/.cubins_rope
cd $ROOT/tests
FILE=tests.txt step prefill 60 $PT test_gpu_prefill.py test_gpu_prefill_compat.py test_gpu_prefill_compile.py \
  test_gpu_prefill_fp8.py test_gpu_prefill_masks.py test_gpu_prefill_mla.py test_gpu_prefill_mma_sync.py \
  test_gpu_prefill_paged.py test_gpu_prefill_repeat.py test_gpu_prefill_rope.py
FILE=tests.txt step memcheck 40 $SAN --tool memcheck $PT test_gpu_prefill.py -k "test_single and True-128"
FILE=tests.txt step racecheck 45 $SAN --tool racecheck $PT test_gpu_prefill.py -k "test_single and (7-300-True-128 or 513-777-True-128)"
cd $ROOT
FILE=bench.txt step pgoals 100 python $BM --testlist benchmarks/cases/prefill_issue15.txt --refcheck \
  --output $OUT/prefill_${G}_session52.json
FILE=ncu.txt step ncu_p 45 ncu --clock-control none -k "regex:cutefi_prefill|fprop" -c 6 \
  --section SpeedOfLight --section Occupancy --section WarpStateStats --section ComputeWorkloadAnalysis \
  python3 benchmarks/profile_prefill.py --causal 0 --cudnn
cat $OUT/gpu.txt
grep -h -E "^FAILED|^ERROR|passed|failed|ERROR SUMMARY|RACECHECK SUMMARY|^== " $OUT/tests*.txt | head -30
grep -E "cutefi|cudnn" $OUT/bench.txt 2>/dev/null | cut -c1-220 | head -40
grep -E "cutefi_|fprop|Duration|DRAM Throughput|Compute \(SM\)|Achieved Occ|Registers|Issue Slots|SM Busy" $OUT/ncu.txt 2>/dev/null | head -40
