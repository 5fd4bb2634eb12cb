"""One tree's block-scaled FP8 GEMM at the plan's build and forced wide builds (run with that tree
first on PYTHONPATH); CUPTI median; rel. error against a dequantised fp32 reference."""
import json, os, sys, torch
import cutefi
from cutefi.bench.timing import bench_gpu_time
from cutefi.gemm.plan import override, block_scaled_plan
label, rnd = sys.argv[1], sys.argv[2]
CASES = [(4096, 7168, 2048), (4096, 4096, 7168), (4096, 7168, 18432), (4096, 2112, 7168), (4096, 1536, 7168),
         (4096, 14336, 4096), (2048, 7168, 18432), (8192, 4096, 7168)]
torch.manual_seed(0)
for m, n, k in CASES:
    a, sa = cutefi.quantize_fp8(torch.randn(m, k, device="cuda"), group_shape=(1, 128))
    w, sw = cutefi.quantize_fp8(torch.randn(n, k, device="cuda"), group_shape=(128, 128))
    ref = (a.float() * sa.repeat_interleave(128, 1)[:, :k]) @ (
        w.float() * sw.repeat_interleave(128, 0).repeat_interleave(128, 1)[:n, :k]).t()
    for config in os.environ.get("CONFIGS", "plan 128x256c1").split():
        fn = lambda: cutefi.gemm_fp8_nt_groupwise(a, w, sa, sw, "K")
        with override(**({} if config == "plan" else dict(config=config, splits=1))):
            name = block_scaled_plan(m, n, k, 132).config.name if config == "plan" else config
            t = bench_gpu_time(fn).median_ms
            out = fn().float()
        err = ((out - ref).norm() / ref.norm()).item()
        print(json.dumps(dict(tree=label, round=rnd, m=m, n=n, k=k, config=config, build=name, us=round(t * 1e3, 2),
                              tflops=round(2 * m * n * k / t / 1e9, 1), rel_err=round(err, 5))), flush=True)
