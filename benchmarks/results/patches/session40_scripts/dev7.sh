pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl > /dev/null 2>&1
export CUTEFI_CACHE_DIR=/tmp/cc
for v in main l1 main l1; do
  if [ $v = main ]; then T=$PWD; P=$PWD/.cubins_norm_new; else T=$PWD/scratch/$v; P=$T/pack:$PWD/.cubins_norm_new; fi
  echo "== $v layernorm"
  PYTHONPATH=/tmp/site:$T CUTEFI_PACK_PATH=$P python scratch/bench_main.py --routine layernorm --rows 1 32 128 256 384 512 --hidden 4096 --backends cutefi 2>&1 | grep -E "^layernorm.*cutefi" | awk '{print $2, $6}' | paste -sd' ' 
done
for v in main r1 r2 main r1 r2; do
  if [ $v = main ]; then T=$PWD; P=$PWD/.cubins_norm_new; else T=$PWD/scratch/$v; P=$T/pack; fi
  echo "== $v rmsnorm"
  PYTHONPATH=/tmp/site:$T CUTEFI_PACK_PATH=$P python scratch/bench_main.py --routine rmsnorm --rows 1 128 --hidden 4096 --backends cutefi torch.compile 2>&1 | grep -E "^rmsnorm" | awk '{print $2, $5, $6}' | paste -sd' '
done
