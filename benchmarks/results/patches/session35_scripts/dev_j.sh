pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl 2>/dev/null
export CUTEFI_CACHE_DIR=/tmp/cc PYTHONPATH=/tmp/site:$PWD CUTEFI_PACK_PATH=$PWD/.cubins_full
timeout 200 python scratch/s35/ab_final.py $OUT/gemm_weight_stream_ab.json 2>&1 | grep -v Warn
timeout 330 python -m pytest -q -x -p no:cacheprovider tests/test_gpu_gemm.py tests/test_gpu_gemm_fp8.py tests/test_gpu_gemm_groupwise.py tests/test_gpu_gemm_segments.py tests/test_gpu_gemm_fp8_mma_sync.py tests/test_gpu_gemm_segments_mma_sync.py 2>&1 | tail -8
