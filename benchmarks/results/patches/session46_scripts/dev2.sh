# session 46, H200 numbers: the new routines with their peers (CUPTI, refcheck), and the routines of the
# kernels this session changed (rope_quantize_fp8: one more set compare; append_paged_kv_cache: two row sets).
export CUTEFI_CACHE_DIR=/tmp/cc PYTHONPATH=/tmp/site:$PWD CUTEFI_PACK_PATH=$PWD/.cubins_rope:$PWD/.cubins_append:$PWD/.cubins_copy
pip install -q --no-deps --target /tmp/site .whl/*.whl > /dev/null 2>&1
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/gpu.txt
BM=benchmarks/results/patches/session46_scripts/bm.py
timeout 280 python $BM --routine rope_quantize_fp8_append_paged_kv_cache --tokens 1 32 1024 16384 \
  --tokens-per-request 1 --mla 0 1 --refcheck --output $OUT/rqa.csv $OUT/rqa.json > $OUT/rqa.txt 2>&1
tail -25 $OUT/rqa.txt
timeout 150 python $BM --routine append_paged_mla_kv_cache append_paged_kv_cache --requests 64 256 \
  --tokens-per-request 1 512 --page-size 1 64 --refcheck --output $OUT/app.csv $OUT/app.json > $OUT/app.txt 2>&1
tail -30 $OUT/app.txt
timeout 100 python $BM --routine rope_quantize_fp8 --tokens 32 1024 16384 --heads 128 --refcheck \
  --output $OUT/rq.csv > $OUT/rq.txt 2>&1
tail -8 $OUT/rq.txt
