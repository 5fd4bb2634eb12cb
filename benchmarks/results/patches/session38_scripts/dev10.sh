pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl 2>/dev/null
nvidia-smi --query-gpu=name,driver_version --format=csv > $OUT/gpu.txt
for r in 1 2; do
  PYTHONPATH=/tmp/site:$PWD/scratch/v0 CUTEFI_PACK_PATH=$PWD/.cubins_v0 CUTEFI_CACHE_DIR=/tmp/cc_0 python scratch/var_ab.py before $OUT/before_$r.json paired >> $OUT/var_ab.txt 2>&1
  PYTHONPATH=/tmp/site:$PWD CUTEFI_PACK_PATH=$PWD/.cubins_gemm_new CUTEFI_CACHE_DIR=/tmp/cc_m python scratch/var_ab.py paired $OUT/paired_$r.json paired >> $OUT/var_ab.txt 2>&1
done
export PYTHONPATH=/tmp/site:$PWD CUTEFI_PACK_PATH=$PWD/.cubins_gemm_new CUTEFI_CACHE_DIR=/tmp/cc
timeout 200 python -m pytest -q -p no:cacheprovider tests/test_gpu_gemm.py tests/test_gpu_gemm_stream.py tests/test_gpu_gemm_gemv.py tests/test_gpu_gemm_fp8.py tests/test_gpu_gemm_segments.py tests/test_gpu_gemm_groupwise.py tests/test_gpu_gemm_fp8_mma_sync.py tests/test_gpu_gemm_segments_mma_sync.py > $OUT/gpu_gemm_tests.txt 2>&1
tail -3 $OUT/gpu_gemm_tests.txt
timeout 60 compute-sanitizer --tool memcheck python -m pytest -q -p no:cacheprovider tests/test_gpu_gemm.py -k "swapped_hopper_build and (64x64c1k2t or 128x16c1t or 64x32c1n2t)" > $OUT/memcheck.txt 2>&1
tail -3 $OUT/memcheck.txt
python -m cutefi.bench.cli --testlist benchmarks/cases/gemm_llama.txt --backends cutefi cublas --refcheck --output $OUT/gemm_llama_h200_session38b.csv $OUT/gemm_llama_h200_session38b.json > $OUT/grid.txt 2>&1
tail -2 $OUT/grid.txt
