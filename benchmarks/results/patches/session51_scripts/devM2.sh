# Session 51, the short measurement call (nvidia-h200 with needs_h200; about 200 s of device time
# left): issue 12's and 15's goal testlists and issue 14's block-scaled list, each with its peers in
# the same process, then ncu's speed-of-light of the 64 x 4096 decode against SDPA's kernel.
# Pack: .cubins_m2 = the attention., prefill., gemm, copy and fill packs in one folder; .whl: CUPTI.
pip install -q --no-deps --target /tmp/site .whl/*.whl > /dev/null 2>&1
export CUTEFI_CACHE_DIR=/tmp/cc PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 CUTEFI_PACK_PATH=$PWD/.cubins_m2
BM=benchmarks/results/patches/session46_scripts/bm.py
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/gpu.txt
G=$(grep -q H200 $OUT/gpu.txt && echo h200 || echo h100)
timeout 85 python $BM --testlist benchmarks/cases/decode_issue12.txt --refcheck \
  --output $OUT/decode_${G}_session51.csv $OUT/decode_${G}_session51.json > $OUT/bench.txt 2>&1
timeout 60 python $BM --testlist benchmarks/cases/prefill_issue15.txt --refcheck \
  --output $OUT/prefill_${G}_session51.csv $OUT/prefill_${G}_session51.json >> $OUT/bench.txt 2>&1
[ $SECONDS -lt 150 ] && timeout 25 python $BM --testlist benchmarks/cases/gemm_fp8_groupwise.txt --refcheck \
  --output $OUT/gemm_fp8_${G}_session51.csv $OUT/gemm_fp8_${G}_session51.json >> $OUT/bench.txt 2>&1
(cd $OUT && tar czf json.tar.gz *.json && rm -f *.json)
cat $OUT/gpu.txt; tail -3 $OUT/bench.txt
