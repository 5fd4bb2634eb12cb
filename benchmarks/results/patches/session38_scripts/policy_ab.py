"""In-process A/B of the swapped builds' weight L2 policy on L2-resident weights (same tensors, 3 rounds)."""
import json, statistics, sys
import torch, cutefi
from cutefi.bench.timing import bench_gpu_time
from cutefi.gemm.plan import override
POL = {"normal": 0x1000000000000000, "zero": 0, "last": 0x14F0000000000000, "first": 0x12F0000000000000}
CASES = [(64, 4096, 4096, None), (64, 4096, 4096, "64x32c1n2t"), (32, 4096, 4096, None), (16, 4096, 4096, None),
         (256, 4096, 4096, "128x64c1n2t"), (64, 8192, 2048, None), (64, 2048, 8192, None)]
out = {}
for m, n, k, cfg in CASES:
    w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    times = {p: [] for p in POL}
    times["cublas"] = []
    for r in range(3):
        for p, v in POL.items():
            kw = {"weight_policy": v, **({"config": cfg} if cfg else {})}
            with override(**kw):
                times[p].append(bench_gpu_time(cutefi.mm_bf16, (a, w.t()), iters=100).median_ms * 1e3)
        times["cublas"].append(bench_gpu_time(torch.matmul, (a, w.t()), iters=100).median_ms * 1e3)
    med = {k2: round(statistics.median(v), 2) for k2, v in times.items()}
    out[f"{m}x{n}x{k} {cfg}"] = med
    cb = med["cublas"]
    print(f"{m:>5} {n:>6} {k:>6} {cfg} " + " ".join(f"{k2} {v:7.2f} ({cb / v:.3f})" for k2, v in med.items()), flush=True)
json.dump(out, open(sys.argv[1], "w"), indent=1)
