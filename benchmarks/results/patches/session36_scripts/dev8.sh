pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl 2>&1 | grep -v WARN | tail -1
ROOT=$PWD
for r in 1 2; do for v in rr0 rr1 rr2; do
  PEER=""; if [ $r = 1 ] && [ $v = rr0 ]; then PEER=1; fi
  (cd scratch/$v && PEER=$PEER CUTEFI_CACHE_DIR=/tmp/cc_$v CUTEFI_PACK_PATH=$PWD/pack PYTHONPATH=/tmp/site:$PWD python $ROOT/scratch/s36/norm_ab.py $v 2>&1 | grep '^{')
done; done
