pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl > /dev/null 2>&1
export CUTEFI_CACHE_DIR=/tmp/cc
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
for round in 1 2; do
for t in head new v2; do
  case $t in head) PP=$PWD/scratch/head;; new) PP=$PWD;; v2) PP=$PWD/scratch/v2;; esac
  echo "== $t round $round"
  PYTHONPATH=/tmp/site:$PP CUTEFI_PACK_PATH=$PWD/scratch/pk_$t python scratch/bench_main.py --refcheck --routine layernorm_quant --rows 1 128 1024 4096 16384 65536 --hidden 4096 --backends cutefi 2>&1 | grep -E "^layernorm_quant"
done; done
export PYTHONPATH=/tmp/site:$PWD CUTEFI_PACK_PATH=$PWD/.cubins_v1
timeout 250 python -m pytest -q -p no:cacheprovider tests/test_gpu_norm_quant.py tests/test_gpu_layernorm.py 2>&1 | tail -3
