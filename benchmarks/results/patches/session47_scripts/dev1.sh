# Session 47 device script: session 46's unrun checks (the GPU tests of rope_quantize_fp8_append_paged_kv_cache
# and append_paged_mla_kv_cache, opcheck, the routines with their peers, memcheck), LayerNorm with 16-bit
# gamma/beta, and the decode GPU tests on the rebuilt attention pack (session 46 re-keyed the attention
# kernels). In priority order; each step skipped once the call's 560 s are near.
# Carry .cubins_rope .cubins_append .cubins_copy .cubins_attn .cubins_ln .cubins_fill .whl
# (cutefi aot --arch 9.0a --only rope. / attention.append / copy / attention. / norm.layernorm / fill.fill).
ROOT=$PWD
export CUTEFI_CACHE_DIR=/tmp/cc PYTHONUNBUFFERED=1
pip install -q --no-deps --target /tmp/site .whl/*.whl > /dev/null 2>&1
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/gpu.txt
packs() { local p=""; for d in "$@" fill; do p="$p:$ROOT/.cubins_$d"; done; export CUTEFI_PACK_PATH=${p#:}; }
left() { [ $((560 - SECONDS)) -gt "$1" ]; }
step() { local name=$1 limit=$2; shift 2; left 20 || { echo "skipped $name"; return; }
  local t=$(( limit < 560 - SECONDS ? limit : 560 - SECONDS )); timeout $t "$@" > $OUT/$name.txt 2>&1
  echo "== $name ($SECONDS s): $(grep -E 'passed|failed|error|ERROR SUMMARY' $OUT/$name.txt | tail -1)"; }
cd $ROOT/tests
export PYTHONPATH=$ROOT
packs rope append copy
step t_new 150 python -m pytest -q -p no:cacheprovider test_gpu_rope_quant_append.py test_gpu_append_kv.py \
  test_gpu_rope_quant.py
packs ln copy
step t_ln 90 python -m pytest -q -p no:cacheprovider test_gpu_layernorm.py test_gpu_norm_quant.py -k layernorm
packs rope append ln copy attn
step t_compile 90 python -m pytest -q -p no:cacheprovider test_gpu_compile.py \
  -k "rope_quantize or append or 16bit or layernorm"
packs attn copy
step t_decode 90 python -m pytest -q -x -p no:cacheprovider test_gpu_decode.py
cd $ROOT
export PYTHONPATH=/tmp/site:$ROOT
packs rope append copy
BM=benchmarks/results/patches/session46_scripts/bm.py
step rqa 90 python $BM --routine rope_quantize_fp8_append_paged_kv_cache --tokens 1 32 1024 16384 \
  --tokens-per-request 1 --mla 0 1 --refcheck --output $OUT/rqa.csv $OUT/rqa.json
step app 50 python $BM --routine append_paged_mla_kv_cache append_paged_kv_cache --requests 64 \
  --tokens-per-request 1 512 --page-size 1 --refcheck --output $OUT/app.csv $OUT/app.json
cd $ROOT/tests
export PYTHONPATH=$ROOT
step memcheck 120 compute-sanitizer --tool memcheck --report-api-errors no python -m pytest -q -p no:cacheprovider \
  test_gpu_rope_quant_append.py test_gpu_append_kv.py -k "(decode and bf16 and e4m3) or mla or padding or own_strides"
for f in t_new t_ln t_compile t_decode; do grep -E "^FAILED|^ERROR" $OUT/$f.txt | head -5; done
tail -25 $OUT/rqa.txt; tail -12 $OUT/app.txt
