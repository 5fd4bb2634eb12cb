pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl > /dev/null 2>&1
export CUTEFI_CACHE_DIR=/tmp/cc PYTHONPATH=/tmp/site:$PWD CUTEFI_PACK_PATH=$PWD/.cubins_v1
timeout 100 python -m pytest -q -p no:cacheprovider tests/test_gpu_norm_long.py 2>&1 | tail -3
timeout 200 compute-sanitizer --tool memcheck --error-exitcode 9 python -m pytest -q -p no:cacheprovider tests/test_gpu_norm_long.py -k "wider or heads or (quant and 32769) or (test_rmsnorm and 3-32769) or (test_layernorm and 1-40001)" 2>&1 | tail -4 > $OUT/norm_long_memcheck_h200_session42.txt; echo "memcheck rc ${PIPESTATUS[0]}" >> $OUT/norm_long_memcheck_h200_session42.txt; cat $OUT/norm_long_memcheck_h200_session42.txt
