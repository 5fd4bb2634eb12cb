# Session 51, device call 3 (nvidia-h200): issues 13 and 14 on the H200: every GEMM GPU test, issue
# 13's Llama grid and cubes against cuBLAS in the same run, issue 14's block-scaled, per-tensor,
# grouped and segment lists, then ncu of the worst points (mm_bf16 64 x 4096 x 4096, block-scaled
# 4096 x 7168 x 2048) with cuBLAS's kernels.
# Packs: .cubins_gemm (cutefi aot --arch 9.0a --only gemm; *.ptx deleted), .cubins_copy, .cubins_fill; .whl: CUPTI.
source benchmarks/results/patches/session48_scripts/common.sh
export PYTHONPATH=/tmp/site:$ROOT
packs $ROOT/.cubins_gemm $COMMON
cd $ROOT/tests
FILE=tests.txt step gemm 170 python -m pytest -q -p no:cacheprovider test_gpu_gemm.py test_gpu_gemm_fp32_out.py \
  test_gpu_gemm_fp8.py test_gpu_gemm_fp8_mma_sync.py test_gpu_gemm_gemv.py test_gpu_gemm_groupwise.py \
  test_gpu_gemm_segments.py test_gpu_gemm_segments_mma_sync.py test_gpu_gemm_stream.py
cd $ROOT
printf '%s\n' "--routine mm_bf16 --dtype bf16 fp16 --m 4096 --n 4096 --k 4096" \
  "--routine mm_bf16 --dtype bf16 fp16 --m 8192 --n 8192 --k 8192" "--routine bmm_fp8 --m 8192 --n 8192 --k 8192" \
  > /tmp/extra.txt
cat benchmarks/cases/gemm_llama.txt /tmp/extra.txt > /tmp/g13.txt
FILE=bench.txt step g13 190 python $BM --backends cutefi cublas --testlist /tmp/g13.txt --refcheck \
  --output $OUT/gemm_h200_session51.csv $OUT/gemm_h200_session51.json
cat benchmarks/cases/gemm_fp8_groupwise.txt benchmarks/cases/gemm_grouped.txt > /tmp/g14.txt
FILE=bench.txt step g14 110 python $BM --testlist /tmp/g14.txt --refcheck \
  --output $OUT/gemm_fp8_h200_session51.csv $OUT/gemm_fp8_h200_session51.json
FILE=ncu.txt step ncu13 40 ncu --clock-control none --launch-skip 4 --launch-count 2 --section SpeedOfLight \
  --section WarpStateStats --section Occupancy python3 benchmarks/profile_gemm.py --m 64 --n 4096 --k 4096
FILE=ncu.txt step ncu14 40 ncu --clock-control none --kernel-name "regex:cutefi_gemm|nvjet|sm90" --launch-skip 3 \
  --launch-count 3 --section SpeedOfLight --section WarpStateStats --section SchedulerStats \
  python3 benchmarks/profile_gemm_fp8.py --m 4096 --n 7168 --k 2048
grep -E "^FAILED|^ERROR|passed|failed" $OUT/tests.txt | head -20
grep -E "cutefi|cublas|torch" $OUT/bench.txt | cut -c1-180 | head -90
grep -E "^  [a-z_A-Z0-9]+.*\(|Duration|Compute \(SM\)|DRAM Throughput|Issued Warp|Registers" $OUT/ncu.txt | head -40
