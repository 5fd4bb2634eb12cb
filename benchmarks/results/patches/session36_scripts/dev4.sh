pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl 2>&1 | grep -v WARN | tail -1
export PYTHONPATH=/tmp/site:$PWD CUTEFI_CACHE_DIR=/tmp/cc CUTEFI_PACK_PATH=$PWD/.cubins_gemm_new
python -m pytest -q -x tests/test_gpu_gemm_gemv.py 2>&1 | tail -3
python scratch/s36/ab_gemv.py 2>&1 | grep -v -i warn | tail -50
