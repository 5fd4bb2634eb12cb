set -x
pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD CUTEFI_PACK_PATH=$PWD/.cubins_g CUTEFI_CACHE_DIR=/tmp/cc
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv
python scratch/s35/probe.py 2>&1 | tail -40
M="gpu__time_duration.sum,dram__bytes_read.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,lts__t_sector_hit_rate.pct,launch__grid_size,launch__block_size,launch__registers_per_thread,launch__shared_mem_per_block_dynamic,sm__cycles_active.avg,smsp__cycles_active.avg.pct_of_peak_sustained_elapsed,dram__sectors_read.sum,lts__t_sectors_srcunit_tex_op_read.sum,sm__inst_executed.sum"
for s in "1 4096 14336" "16 8192 8192" "1 14336 4096"; do
  ncu --clock-control none --profile-from-start off --metrics $M --csv python scratch/s35/ncu_one.py $s > $OUT/ncu_${s// /_}.csv 2>&1
  python - $OUT/ncu_${s// /_}.csv <<'PY'
import csv,sys
rows=[r for r in csv.reader(open(sys.argv[1])) if len(r)>10]
hdr=rows[0]; i=hdr.index("Kernel Name"); mi=hdr.index("Metric Name"); vi=hdr.index("Metric Value")
for r in rows[1:]:
    print(r[i][:60], r[mi], r[vi])
PY
done
