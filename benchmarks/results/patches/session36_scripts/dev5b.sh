pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl 2>&1 | grep -v WARN | tail -1
export PYTHONPATH=/tmp/site:$PWD CUTEFI_CACHE_DIR=/tmp/cc CUTEFI_PACK_PATH=$PWD/.cubins_attn
compute-sanitizer --tool memcheck --report-api-errors no python -m pytest -q tests/test_gpu_decode.py -k "merged_in_kernel and 128" 2>&1 | tail -4 | tee $OUT/memcheck_decode.txt
compute-sanitizer --tool racecheck --report-api-errors no python -m pytest -q tests/test_gpu_decode.py -k "merged_in_kernel and 128 and 12-4" 2>&1 | tail -4 | tee $OUT/racecheck_decode.txt
python -m cutefi.bench.cli --testlist benchmarks/cases/decode_issue12.txt --refcheck --output $OUT/decode_h200_session36.csv $OUT/decode_h200_session36.json 2>&1 | grep -v -i warn | tail -45
