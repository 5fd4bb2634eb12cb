pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl 2>/dev/null
for r in 1 2; do for v in v0 v1 v3 v4; do
  PYTHONPATH=/tmp/site:$PWD/scratch/$v CUTEFI_PACK_PATH=$PWD/.cubins_$v CUTEFI_CACHE_DIR=/tmp/cc_$v python scratch/var_ab.py $v $OUT/${v}_$r.json unroll >> $OUT/var_ab.txt 2>&1
done; done
