# Session 53: fused_rmsnorm_silu (FlashInfer's RMSNorm + SiLU) on one GPU: its GPU tests, the
# torch.compile/opcheck tests, the decode workspace_size test (session 52's), and the routine
# against torch eager and torch.compile (CUPTI, --refcheck) with the copy ceiling of the run.
# carry: .cubins_ng (norm. incl. the SiLU builds, attention., prefill., copy, fill) .cubins_rope .whl
source benchmarks/results/patches/session48_scripts/common.sh
export PYTHONPATH=/tmp/site:$ROOT
packs $ROOT/.cubins_ng $ROOT/.cubins_rope
cd $ROOT/tests
FILE=tests.txt step silu 150 $PT test_gpu_norm_silu.py
FILE=tests.txt step compile 120 $PT test_gpu_compile.py -k "silu or decoder_block or rmsnorm_quant" \
  test_gpu_decode_forms.py::test_workspace_size_is_what_plan_needs
FILE=tests.txt step memcheck 60 compute-sanitizer --report-api-errors no --error-exitcode 1 --tool memcheck \
  $PT test_gpu_norm_silu.py -k "(257-4095 or 257-40000 or 3-129) or views"
cd $ROOT
FILE=bench.txt step bench 150 python $BM --routine fused_rmsnorm_silu --rows 1 128 4096 16384 65536 \
  --hidden 2048 4096 8192 16384 --out-bits 16 8 --refcheck --output $OUT/norm_silu_${G}_session53.json
FILE=bench.txt step odd 40 python $BM --routine fused_rmsnorm_silu rmsnorm --rows 16384 --hidden 4095 4096 \
  --backends cutefi torch.compile --refcheck
cat $OUT/gpu.txt
grep -h -E "^FAILED|^ERROR|passed|failed|ERROR SUMMARY|^== " $OUT/tests*.txt | head -30
grep -E "cutefi|copy" $OUT/bench.txt 2>/dev/null | cut -c1-200 | head -60
