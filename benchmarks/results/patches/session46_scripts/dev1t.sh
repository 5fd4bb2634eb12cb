# session 46, first device call: the new op's GPU tests, the refactored kernels' tests, opcheck,
# memcheck on the new tests, then the bench routine (cutefi-bench, CUPTI) with its peers.
export CUTEFI_CACHE_DIR=/tmp/cc PYTHONPATH=$PWD CUTEFI_PACK_PATH=$PWD/.cubins_rope:$PWD/.cubins_append:$PWD/.cubins_copy
pip install -q --no-deps --target /tmp/site .whl/*.whl > /dev/null 2>&1
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/gpu.txt
cd tests
python -m pytest -q -p no:cacheprovider test_gpu_rope_quant_append.py > $OUT/t_append.txt 2>&1
tail -5 $OUT/t_append.txt
python -m pytest -q -p no:cacheprovider test_gpu_rope_quant.py test_gpu_append_kv.py > $OUT/t_old.txt 2>&1
tail -3 $OUT/t_old.txt
python -m pytest -q -p no:cacheprovider test_gpu_compile.py -k "rope_quantize or append" > $OUT/t_compile.txt 2>&1
tail -3 $OUT/t_compile.txt
timeout 200 compute-sanitizer --tool memcheck --report-api-errors no python -m pytest -q -p no:cacheprovider \
  test_gpu_rope_quant_append.py -k "decode or padding or mla or prefill" > $OUT/memcheck.txt 2>&1
grep -E "ERROR SUMMARY|passed|failed" $OUT/memcheck.txt | tail -3
cd ..
PYTHONPATH=/tmp/site:$PWD timeout 120 python benchmarks/results/patches/session46_scripts/bm.py --routine \
  append_paged_mla_kv_cache --requests 64 --tokens-per-request 1 --refcheck > $OUT/bench_mla_smoke.txt 2>&1
tail -8 $OUT/bench_mla_smoke.txt
