pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl > /dev/null 2>&1
export CUTEFI_CACHE_DIR=/tmp/cc
NEW="env PYTHONPATH=/tmp/site:$PWD CUTEFI_PACK_PATH=$PWD/.cubins_norm_v1"
BASE="env PYTHONPATH=/tmp/site:$PWD/scratch/base CUTEFI_PACK_PATH=$PWD/.cubins_norm_base"
for r in 1 2; do
  for v in base new; do
    if [ $v = base ]; then E=$BASE; else E=$NEW; fi
    echo "== $v"
    $E python scratch/bench_main.py --routine rmsnorm_quant layernorm layernorm_quant --rows 4096 16384 65536 --hidden 4095 --backends cutefi 2>&1 | grep -E "^(rmsnorm_quant|layernorm)" | awk '{print $1, $2, $6}' | paste -sd' '
  done
done
$NEW ncu --clock-control none --profile-from-start off --metrics smsp__inst_executed.sum,gpu__time_duration.sum,launch__registers_per_thread,smsp__thread_inst_executed_per_inst_executed.ratio python scratch/ncu_odd.py rms_q layer layer_q > $OUT/ncu_new.txt 2>&1
grep -E "cutefi_|inst_executed.sum|duration|registers|ratio" $OUT/ncu_new.txt
$NEW timeout 400 python -m pytest -q -x -p no:cacheprovider tests/test_gpu_norm_quant.py tests/test_gpu_layernorm.py tests/test_gpu_rmsnorm.py tests/test_gpu_norm_layouts.py 2>&1 | tail -4
