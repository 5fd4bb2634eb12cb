"""One variant tree's times for forced swapped configs (run alternately per tree): argv[1] label, argv[2] out json."""
import json, sys
import torch, cutefi
from cutefi.bench.timing import bench_gpu_time
from cutefi.gemm.plan import override
CASES = [(64, 4096, 4096, "64x64c1k2t"), (64, 4096, 4096, "64x32c1n2t"), (32, 4096, 4096, "64x32c1k2t"),
         (16, 14336, 4096, "128x16c1t"), (16, 4096, 14336, "64x32c1k2t"), (64, 14336, 4096, "128x64c1t"),
         (8, 28672, 8192, "128x16c1t"), (256, 4096, 4096, "128x64c1n2t"), (16, 4096, 4096, "128x16c1k2t"),
         (64, 8192, 8192, "128x64c1k2t"), (48, 4096, 4096, "64x64c1k2t"), (16, 8192, 8192, "128x16c1t"),
         (64, 4096, 14336, "64x64c1k2t"), (7, 1000, 1000, "128x16c1t"), (33, 4160, 520, "64x64c1k2t"),
         (100, 3000, 2056, "128x64c1t"), (17, 128, 8200, "64x32c1n2t"),
         (16, 8192, 8200, "128x16c1t"), (64, 4096, 8200, "128x64c1k2t")]
torch.manual_seed(0)
res = {}
for m, n, k, cfg in CASES:
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
