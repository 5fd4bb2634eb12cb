pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl > /dev/null 2>&1
export CUTEFI_CACHE_DIR=/tmp/cc PYTHONPATH=/tmp/site:$PWD
timeout 300 python scratch/page_probe.py 2>&1 | tee $OUT/decode_read_ceiling_h200_session43.txt | tail -20
