"""In-process A/B of forced non-swapped Hopper tiles (same tensors, 3 rounds), cuBLAS in the same run.

argv: OUT.json [SET]; SET "mid" (128 x {256, 224, 128} tiles on the 14336/28672-row weights: a
scratch tree with the 224-wide build) or "c2" (129-512 tokens: 128 x 64 / 128 x 128 tiles alone,
with the weight multicast to two token tiles, built in a scratch tree, or K in cluster pairs).
A config is a name or (name, splits)."""
import json, statistics, sys
import torch, cutefi
from cutefi.bench.timing import bench_gpu_time
from cutefi.gemm.plan import override
CASE_SETS = {
    "mid": ([(256, 14336, 4096), (256, 28672, 8192), (1024, 14336, 4096), (1024, 28672, 8192), (4096, 14336, 4096),
             (4096, 28672, 8192), (16384, 14336, 4096), (2048, 14336, 4096), (512, 14336, 4096), (768, 14336, 4096)],
            ["128x256c1", "128x224c1", "128x128c1", "128x256c2", "128x224c2"]),
    "c2": ([(256, 4096, 4096), (256, 4096, 14336), (200, 4096, 4096), (256, 8192, 8192), (384, 4096, 4096),
            (512, 4096, 4096), (256, 4096, 8192)],
           ["128x64c1", "128x64c2", "128x128c1", "128x128c2", ("128x128c1k2", 2)]),
}
out = {}
SHAPES, CONFIGS = CASE_SETS[sys.argv[2] if len(sys.argv) > 2 else "mid"]
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
