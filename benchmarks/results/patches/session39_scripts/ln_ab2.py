"""Session 39 A/B: LayerNorm 4096 builds (the tree on PYTHONPATH), one process a tree. CUPTI medians and
refchecks (rel L2 against float32 F.layer_norm; an input with mean 1000 and std 1 checks the statistics)."""
import json, sys
import torch
import torch.nn.functional as F
from cutefi.bench.timing import bench_gpu_time
import cutefi

EPS = 1e-6
tag = sys.argv[2]
res = {}
for N in (4096, 4000):
    for M in ((1, 128, 512, 513, 1024, 2048, 4096, 16384, 65536) if N == 4096 else (7, 16384)):
        torch.manual_seed(M + N)
        x = torch.randn(M, N, device="cuda", dtype=torch.bfloat16) * 2 + 0.5
        g, b = torch.randn(N, device="cuda"), torch.randn(N, device="cuda")
        y = cutefi.layernorm(x, g, b, EPS)
        ref = F.layer_norm(x.float(), (N,), g, b, EPS)
        err = ((y.float() - ref).norm() / ref.norm()).item()
        xo = (torch.randn(M, N, device="cuda") + 1000).to(torch.bfloat16)  # mean 1000, std 1
        yo = cutefi.layernorm(xo, g, b, EPS)
        refo = F.layer_norm(xo.float(), (N,), g, b, EPS)
        err_off = ((yo.float() - refo).norm() / refo.norm()).item()
        t = bench_gpu_time(lambda: cutefi.layernorm(x, g, b, EPS), timer="cupti", iters=100, warmup=10).median_ms * 1e3
        gb = 2 * M * N * 2 / 1e3
        res[f"{M}x{N}"] = {"us": t, "gbps": gb / t, "rel": err, "rel_mean_1000": err_off}
        print(f"{tag} {M}x{N}: {t:.2f} us {gb / t:.0f} GB/s rel {err:.1e} offset-rel {err_off:.1e}", flush=True)
json.dump(res, open(sys.argv[1], "w"), indent=1)
