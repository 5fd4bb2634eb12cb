# Written in session 46 and not run there (no machine could be started): the GPU tests of the new ops
# (rope_quantize_fp8_append_paged_kv_cache, append_paged_mla_kv_cache) and of the kernels they changed,
# opcheck, memcheck on a subset, then the routines with their peers (CUPTI, refcheck). Carry
# .cubins_rope .cubins_append .cubins_copy .whl (cutefi aot --arch 9.0a --only rope. / attention.append / copy).
export CUTEFI_CACHE_DIR=/tmp/cc PYTHONPATH=$PWD CUTEFI_PACK_PATH=$PWD/.cubins_rope:$PWD/.cubins_append:$PWD/.cubins_copy
export PYTHONUNBUFFERED=1
pip install -q --no-deps --target /tmp/site .whl/*.whl > /dev/null 2>&1
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/gpu.txt
ROOT=$PWD
cd tests
timeout 240 python -m pytest -q -p no:cacheprovider test_gpu_rope_quant_append.py test_gpu_append_kv.py \
  test_gpu_rope_quant.py > $OUT/t_gpu.txt 2>&1; tail -4 $OUT/t_gpu.txt
timeout 150 python -m pytest -q -p no:cacheprovider test_gpu_compile.py -k "rope_quantize or append" \
  > $OUT/t_compile.txt 2>&1; tail -3 $OUT/t_compile.txt
timeout 150 compute-sanitizer --tool memcheck --report-api-errors no python -m pytest -q -p no:cacheprovider \
  test_gpu_rope_quant_append.py test_gpu_append_kv.py -k "(decode and bf16 and e4m3) or mla or padding or own_strides" \
  > $OUT/memcheck.txt 2>&1; grep -E "ERROR SUMMARY|passed|failed" $OUT/memcheck.txt | tail -3
cd $ROOT
export PYTHONPATH=/tmp/site:$PWD
BM=benchmarks/results/patches/session46_scripts/bm.py
timeout 200 python $BM --routine rope_quantize_fp8_append_paged_kv_cache --tokens 1 32 1024 16384 \
  --tokens-per-request 1 --mla 0 1 --refcheck --output $OUT/rqa.csv $OUT/rqa.json > $OUT/rqa.txt 2>&1
tail -22 $OUT/rqa.txt
timeout 100 python $BM --routine append_paged_mla_kv_cache append_paged_kv_cache --requests 64 \
  --tokens-per-request 1 512 --page-size 1 --refcheck --output $OUT/app.csv $OUT/app.json > $OUT/app.txt 2>&1
tail -14 $OUT/app.txt
timeout 80 python $BM --routine rope_quantize_fp8 --tokens 1024 16384 --heads 128 --refcheck \
  --output $OUT/rq.csv > $OUT/rq.txt 2>&1
tail -6 $OUT/rq.txt
