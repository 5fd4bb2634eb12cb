pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl > /dev/null 2>&1
export PYTHONPATH=/tmp/site:$PWD CUTEFI_PACK_PATH=$PWD/.cubins_norm CUTEFI_CACHE_DIR=/tmp/cc
nvidia-smi --query-gpu=name,clocks.max.sm,driver_version --format=csv
python scratch/bench_main.py --routine rmsnorm_quant layernorm layernorm_quant rmsnorm --rows 16384 65536 --hidden 4095 4096 --backends cutefi 2>&1 | grep -vi warn | tail -30
ncu --clock-control none --profile-from-start off --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats --section SchedulerStats --section InstructionStats --metrics smsp__inst_executed.sum,dram__bytes_read.sum,dram__bytes_write.sum,l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum,smsp__inst_executed_pipe_lsu.sum,smsp__sass_inst_executed_op_global_ld.sum,smsp__sass_inst_executed_op_shared_ld.sum python scratch/ncu_odd.py > $OUT/ncu_odd.txt 2>&1
grep -E "cutefi_|Duration|inst_executed.sum |Achieved Occupancy|Registers Per|Theoretical Occ|Issue Slots Busy|No Eligible|DRAM Throughput|Block Limit|Warp Cycles Per Issued" $OUT/ncu_odd.txt
