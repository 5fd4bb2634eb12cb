pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONPATH=/tmp/site:$PWD CUTEFI_PACK_PATH=$PWD/.cubins_g CUTEFI_CACHE_DIR=/tmp/cc
M="gpu__time_duration.sum,dram__bytes_read.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,lts__t_requests_srcunit_tex_op_read.sum,lts__t_sectors_srcunit_tex_op_read.sum,lts__t_sectors_srcunit_tex_op_read_lookup_hit.sum,lts__t_sectors_srcunit_tex_op_read_lookup_miss.sum,lts__t_sectors_srcunit_ltcfabric.sum,lts__t_sectors_op_read.sum,lts__t_sectors_srcunit_tex.sum,lts__t_sectors_srcnode_gpc.sum,lts__t_sectors_srcunit_l1.sum,l1tex__m_xbar2l1tex_read_bytes.sum,smsp__inst_executed.sum,lts__t_sectors_srcunit_tex_op_read_lookup_hit.sum,lts__d_sectors_fill_sysmem.sum,lts__d_sectors_fill_device.sum"
for s in "1 14336 4096" "16 8192 8192"; do
  ncu --clock-control none --profile-from-start off --metrics $M --csv python scratch/s35/ncu_one.py $s > $OUT/ncu2_${s// /_}.csv 2>&1
  python - $OUT/ncu2_${s// /_}.csv <<'PY'
import csv,sys
rows=[r for r in csv.reader(open(sys.argv[1])) if len(r)>10]
if not rows: print(open(sys.argv[1]).read()[-3000:]); sys.exit()
hdr=rows[0]; i=hdr.index("Kernel Name"); mi=hdr.index("Metric Name"); vi=hdr.index("Metric Value")
for r in rows[1:]:
    print(r[i][:40], r[mi], r[vi])
PY
done
