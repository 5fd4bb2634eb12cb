"""One variant tree's times for forced configs (run alternately per tree, each in its own process).

argv: LABEL OUT.json [SET]; SET "unroll" (dev5.sh: the unrolled loops; the session's first run
had no correctness assert), "paired" (dev10.sh) or "wide_weights" (dev11.sh)."""
import json, sys
import torch, cutefi
from cutefi.bench.timing import bench_gpu_time
from cutefi.gemm.plan import override
CASE_SETS = {
    "unroll": [(64, 4096, 4096, "64x64c1k2t"), (64, 4096, 4096, "64x32c1n2t"), (32, 4096, 4096, "64x32c1k2t"),
               (16, 14336, 4096, "128x16c1t"), (16, 4096, 14336, "64x32c1k2t"), (64, 14336, 4096, "128x64c1t"),
               (8, 28672, 8192, "128x16c1t"), (256, 4096, 4096, "128x64c1n2t"), (16, 4096, 4096, "128x16c1k2t"),
               (64, 8192, 8192, "128x64c1k2t"), (4096, 4096, 4096, "128x256c1"), (8192, 8192, 8192, "128x256c2"),
               (1024, 14336, 4096, "128x128c1"), (256, 4096, 14336, "128x128c1k2"), (128, 4096, 4096, "128x64c1")],
    "paired": [(64, 4096, 4096, "64x64c1k2t"), (64, 4096, 4096, "64x32c1n2t"), (32, 4096, 4096, "64x32c1k2t"),
               (16, 14336, 4096, "128x16c1t"), (16, 4096, 14336, "64x32c1k2t"), (64, 14336, 4096, "128x64c1t"),
               (8, 28672, 8192, "128x16c1t"), (256, 4096, 4096, "128x64c1n2t"), (16, 4096, 4096, "128x16c1k2t"),
               (64, 8192, 8192, "128x64c1k2t"), (48, 4096, 4096, "64x64c1k2t"), (16, 8192, 8192, "128x16c1t"),
               (64, 4096, 14336, "64x64c1k2t"), (7, 1000, 1000, "128x16c1t"), (33, 4160, 520, "64x64c1k2t"),
               (100, 3000, 2056, "128x64c1t"), (17, 128, 8200, "64x32c1n2t"),
               (16, 8192, 8200, "128x16c1t"), (64, 4096, 8200, "128x64c1k2t")],
    "wide_weights": [(16, 28672, 8192, "128x16c1t"), (64, 28672, 8192, "128x64c1t"), (8, 28672, 8192, "128x16c1t"),
                     (64, 8192, 28672, "128x64c1k2t"), (16, 14336, 4096, "128x16c1t"), (100, 3000, 2056, "128x64c1t"),
                     (64, 4096, 4096, "64x64c1k2t")],
}
torch.manual_seed(0)
res = {}
for m, n, k, cfg in CASE_SETS[sys.argv[3] if len(sys.argv) > 3 else "unroll"]:
    w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    ref = a.float() @ w.float().t()
    with override(config=cfg):
        got = cutefi.mm_bf16(a, w.t()).float()
        err = ((got - ref).norm() / ref.norm()).item()
        assert err < 1e-2, (m, n, k, cfg, err)
        t = bench_gpu_time(cutefi.mm_bf16, (a, w.t()), iters=200).median_ms * 1e3
    tc = bench_gpu_time(torch.matmul, (a, w.t()), iters=200).median_ms * 1e3
    res[f"{m}x{n}x{k} {cfg}"] = (round(t, 2), round(tc, 2), err)
    print(sys.argv[1], f"{m}x{n}x{k} {cfg}", round(t, 2), round(tc, 2), f"{err:.1e}", flush=True)
json.dump(res, open(sys.argv[2], "w"))
