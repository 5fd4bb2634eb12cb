pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl > /dev/null 2>&1
export CUTEFI_CACHE_DIR=/tmp/cc PYTHONPATH=/tmp/site:$PWD CUTEFI_PACK_PATH=$PWD/.cubins_norm_final
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout 300 python -m pytest -q -p no:cacheprovider tests/test_gpu_norm_quant.py tests/test_gpu_layernorm.py tests/test_gpu_rmsnorm.py tests/test_gpu_norm_layouts.py tests/test_gpu_norm_latency.py tests/test_gpu_norm_packed.py 2>&1 | tail -3
timeout 240 compute-sanitizer --tool memcheck --print-limit 5 python -m pytest -q -p no:cacheprovider tests/test_gpu_norm_quant.py -k "shifted_rows_a_thread or many_rows_a_thread" 2>&1 | tail -3
python scratch/bench_main.py --refcheck --routine rmsnorm_quant layernorm_quant layernorm --rows 16384 65536 --hidden 4095 4096 --backends cutefi --output $OUT/norm_odd.csv $OUT/norm_odd.json 2>&1 | grep -v "timing:" | tail -16
