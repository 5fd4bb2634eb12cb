# Session 52, issues 13 and 14 on one GPU (nvidia-h200 asked): every GEMM GPU test, the goal
# testlists against cuBLAS / torch._scaled_mm (CUPTI), ncu of the missed points against cuBLAS.
# carry: .cubins_gemm .cubins_copy .cubins_fill .whl
source benchmarks/results/patches/session48_scripts/common.sh
export PYTHONPATH=/tmp/site:$ROOT
packs $ROOT/.cubins_gemm $COMMON
cd $ROOT/tests
FILE=tests.txt step gemm 70 python -m pytest -q -p no:cacheprovider test_gpu_gemm*.py
cd $ROOT
FILE=bench.txt step llama 170 python $BM --backends cutefi cublas --testlist benchmarks/cases/gemm_llama.txt \
  --output $OUT/gemm_${G}_session52.json
FILE=bench.txt step fp8 110 python $BM --testlist benchmarks/cases/gemm_fp8_groupwise.txt \
  --output $OUT/gemm_fp8_${G}_session52.json
cat benchmarks/cases/gemm_grouped.txt benchmarks/cases/bmm_fp8_issue14.txt > /tmp/grouped_bmm.txt
FILE=bench.txt step grouped 60 python $BM --testlist /tmp/grouped_bmm.txt \
  --output $OUT/gemm_grouped_${G}_session52.json
FILE=bench.txt step square 50 python $BM --backends cutefi cublas --testlist benchmarks/cases/gemm_square.txt \
  --output $OUT/gemm_square_${G}_session52.json
FILE=ncu.txt step ncu_16 40 ncu --clock-control none --launch-skip 4 --launch-count 2 --section SpeedOfLight \
  --section MemoryWorkloadAnalysis --section Occupancy python3 benchmarks/profile_gemm.py --m 16 --n 4096 --k 4096
FILE=ncu.txt step ncu_4096 40 ncu --clock-control none --launch-skip 4 --launch-count 2 --section SpeedOfLight \
  --section WarpStateStats --section Occupancy python3 benchmarks/profile_gemm.py --m 4096 --n 4096 --k 4096
FILE=ncu.txt step ncu_fp8 50 ncu --clock-control none --kernel-name regex:"cutefi_gemm|nvjet|sm90" --launch-skip 3 \
  --launch-count 3 --section SpeedOfLight --section WarpStateStats --section SchedulerStats \
  python3 benchmarks/profile_gemm_fp8.py --m 4096 --n 7168 --k 18432
cat $OUT/gpu.txt
grep -h -E "^FAILED|^ERROR|passed|failed" $OUT/tests*.txt | head -20
grep -E "ratio|median" $OUT/bench.txt 2>/dev/null | cut -c1-200 | head -90
grep -E "cutefi_|nvjet|sm90|Duration|DRAM Throughput|Compute \(SM\)|Achieved Occ|Registers|Memory Throughput" $OUT/ncu.txt 2>/dev/null | head -40
