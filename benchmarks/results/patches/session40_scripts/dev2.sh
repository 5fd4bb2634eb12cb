pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl > /dev/null 2>&1
export CUTEFI_CACHE_DIR=/tmp/cc
for r in 1 2; do
  for v in v0 v9 v11 v12 v13; do
    if [ $v = v0 ]; then T=$PWD/scratch/v0; P=$PWD/.cubins_norm; else T=$PWD/scratch/$v; P=$T/pack; fi
    PYTHONPATH=/tmp/site:$T CUTEFI_PACK_PATH=$P python scratch/ln_ab3.py $v 2>&1 | tail -1
  done
done
