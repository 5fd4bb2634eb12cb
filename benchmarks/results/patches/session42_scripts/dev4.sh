pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl > /dev/null 2>&1
export CUTEFI_CACHE_DIR=/tmp/cc
export PYTHONPATH=/tmp/site:$PWD CUTEFI_PACK_PATH=$PWD/.cubins_v1
python scratch/dbg_e5m2.py 2>&1 | tail -30
timeout 300 python -m pytest -q -p no:cacheprovider tests/test_gpu_norm_quant.py tests/test_gpu_layernorm.py tests/test_gpu_norm_layouts.py 2>&1 | tail -4
for round in 1 2; do
for t in head new v1024 vb vc; do
  case $t in new) PP=$PWD; PK=$PWD/.cubins_v1;; *) PP=$PWD/scratch/$t; PK=$PWD/scratch/pk_$t;; esac
  echo "== $t round $round"
  PYTHONPATH=/tmp/site:$PP CUTEFI_PACK_PATH=$PK python scratch/bench_main.py --routine layernorm_quant --rows 128 1024 4096 16384 65536 --hidden 4096 --backends cutefi 2>&1 | grep -E "^layernorm" | awk '{print $1,$2,$3,$6,$9,$11}'
done; done
