"""In-process A/B of 128 x {256, 224, 128} tiles (same tensors, 3 rounds), cuBLAS in the same run."""
import json, statistics, sys
import torch, cutefi
from cutefi.bench.timing import bench_gpu_time
from cutefi.gemm.plan import override
SHAPES = [(256, 4096, 4096), (256, 4096, 14336), (200, 4096, 4096), (256, 8192, 8192), (384, 4096, 4096),
          (512, 4096, 4096), (256, 4096, 8192)]
CONFIGS = ["128x64c1", "128x64c2", "128x128c1", "128x128c2", ("128x128c1k2", 2)]
out = {}
for m, n, k in SHAPES:
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
    ref = a.float() @ w.float().t()
    times = {c if isinstance(c, str) else c[0]: [] for c in CONFIGS + ["cublas"]}
    iters = 50 if m * n * k > 2 ** 38 else 100
    for r in range(3):
        for c in CONFIGS:
            name, splits = (c, 1) if isinstance(c, str) else c
            with override(config=name, splits=splits):
                if r == 0:
                    got = cutefi.mm_bf16(a, w.t()).float()
                    err = ((got - ref).norm() / ref.norm()).item()
                    assert err < 1e-2, (name, err)
                times[name].append(bench_gpu_time(cutefi.mm_bf16, (a, w.t()), iters=iters).median_ms * 1e3)
        times["cublas"].append(bench_gpu_time(torch.matmul, (a, w.t()), iters=iters).median_ms * 1e3)
    med = {c: round(statistics.median(v), 2) for c, v in times.items()}
    out[f"{m}x{n}x{k}"] = med
    print(f"{m:>6} {n:>6} {k:>6} " + " ".join(f"{c} {v:8.2f} ({med['cublas'] / v:.3f})" for c, v in med.items()), flush=True)
json.dump(out, open(sys.argv[1], "w"), indent=1)
