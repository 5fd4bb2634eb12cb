pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl 2>/dev/null
nvidia-smi --query-gpu=name,driver_version --format=csv > $OUT/gpu.txt
for r in 1 2 3; do
  PYTHONPATH=/tmp/site:$PWD/scratch/v0 CUTEFI_PACK_PATH=$PWD/.cubins_v0 CUTEFI_CACHE_DIR=/tmp/cc_0 python scratch/var_ab.py before $OUT/before_$r.json wide_weights >> $OUT/var_ab.txt 2>&1
  PYTHONPATH=/tmp/site:$PWD CUTEFI_PACK_PATH=$PWD/.cubins_gemm_new CUTEFI_CACHE_DIR=/tmp/cc_m python scratch/var_ab.py paired $OUT/paired_$r.json wide_weights >> $OUT/var_ab.txt 2>&1
done
