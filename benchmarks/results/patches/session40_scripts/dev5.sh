pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl > /dev/null 2>&1
export CUTEFI_CACHE_DIR=/tmp/cc
for r in 1 2; do
  for v in main q1 q2; do
    if [ $v = main ]; then T=$PWD; P=$PWD/.cubins_norm_new; else T=$PWD/scratch/$v; P=$T/pack; fi
    PYTHONPATH=/tmp/site:$T CUTEFI_PACK_PATH=$P python scratch/ln_q_ab.py $v 2>&1 | tail -1
  done
done
