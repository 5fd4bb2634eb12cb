"""In-process A/B of the landed plan (weight L2 policy + K rotation from plan.stream_weight)
against the same builds with the defaults forced (EVICT_NORMAL, no rotation): same tensors,
interleaved, three rounds; cuBLAS (torch.matmul / torch._scaled_mm) in the same loop."""
import json, statistics, sys
import torch, cutefi
from cutefi.bench.timing import bench_gpu_time
from cutefi.gemm import launch
from cutefi.gemm.plan import override
BF16 = [(1, 4096, 14336), (1, 14336, 4096), (16, 14336, 4096), (1, 8192, 8192), (16, 8192, 8192),
        (1, 28672, 8192), (16, 28672, 8192), (32, 28672, 8192), (1, 8192, 28672), (16, 8192, 28672),
        (64, 4096, 14336), (64, 8192, 8192), (64, 14336, 4096), (64, 28672, 8192), (64, 4096, 4096), (32, 4096, 4096)]
FP8 = [(64, 14336, 4096), (64, 4096, 14336), (16, 8192, 8192), (64, 28672, 8192), (64, 4096, 4096)]


def measure(fn, peer, check):
    times = {"defaults": [], "plan": [], "cublas": []}
    for _ in range(3):
        with override(weight_policy=launch.EVICT_NORMAL, k_rotation=0):
            check()
            times["defaults"].append(bench_gpu_time(fn, iters=50).median_ms * 1e3)
        check()
        times["plan"].append(bench_gpu_time(fn, iters=50).median_ms * 1e3)
        times["cublas"].append(bench_gpu_time(peer, iters=50).median_ms * 1e3)
    return {key: round(statistics.median(v), 2) for key, v in times.items()}


out = {"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__, "command": " ".join(sys.argv),
       "bf16": {}, "fp8": {}}
for m, n, k in BF16:
    w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    ref = a.float() @ w.float().t()

    def check():
        got = cutefi.mm_bf16(a, w.t()).float()
        assert ((got - ref).norm() / ref.norm()).item() < 1e-2
    r = measure(lambda: cutefi.mm_bf16(a, w.t()), lambda: torch.matmul(a, w.t()), check)
    out["bf16"][f"{m}x{n}x{k}"] = r
    print("bf16", m, n, k, r, f"gain {r['defaults'] / r['plan']:.3f} vs cublas {r['cublas'] / r['plan']:.3f}", flush=True)
one = torch.ones((), device="cuda")
for m, n, k in FP8:
    w8 = (torch.randn(n, k, device="cuda") * 0.5).to(torch.float8_e4m3fn)
    a8 = (torch.randn(m, k, device="cuda") * 0.5).to(torch.float8_e4m3fn)
    ref = a8.float() @ w8.float().t()
    fn = lambda: cutefi.bmm_fp8(a8.unsqueeze(0), w8.t().unsqueeze(0), one, one, torch.bfloat16)

    def check():
        got = fn()[0].float()
        assert ((got - ref).norm() / ref.norm()).item() < 1e-2
    r = measure(fn, lambda: torch._scaled_mm(a8, w8.t(), one, one, out_dtype=torch.bfloat16), check)
    out["fp8"][f"{m}x{n}x{k}"] = r
    print("fp8", m, n, k, r, f"gain {r['defaults'] / r['plan']:.3f} vs cublas {r['cublas'] / r['plan']:.3f}", flush=True)
json.dump(out, open(sys.argv[1], "w"), indent=1)
