# Session 51, device call T (any Hopper: H100 or H200): the GPU tests of issues 11-15's landed code in
# one call: the norm tests session 50 could not run (latency builds, 16-bit LayerNorm parameters and
# FP8 LayerNorm), every decode/merge/append test (issue 12), every prefill test (15), every GEMM
# test (13, 14), and compute-sanitizer memcheck/racecheck of a subset of each.
# Pack: .cubins_all = the attention., attention.append, prefill., norm.rmsnorm, norm.layernorm, gemm,
# copy and fill packs (cutefi aot --arch 9.0a --only ...) copied into one folder, *.ptx deleted.
ROOT=$PWD
export CUTEFI_CACHE_DIR=/tmp/cc PYTHONUNBUFFERED=1 PYTHONPATH=$ROOT CUTEFI_PACK_PATH=$ROOT/.cubins_all
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/gpu.txt
DEADLINE=${DEADLINE:-570}
step() { local name=$1 limit=$2; shift 2; [ $((DEADLINE - SECONDS)) -gt 20 ] || { echo "skipped $name"; return; }
  local t=$(( limit < DEADLINE - SECONDS ? limit : DEADLINE - SECONDS )); echo "== $name" >> $OUT/$FILE
  timeout $t "$@" >> $OUT/$FILE 2>&1; echo "== $name ($SECONDS s): $(grep -E 'passed|failed|error|ERROR SUMMARY|RACECHECK SUMMARY' $OUT/$FILE | tail -1)"; }
PT="python -m pytest -q -p no:cacheprovider"
SAN="compute-sanitizer --report-api-errors no --error-exitcode 1"
cd $ROOT/tests
FILE=tests_norm.txt step norm 100 $PT test_gpu_norm_latency.py test_gpu_layernorm.py test_gpu_norm_quant.py -k "latency or 16bit"
FILE=tests_decode.txt step decode 150 $PT test_gpu_decode.py test_gpu_decode_forms.py test_gpu_merge.py \
  test_gpu_append_kv.py test_gpu_attention_fuzz.py test_gpu_pdl.py
FILE=tests_prefill.txt step prefill 170 $PT test_gpu_prefill.py test_gpu_prefill_compat.py test_gpu_prefill_compile.py \
  test_gpu_prefill_fp8.py test_gpu_prefill_masks.py test_gpu_prefill_mla.py test_gpu_prefill_mma_sync.py \
  test_gpu_prefill_paged.py test_gpu_prefill_repeat.py test_gpu_prefill_rope.py
FILE=tests_gemm.txt step gemm 170 $PT test_gpu_gemm.py test_gpu_gemm_fp32_out.py test_gpu_gemm_fp8.py \
  test_gpu_gemm_fp8_mma_sync.py test_gpu_gemm_gemv.py test_gpu_gemm_groupwise.py test_gpu_gemm_segments.py \
  test_gpu_gemm_segments_mma_sync.py test_gpu_gemm_stream.py
FILE=sanitizer.txt step memcheck_decode_norm 60 $SAN --tool memcheck $PT test_gpu_decode.py test_gpu_norm_latency.py \
  -k "merged_in_kernel or (layer and (N4095 or N3797))"
FILE=sanitizer.txt step memcheck_prefill 50 $SAN --tool memcheck $PT test_gpu_prefill.py -k "ragged and 128"
FILE=sanitizer.txt step racecheck_decode 40 $SAN --tool racecheck $PT test_gpu_decode.py -k "merged_in_kernel"
grep -h -E "^FAILED|^ERROR|passed|failed|ERROR SUMMARY|RACECHECK SUMMARY" $OUT/tests_*.txt $OUT/sanitizer.txt | head -40
