pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl 2>&1 | grep -v WARN | tail -1
export PYTHONPATH=/tmp/site:$PWD CUTEFI_CACHE_DIR=/tmp/cc CUTEFI_PACK_PATH=$PWD/.cubins_gemm_new
python -m cutefi.bench.cli --testlist benchmarks/cases/gemm_llama.txt --backends cutefi cublas --refcheck --output $OUT/gemm_llama_h200_session36.csv $OUT/gemm_llama_h200_session36.json 2>&1 | grep -v -i warn | tail -3
