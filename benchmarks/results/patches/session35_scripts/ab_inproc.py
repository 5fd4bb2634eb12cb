"""In-process A/B of the swapped builds' weight L2 policy and K rotation (same tensors)."""
import json, statistics, sys
import torch, cutefi
from cutefi.bench.timing import bench_gpu_time
from cutefi.gemm import launch
from cutefi.gemm.plan import override
SHAPES = [(1, 4096, 14336), (1, 14336, 4096), (16, 14336, 4096), (1, 8192, 8192), (16, 8192, 8192),
          (1, 28672, 8192), (16, 28672, 8192), (32, 28672, 8192), (1, 8192, 28672), (64, 4096, 14336),
          (64, 8192, 8192), (64, 14336, 4096), (64, 4096, 4096), (32, 4096, 4096)]
VARIANTS = {"normal": (launch.EVICT_NORMAL, 0), "first": (launch.EVICT_FIRST, 0),
            "normal_rot": (launch.EVICT_NORMAL, 13), "first_rot": (launch.EVICT_FIRST, 13)}
out = {}
for m, n, k in SHAPES:
    w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    ref = a.float() @ w.float().t()
    times = {v: [] for v in VARIANTS}
    times["cublas"] = []
    for r in range(3):
        for name, (pol, rot) in VARIANTS.items():
            with override(weight_policy=pol, k_rotation=rot):
                got = cutefi.mm_bf16(a, w.t()).float()
                err = ((got - ref).norm() / ref.norm()).item()
                assert err < 1e-2, (name, err)
                times[name].append(bench_gpu_time(cutefi.mm_bf16, (a, w.t()), iters=50).median_ms * 1e3)
        times["cublas"].append(bench_gpu_time(torch.matmul, (a, w.t()), iters=50).median_ms * 1e3)
    med = {k2: round(statistics.median(v), 2) for k2, v in times.items()}
    out[f"{m}x{n}x{k}"] = med
    base = med["normal"]
    print(f"{m:>4} {n:>6} {k:>6} " + " ".join(f"{k2} {v:7.2f} ({base / v:.3f})" for k2, v in med.items()), flush=True)
json.dump(out, open(sys.argv[1], "w"), indent=1)
