# Session 51, device call 2 (nvidia-h200): issue 15 on the H200: every prefill GPU test (Hopper and
# mma.sync kernels, masks, paged, FP8, MLA, RoPE, compile), memcheck and racecheck of a subset,
# the goal testlist (benchmarks/cases/prefill_issue15.txt) with cuDNN and flash SDPA in the same
# run, then ncu of the d128 non-causal 4 x 4096 kernel against cuDNN's.
# Packs: .cubins_prefill (prefill.), .cubins_attn (attention.: merge), .cubins_copy, .cubins_fill; .whl: CUPTI.
source benchmarks/results/patches/session48_scripts/common.sh
export PYTHONPATH=/tmp/site:$ROOT
packs $ROOT/.cubins_prefill $ROOT/.cubins_attn $ROOT/.cubins_rope $COMMON
cd $ROOT/tests
FILE=tests.txt step prefill 200 python -m pytest -q -p no:cacheprovider test_gpu_prefill.py test_gpu_prefill_compat.py \
  test_gpu_prefill_compile.py test_gpu_prefill_fp8.py test_gpu_prefill_masks.py test_gpu_prefill_mla.py \
  test_gpu_prefill_mma_sync.py test_gpu_prefill_paged.py test_gpu_prefill_repeat.py test_gpu_prefill_rope.py
FILE=tests.txt step memcheck 60 compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 1 \
  python -m pytest -q -p no:cacheprovider test_gpu_prefill.py test_gpu_prefill_paged.py -k "ragged and 128"
FILE=tests.txt step racecheck 50 compute-sanitizer --tool racecheck --report-api-errors no \
  python -m pytest -q -p no:cacheprovider test_gpu_prefill.py -k "ragged and 64"
cd $ROOT
FILE=bench.txt step goals 200 python $BM --testlist benchmarks/cases/prefill_issue15.txt --refcheck \
  --output $OUT/prefill_h200_session51.csv $OUT/prefill_h200_session51.json
FILE=ncu.txt step ncu 60 ncu --clock-control none -k "regex:cutefi_prefill|fprop" -c 2 \
  --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats --section ComputeWorkloadAnalysis \
  python3 benchmarks/profile_prefill.py --causal 0 --cudnn
grep -E "^FAILED|^ERROR|passed|failed|ERROR SUMMARY|RACECHECK SUMMARY" $OUT/tests.txt | head -30
grep -E "cutefi|torch|cudnn|flash" $OUT/bench.txt | cut -c1-200 | head -50
grep -E "cutefi_|fprop|Duration|SM Busy|Compute \(SM\)|Achieved Occ|Registers|Issue Slots|Stall" $OUT/ncu.txt | head -40
