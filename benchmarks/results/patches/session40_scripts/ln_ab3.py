"""A/B of LayerNorm 4096 builds (tree on PYTHONPATH), one process a tree; Triton ln_two w8 r1024 e1 as anchor."""
import os, sys, torch
import torch.nn.functional as F
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ln_fa_triton import ln_two
from cutefi.bench.timing import bench_gpu_time
import cutefi
EPS = 1e-6
tag = sys.argv[1]
us = lambda fn: bench_gpu_time(fn, timer="cupti", iters=200, warmup=20).median_ms * 1e3
line = [tag]
for M in (4096, 16384, 65536):
    N = 4096
    torch.manual_seed(M)
    x = torch.randn(M, N, device="cuda", dtype=torch.bfloat16) * 2 + 0.5
    g, b = torch.randn(N, device="cuda"), torch.randn(N, device="cuda")
    y = cutefi.layernorm(x, g, b, EPS)
    ref = F.layer_norm(x.float(), (N,), g, b, EPS)
    err = ((y.float() - ref).norm() / ref.norm()).item()
    xo = (torch.randn(M, N, device="cuda") + 1000).to(torch.bfloat16)
    refo = F.layer_norm(xo.float(), (N,), g, b, EPS)
    erro = ((cutefi.layernorm(xo, g, b, EPS).float() - refo).norm() / refo.norm()).item()
    o = torch.empty_like(x)
    t = us(lambda: cutefi.layernorm(x, g, b, EPS))
    tt = us(lambda: ln_two[(M,)](x, g, b, o, N, EPS, RB=1024, EV=1, num_warps=8))
    tc = us(lambda: o.copy_(x))
    line.append(f"{M}: {t:.2f} (tri {tt:.2f}, copy {tc:.2f}, err {err:.1e}/{erro:.1e})")
print(" | ".join(line), flush=True)
