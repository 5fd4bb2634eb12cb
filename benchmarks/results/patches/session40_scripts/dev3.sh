pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl > /dev/null 2>&1
export CUTEFI_CACHE_DIR=/tmp/cc
T=$PWD/scratch/v9
PYTHONPATH=/tmp/site:$T CUTEFI_PACK_PATH=$T/pack timeout 200 ncu --clock-control none -k regex:"layernorm|ln_two" -c 2 --section SpeedOfLight --section Occupancy --section SchedulerStats --section WarpStateStats --section MemoryWorkloadAnalysis_Tables --section InstructionStats --metrics l1tex__t_sector_hit_rate.pct,lts__t_sectors_srcunit_tex_op_read_lookup_hit.sum,lts__t_sectors_srcunit_tex_op_read_lookup_miss.sum,dram__bytes_read.sum,dram__bytes_write.sum,smsp__inst_executed.sum,l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum,l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum,l1tex__data_bank_conflicts_pipe_lsu.sum,lts__t_sectors_op_write.sum python scratch/ln_ncu2.py > $OUT/ln_ncu2.txt 2>&1
grep -vE "^    (---|Section|Metric Name)|Warning|^ *$|INF|OPT|WRN" $OUT/ln_ncu2.txt | cut -c1-110 | head -150
