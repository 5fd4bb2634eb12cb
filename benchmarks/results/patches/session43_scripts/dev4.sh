pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl > /dev/null 2>&1
export CUTEFI_CACHE_DIR=/tmp/cc
for round in 1 2; do
for t in head rA; do
  echo "== $t round $round"
  PYTHONPATH=/tmp/site:$PWD/scratch/$t CUTEFI_PACK_PATH=$PWD/scratch/pk_$t python scratch/bench_main.py --refcheck --routine layernorm_quant --rows 128 1024 4096 16384 65536 --hidden 4096 8192 --backends cutefi 2>&1 | grep -E "^layernorm|rror" | awk '{print $1,$2,$3,$6,$NF}'
  PYTHONPATH=/tmp/site:$PWD/scratch/$t CUTEFI_PACK_PATH=$PWD/scratch/pk_$t python scratch/bench_main.py --refcheck --routine layernorm --rows 128 1024 4096 16384 65536 --hidden 16384 --backends cutefi 2>&1 | grep -E "^layernorm|rror" | awk '{print $1,$2,$3,$6,$NF}'
done; done
