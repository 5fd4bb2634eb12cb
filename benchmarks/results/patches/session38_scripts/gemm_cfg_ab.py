"""In-process sweep of built Hopper configs at the Llama grid's weak points (same tensors, 3 rounds).

argv: OUT.json [SET]; SET "weak" (the plan's builds, dev1) or "c2t" (swapped builds with the
tokens multicast to two weight tiles, cluster_m 2, built in a scratch tree for this only; dev3)."""
import json, statistics, sys
import torch, cutefi
from cutefi.bench.timing import bench_gpu_time
from cutefi.gemm.plan import override
CASE_SETS = {
    "weak": {
        (64, 4096, 4096): [None, "64x32c1n2t", "64x64c1k2t", "64x32c1k2t", ("128x64c1k2t", 4), ("128x64c1k2t", 2), "128x64c1t"],
        (32, 4096, 4096): [None, "64x32c1n2t", "64x32c1k2t"],
        (128, 4096, 4096): [None, "128x64c1n2t", "128x64c1", "128x128c1k2", "64x64c1k2t"],
        (256, 4096, 4096): [None, "128x64c1n2t", "128x64c1", "128x128c1k2", "128x128c1t", ("128x64c1k2t", 2)],
        (256, 14336, 4096): [None, "128x64c1n2t", "128x64c1", "128x128c1", "128x128c1t"],
        (256, 4096, 14336): [None, "128x64c1n2t", "128x64c1", ("128x128c1k2", 2), ("128x64c1k2t", 2)],
        (1024, 14336, 4096): [None, "128x128c1", "128x256c1", "128x256c2"],
    },
    "c2t": {
        (64, 4096, 4096): ["64x64c1k2t", "64x32c2t", "128x16c2t", "64x32c1n2t"],
        (48, 4096, 4096): ["64x64c1k2t", "64x32c2t"],
        (100, 4096, 4096): ["128x64c1", "64x64c1k2t", "64x32c2t", "64x64c2t"],
        (128, 4096, 4096): ["128x64c1", "64x64c2t", "128x32c2t"],
        (256, 4096, 4096): ["128x64c1", "128x64c2t", "128x32c2t", "128x64c1n2t"],
        (256, 14336, 4096): ["128x256c1", "128x64c2t", "128x128c2t", "128x128c1"],
        (256, 4096, 14336): ["128x128c1k2", "128x64c2t", "128x32c2t"],
        (64, 14336, 4096): ["128x64c1k2t", "128x64c1t", "64x32c2t", "128x32c2t", "128x64c2t"],
        (64, 8192, 8192): ["128x64c1k2t", "128x64c1t", "64x32c2t", "128x32c2t", "128x64c2t"],
        (512, 4096, 4096): ["128x128c1", "128x64c1", "128x128c2t", "128x64c2t"],
        (1024, 4096, 4096): ["128x128c1", "128x256c1", "128x128c2t"],
    },
}
out = {}
for (m, n, k), variants in CASE_SETS[sys.argv[2] if len(sys.argv) > 2 else "weak"].items():
    w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    ref = a.float() @ w.float().t()
    names = ["default" if v is None else v if isinstance(v, str) else f"{v[0]}s{v[1]}" for v in variants]
    times = {nm: [] for nm in names}
    times["cublas"] = []
    for r in range(3):
        for nm, v in zip(names, variants):
            kw = {} if v is None else {"config": v} if isinstance(v, str) else {"config": v[0], "splits": v[1]}
            try:
                with override(**kw):
                    got = cutefi.mm_bf16(a, w.t()).float()
                    err = ((got - ref).norm() / ref.norm()).item()
                    assert err < 1e-2, (nm, err)
                    times[nm].append(bench_gpu_time(cutefi.mm_bf16, (a, w.t()), iters=100).median_ms * 1e3)
            except Exception as exc:
                print("ERR", m, n, k, nm, repr(exc)[:200], flush=True)
                times[nm].append(float("nan"))
        times["cublas"].append(bench_gpu_time(torch.matmul, (a, w.t()), iters=100).median_ms * 1e3)
    med = {k2: round(statistics.median(v), 2) for k2, v in times.items()}
    out[f"{m}x{n}x{k}"] = med
    cb = med["cublas"]
    print(f"{m:>5} {n:>6} {k:>6} " + " ".join(f"{k2} {v:7.2f} ({cb / v:.3f})" for k2, v in med.items()), flush=True)
json.dump(out, open(sys.argv[1], "w"), indent=1)
