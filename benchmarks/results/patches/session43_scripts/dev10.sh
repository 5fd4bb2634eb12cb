pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl > /dev/null 2>&1
export CUTEFI_CACHE_DIR=/tmp/cc
for round in 1 2; do
for t in head cA cB cC; do
  echo "== $t round $round"
  PYTHONPATH=/tmp/site:$PWD/scratch/$t CUTEFI_PACK_PATH=$PWD/scratch/pk_q$t python scratch/bench_main.py --refcheck --routine rmsnorm_quant --rows 128 1024 4096 16384 65536 --hidden 4095 --backends cutefi 2>&1 | grep -E "^rmsnorm|rror" | awk '{print $1,$2,$3,$6,$NF}'
done
for t in head cC; do
  echo "== $t round $round"
  PYTHONPATH=/tmp/site:$PWD/scratch/$t CUTEFI_PACK_PATH=$PWD/scratch/pk_q$t python scratch/bench_main.py --refcheck --routine rmsnorm_quant --rows 4096 16384 65536 --hidden 2047 8191 --backends cutefi 2>&1 | grep -E "^rmsnorm|rror" | awk '{print $1,$2,$3,$6,$NF}'
done; done
