pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl > /dev/null 2>&1
export CUTEFI_CACHE_DIR=/tmp/cc PYTHONPATH=/tmp/site:$PWD CUTEFI_PACK_PATH=$PWD/.cubins_v1
timeout 150 python -m pytest -q -p no:cacheprovider tests/test_gpu_norm_long.py 2>&1 | tail -15
timeout 120 python -m pytest -q -p no:cacheprovider tests/test_gpu_rmsnorm.py tests/test_gpu_layernorm.py tests/test_gpu_norm_quant.py tests/test_gpu_norm_layouts.py tests/test_gpu_norm_latency.py tests/test_gpu_norm_packed.py tests/test_gpu_pdl.py 2>&1 | tail -3
timeout 150 python scratch/bench_main.py --refcheck --routine rmsnorm layernorm fused_add_rmsnorm --rows 128 4096 --hidden 65536 40001 --backends cutefi torch torch.compile --output $OUT/norm_long_h200_session42.csv $OUT/norm_long_h200_session42.json 2>&1 | grep -v "timing:" | tail -30
