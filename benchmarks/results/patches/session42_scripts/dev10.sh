pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl > /dev/null 2>&1
export CUTEFI_CACHE_DIR=/tmp/cc PYTHONPATH=/tmp/site:$PWD CUTEFI_PACK_PATH=$PWD/.cubins_long
git log --oneline -1 2>/dev/null
timeout 100 python -m pytest -q -p no:cacheprovider tests/test_gpu_norm_long.py 2>&1 | tail -2
