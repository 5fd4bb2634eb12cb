pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl > /dev/null 2>&1
export CUTEFI_CACHE_DIR=/tmp/cc PYTHONPATH=/tmp/site:$PWD CUTEFI_PACK_PATH=$PWD/.cubins_s43
timeout 200 python scratch/host_time.py 2>&1 | tee $OUT/norm_host_time_h200_session43.txt | tail -12
