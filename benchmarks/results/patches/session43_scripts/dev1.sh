pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl > /dev/null 2>&1
export CUTEFI_CACHE_DIR=/tmp/cc
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
for round in 1 2; do
for t in head vR1 vR2 vR3; do
  echo "== $t round $round"
  PYTHONPATH=/tmp/site:$PWD/scratch/$t CUTEFI_PACK_PATH=$PWD/scratch/pk_$t python scratch/bench_main.py --refcheck --routine rmsnorm_quant --rows 128 1024 4096 16384 65536 --hidden 4095 --backends cutefi 2>&1 | grep -E "^rmsnorm|rror" | awk '{print $1,$2,$3,$6,$9,$11,$NF}'
done
for t in head vL1; do
  echo "== $t round $round"
  PYTHONPATH=/tmp/site:$PWD/scratch/$t CUTEFI_PACK_PATH=$PWD/scratch/pk_$t python scratch/bench_main.py --refcheck --routine layernorm layernorm_quant --rows 128 1024 4096 16384 65536 --hidden 4095 --backends cutefi 2>&1 | grep -E "^layernorm|rror" | awk '{print $1,$2,$3,$6,$9,$11,$NF}'
done; done
