pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl > /dev/null 2>&1
export CUTEFI_CACHE_DIR=/tmp/cc
for round in 1 2 3; do
for t in head new; do
  echo "== $t round $round"
  PYTHONPATH=/tmp/site:$PWD/scratch/$t CUTEFI_PACK_PATH=$PWD/scratch/pk_${t}2 python scratch/bench_main.py --routine rmsnorm --rows 1 32 128 512 --hidden 2048 4096 8192 16384 --backends cutefi 2>&1 | grep -E "^rmsnorm|rror" | awk '{print $1,$2,$3,$6}'
  PYTHONPATH=/tmp/site:$PWD/scratch/$t CUTEFI_PACK_PATH=$PWD/scratch/pk_${t}2 python scratch/bench_main.py --routine rmsnorm_quant fused_add_rmsnorm --rows 1 128 16384 --hidden 4096 --backends cutefi 2>&1 | grep -E "^rmsnorm|^fused|rror" | awk '{print $1,$2,$3,$6}'
done; done
PYTHONPATH=/tmp/site:$PWD/scratch/new CUTEFI_PACK_PATH=$PWD/scratch/pk_new2 timeout 300 python scratch/bench_main.py --refcheck --routine rmsnorm --rows 1 128 4096 16384 65536 --hidden 2048 4096 8192 16384 --output $OUT/rmsnorm_grid_h200_session43.csv $OUT/rmsnorm_grid_h200_session43.json 2>&1 | grep -v "timing:" | tail -70
