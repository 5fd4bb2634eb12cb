pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl 2>/dev/null
export CUTEFI_CACHE_DIR=/tmp/cc
NK="4096,14336 14336,4096 8192,8192 28672,8192 8192,28672"
(cd scratch/v2 && PYTHONPATH=/tmp/site:$PWD CUTEFI_PACK_PATH=/work/main/.cubins_v2 python /work/main/benchmarks/gemm_sweep.py --m 1 16 64 --nk $NK --splits 0 1 2 4 --configs 128x16c1t 128x16c1k2t 64x32c1t 64x64c1t 64x32c1k2t 64x64c1k2t 128x64c1k2t --warm --iters 60 --out $OUT/sweep_v2.json) 2>&1 | grep -v Warn
