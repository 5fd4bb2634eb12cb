pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl > /dev/null 2>&1
export CUTEFI_CACHE_DIR=/tmp/cc
git log --oneline -1 2>/dev/null
PYTHONPATH=/tmp/site:$PWD CUTEFI_PACK_PATH=$PWD/.cubins_v1 timeout 300 python -m pytest -q -p no:cacheprovider tests/test_gpu_norm_quant.py tests/test_gpu_layernorm.py tests/test_gpu_norm_layouts.py tests/test_gpu_rmsnorm.py tests/test_gpu_norm_latency.py 2>&1 | tail -2
for round in 1 2; do
for t in new sA sB; do
  echo "== $t round $round"
  PYTHONPATH=/tmp/site:$PWD/scratch/$t CUTEFI_PACK_PATH=$PWD/scratch/pk_$t python scratch/bench_main.py --routine layernorm layernorm_quant --rows 128 1024 4096 16384 65536 --hidden 4095 --backends cutefi 2>&1 | grep -E "^layernorm" | awk '{print $1,$2,$3,$6,$9,$11}'
done; done
PYTHONPATH=/tmp/site:$PWD CUTEFI_PACK_PATH=$PWD/.cubins_v1 timeout 250 python scratch/bench_main.py --refcheck --routine layernorm_quant layernorm rmsnorm_quant --rows 16384 65536 --hidden 4095 4096 --output $OUT/norm_goals_h200_session42.csv $OUT/norm_goals_h200_session42.json 2>&1 | grep -v "timing:" | tail -40
