pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl > /dev/null 2>&1
export CUTEFI_CACHE_DIR=/tmp/cc PYTHONPATH=/tmp/site:$PWD CUTEFI_PACK_PATH=$PWD/.cubins_s43
timeout 400 ncu --clock-control none --profile-from-start off --set full python scratch/ncu_targets.py > $OUT/ncu_s43.txt 2>&1
echo rc $?
grep -E "cutefi_|triton_|Duration|DRAM Throughput|Executed Ipc A|Achieved Occupancy|Registers Per|Stall|Executed Instructions  " $OUT/ncu_s43.txt | head -80
