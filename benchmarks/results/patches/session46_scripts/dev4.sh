# session 46, last device call (about 5 minutes of device time left): the GPU tests of the new ops and
# the changed kernels, then two bench points of the new routine with its peers.
export CUTEFI_CACHE_DIR=/tmp/cc PYTHONPATH=$PWD CUTEFI_PACK_PATH=$PWD/.cubins_rope:$PWD/.cubins_append:$PWD/.cubins_copy
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/gpu.txt
ROOT=$PWD
cd tests
timeout 120 python -m pytest -q -p no:cacheprovider -x test_gpu_rope_quant_append.py test_gpu_append_kv.py \
  test_gpu_rope_quant.py -k "not torch_compile" > $OUT/t_gpu.txt 2>&1; tail -4 $OUT/t_gpu.txt
cd $ROOT
pip install -q --no-deps --target /tmp/site .whl/*.whl > /dev/null 2>&1
export PYTHONPATH=/tmp/site:$PWD
timeout 70 python benchmarks/results/patches/session46_scripts/bm.py --routine \
  rope_quantize_fp8_append_paged_kv_cache --tokens 32 16384 --tokens-per-request 1 --mla 0 1 --refcheck \
  --backends cutefi torch --output $OUT/rqa.csv $OUT/rqa.json > $OUT/rqa.txt 2>&1
tail -12 $OUT/rqa.txt
