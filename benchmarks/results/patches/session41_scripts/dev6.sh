pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl > /dev/null 2>&1
export CUTEFI_CACHE_DIR=/tmp/cc
for r in 1 2; do
  for v in base va vb; do
    case $v in
      base) T=$PWD/scratch/base; P=$PWD/.cubins_norm_base;;
      va) T=$PWD/scratch/va; P=$PWD/.cubins_va;;
      vb) T=$PWD; P=$PWD/.cubins_vb;;
    esac
    echo "== $v"
    PYTHONPATH=/tmp/site:$T CUTEFI_PACK_PATH=$P python scratch/bench_main.py --routine rmsnorm_quant layernorm layernorm_quant --rows 4096 16384 65536 --hidden 4095 --backends cutefi 2>&1 | grep -E "^(rmsnorm_quant|layernorm)" | awk '{print $1, $2, $6}' | paste -sd' '
  done
done
