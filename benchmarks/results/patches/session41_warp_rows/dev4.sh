pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl > /dev/null 2>&1
export CUTEFI_CACHE_DIR=/tmp/cc
export PYTHONPATH=/tmp/site:$PWD CUTEFI_PACK_PATH=$PWD/.cubins_norm_v3
timeout 200 python scratch/wr_ab.py 2 2>&1 | grep -v Warn
ncu --clock-control none --profile-from-start off --metrics smsp__inst_executed.sum,gpu__time_duration.sum,launch__registers_per_thread,smsp__thread_inst_executed_per_inst_executed.ratio,sm__warps_active.avg.pct_of_peak_sustained_active -k regex:warp python scratch/ncu_odd4095.py 2>&1 | grep -E "cutefi_|inst_executed.sum|duration|registers|ratio|warps_active"
