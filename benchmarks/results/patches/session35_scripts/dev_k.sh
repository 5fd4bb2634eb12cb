pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl 2>/dev/null
export CUTEFI_CACHE_DIR=/tmp/cc PYTHONPATH=/tmp/site:$PWD CUTEFI_PACK_PATH=$PWD/.cubins_full
timeout 250 python -m pytest -q -p no:cacheprovider tests/test_gpu_gemm_stream.py tests/test_gpu_gemm.py tests/test_gpu_gemm_fp8.py tests/test_gpu_gemm_groupwise.py tests/test_gpu_gemm_segments.py tests/test_gpu_gemm_fp8_mma_sync.py tests/test_gpu_gemm_segments_mma_sync.py 2>&1 | tail -6 | tee $OUT/gpu_tests.txt
timeout 300 python -m cutefi.bench.cli --testlist benchmarks/cases/gemm_llama.txt --backends cutefi cublas --refcheck --output $OUT/gemm_llama_h200_session35.csv $OUT/gemm_llama_h200_session35.json > $OUT/grid.log 2>&1; echo grid rc $?
tail -3 $OUT/grid.log
