pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl 2>/dev/null
export CUTEFI_CACHE_DIR=/tmp/cc
NK="4096,14336 14336,4096 8192,8192 28672,8192 8192,28672 4096,4096"
(cd scratch/v3 && PYTHONPATH=/tmp/site:$PWD CUTEFI_PACK_PATH=/work/main/.cubins_v3 python /work/main/benchmarks/gemm_sweep.py --m 1 8 --nk $NK --splits 1 2 4 --configs 128x8c1t 128x16c1t 128x16c1k2t --warm --iters 60 --out $OUT/sweep_v3.json) 2>&1 | grep -v Warn | awk '{print $1,$2,$3,$4,$5,$6,$8,$11,$13}'
