pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl > /dev/null 2>&1
export CUTEFI_CACHE_DIR=/tmp/cc
for round in 1 2; do
for t in head new; do
  echo "== $t round $round"
  PYTHONPATH=/tmp/site:$PWD/scratch/$t CUTEFI_PACK_PATH=$PWD/scratch/pk_$t python scratch/bench_main.py --routine layernorm_quant --rows 4096 16384 65536 --hidden 1024 2048 4095 4096 8192 --backends cutefi 2>&1 | grep -E "^layernorm|rror" | awk '{print $1,$2,$3,$6}'
  PYTHONPATH=/tmp/site:$PWD/scratch/$t CUTEFI_PACK_PATH=$PWD/scratch/pk_$t python scratch/bench_main.py --routine layernorm --rows 4096 16384 65536 --hidden 1024 2048 4095 --backends cutefi 2>&1 | grep -E "^layernorm|rror" | awk '{print $1,$2,$3,$6}'
  PYTHONPATH=/tmp/site:$PWD/scratch/$t CUTEFI_PACK_PATH=$PWD/scratch/pk_$t python scratch/bench_main.py --routine rmsnorm_quant --rows 4096 16384 65536 --hidden 2047 4095 --backends cutefi 2>&1 | grep -E "^rmsnorm|rror" | awk '{print $1,$2,$3,$6}'
done; done
