pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl 2>&1 | grep -v WARN | tail -1
export PYTHONPATH=/tmp/site:$PWD CUTEFI_CACHE_DIR=/tmp/cc CUTEFI_PACK_PATH=$PWD/.cubins_gemm_new
python -m pytest -q tests/test_gpu_gemm_gemv.py tests/test_gpu_gemm.py tests/test_gpu_gemm_stream.py 2>&1 | tail -4 | tee $OUT/gemm_tests.txt
compute-sanitizer --tool memcheck --report-api-errors no python -m pytest -q tests/test_gpu_gemm_gemv.py -k "forced and bfloat16-bfloat16 or strided" 2>&1 | tail -4 | tee $OUT/memcheck_gemv.txt
