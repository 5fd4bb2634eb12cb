pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl > /dev/null 2>&1
export CUTEFI_CACHE_DIR=/tmp/cc PYTHONPATH=/tmp/site:$PWD CUTEFI_PACK_PATH=$PWD/.cubins_att
timeout 560 python scratch/decode_split.py 2>&1 | tee $OUT/decode_split_h200_session43.txt | grep -v "^$"
