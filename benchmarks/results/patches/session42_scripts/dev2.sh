pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl > /dev/null 2>&1
export CUTEFI_CACHE_DIR=/tmp/cc
export PYTHONPATH=/tmp/site:$PWD CUTEFI_PACK_PATH=$PWD/.cubins_v1
timeout 300 python -m pytest -q -p no:cacheprovider tests/test_gpu_norm_quant.py tests/test_gpu_layernorm.py tests/test_gpu_norm_layouts.py 2>&1 | tail -4
for round in 1 2; do
for t in head new v3; do
  case $t in head) PP=$PWD/scratch/head;; new) PP=$PWD;; v3) PP=$PWD/scratch/v3;; esac
  echo "== $t round $round"
  PYTHONPATH=/tmp/site:$PP CUTEFI_PACK_PATH=$PWD/scratch/pk_$t python scratch/bench_main.py --routine layernorm_quant --rows 4096 16384 65536 --hidden 1024 2048 4096 8192 16384 --backends cutefi 2>&1 | grep -E "^layernorm" | awk '{print $1,$2,$3,$6,$9}'
  if [ $t != v3 ]; then PYTHONPATH=/tmp/site:$PP CUTEFI_PACK_PATH=$PWD/scratch/pk_$t python scratch/bench_main.py --routine layernorm --rows 4096 16384 65536 --hidden 1024 2048 16384 --backends cutefi 2>&1 | grep -E "^layernorm" | awk '{print $1,$2,$3,$6,$9}'; fi
done; done
