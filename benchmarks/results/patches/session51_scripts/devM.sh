# Session 51, measurement call (nvidia-h200 with needs_h200): issues 12, 15, 13 and 14's goal
# testlists, each cutefi case with its peers in the same process (SDPA/cuDNN/flash, cuBLAS), then
# ncu of the 64 x 4096 decode against SDPA's kernel, and a config sweep of
# 16 / 64 x 4096 x 4096 (warm weight). Pack: .cubins_m = the attention., attention.append,
# prefill., gemm, copy and fill packs (cutefi aot --arch 9.0a --only ...) in one folder, *.ptx
# deleted; .whl: CUPTI.
pip install -q --no-deps --target /tmp/site .whl/*.whl > /dev/null 2>&1
export CUTEFI_CACHE_DIR=/tmp/cc PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 CUTEFI_PACK_PATH=$PWD/.cubins_m
BM=benchmarks/results/patches/session46_scripts/bm.py
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/gpu.txt
G=$(grep -q H200 $OUT/gpu.txt && echo h200 || echo h100)
printf '%s\n' "--routine mm_bf16 --dtype bf16 fp16 --m 4096 --n 4096 --k 4096" \
  "--routine mm_bf16 --dtype bf16 fp16 --m 8192 --n 8192 --k 8192" "--routine bmm_fp8 --m 8192 --n 8192 --k 8192" > /tmp/x.txt
cat benchmarks/cases/gemm_llama.txt /tmp/x.txt > /tmp/g13.txt
cat benchmarks/cases/gemm_fp8_groupwise.txt benchmarks/cases/gemm_grouped.txt > /tmp/g14.txt
timeout 150 python $BM --testlist benchmarks/cases/decode_issue12.txt --refcheck \
  --output $OUT/decode_${G}_session51.csv $OUT/decode_${G}_session51.json > $OUT/bench.txt 2>&1
timeout 30 python $BM --routine single_decode batch_decode --batch 1 --kv-len 2048 --wall >> $OUT/bench.txt 2>&1
timeout 150 python $BM --testlist benchmarks/cases/prefill_issue15.txt --refcheck \
  --output $OUT/prefill_${G}_session51.csv $OUT/prefill_${G}_session51.json >> $OUT/bench.txt 2>&1
timeout 200 python $BM --backends cutefi cublas --testlist /tmp/g13.txt --refcheck \
  --output $OUT/gemm_${G}_session51.csv $OUT/gemm_${G}_session51.json >> $OUT/bench.txt 2>&1
timeout 120 python $BM --testlist /tmp/g14.txt --refcheck \
  --output $OUT/gemm_fp8_${G}_session51.csv $OUT/gemm_fp8_${G}_session51.json >> $OUT/bench.txt 2>&1
timeout 40 ncu --clock-control none -k "regex:decode|flash|fmha|attn|Attention|sdpa" --section SpeedOfLight \
  --section Occupancy --section WarpStateStats python3 benchmarks/profile_decode_l2.py >> $OUT/bench.txt 2>&1
timeout 70 python benchmarks/gemm_sweep.py --m 16 64 --nk 4096,4096 --splits 0 1 2 4 --warm \
  --out $OUT/gemm_sweep_${G}_session51.json > /dev/null 2>&1
(cd $OUT && tar czf json.tar.gz *.json && rm -f *.json)
cat $OUT/gpu.txt; grep -E "Duration|DRAM Through|Achieved Occ|^  [a-zA-Z_]|wall" $OUT/bench.txt | head -30
