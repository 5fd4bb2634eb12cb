pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD CUTEFI_PACK_PATH=$PWD/.cubins_gemm_new CUTEFI_CACHE_DIR=/tmp/cc
python scratch/policy_ab.py $OUT/policy_ab.json > $OUT/policy_ab.txt 2>&1
M=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sectors_op_read.sum,lts__t_sectors_op_read_lookup_hit.sum,lts__t_sectors_op_write.sum,lts__t_requests_op_read.sum,lts__t_sectors_srcunit_tex_op_read.sum,lts__t_sectors_srcunit_tex_op_read_lookup_hit.sum,sm__cycles_active.avg
for spec in "64 4096 4096 64x64c1k2t" "64 4096 4096 64x32c1n2t" "256 4096 4096 128x64c1n2t" "256 4096 4096 128x64c1"; do
  set -- $spec
  timeout 100 ncu --clock-control none --cache-control none --metrics $M -k regex:"cutefi|nvjet" --launch-skip 8 --launch-count 2 python scratch/ncu_gemm.py $spec > $OUT/ncuwarm_$1_$4.txt 2>&1
  timeout 100 ncu --clock-control none --cache-control all --metrics $M -k regex:"cutefi|nvjet" --launch-skip 8 --launch-count 2 python scratch/ncu_gemm.py $spec > $OUT/ncucold_$1_$4.txt 2>&1
done
