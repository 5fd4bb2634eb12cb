pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl > /dev/null 2>&1
export CUTEFI_CACHE_DIR=/tmp/cc
for r in 1 2; do
  for v in head new; do
    case $v in
      head) T=$PWD/scratch/head; P=$PWD/.cubins_head;;
      new) T=$PWD; P=$PWD/.cubins_new;;
    esac
    echo "== $v"
    PYTHONPATH=/tmp/site:$T CUTEFI_PACK_PATH=$P python scratch/bench_main.py --routine rmsnorm_quant rmsnorm layernorm layernorm_quant --rows 4096 16384 65536 --hidden 4095 --backends cutefi 2>&1 | grep -E "^(rmsnorm|layernorm)" | awk '{print $1, $2, $6}' | paste -sd' '
  done
done
PYTHONPATH=/tmp/site:$PWD CUTEFI_PACK_PATH=$PWD/.cubins_new timeout 200 python -m pytest -q -p no:cacheprovider tests/test_gpu_norm_quant.py tests/test_gpu_layernorm.py tests/test_gpu_rmsnorm.py tests/test_gpu_norm_layouts.py 2>&1 | tail -2
