pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl > /dev/null 2>&1
export CUTEFI_CACHE_DIR=/tmp/cc PYTHONPATH=/tmp/site:$PWD CUTEFI_PACK_PATH=$PWD/.cubins_final
git log --oneline -1 2>/dev/null
timeout 200 python -m pytest -q -p no:cacheprovider tests/test_gpu_norm_quant.py tests/test_gpu_layernorm.py tests/test_gpu_rmsnorm.py tests/test_gpu_norm_layouts.py tests/test_gpu_norm_latency.py tests/test_gpu_norm_packed.py 2>&1 | tail -2
python scratch/bench_main.py --refcheck --routine rmsnorm_quant layernorm_quant layernorm rmsnorm --rows 16384 65536 --hidden 4095 4096 --backends cutefi --output $OUT/norm_odd_final.csv $OUT/norm_odd_final.json 2>&1 | grep -v "timing:" | tail -20
