"""FP8 bmm at 33 and 64 tokens: the swapped builds' token tiles and K splits (forced), torch._scaled_mm beside
(warm L2, CUPTI). Run: python benchmarks/gemm_fp8_tokens.py [config:splits ...] (default: the swapped
builds of session 22; splits 0: the build's own)"""
import sys

import torch

import cutefi
from cutefi.bench.timing import bench_gpu_time
from cutefi.gemm.plan import override, launch_plan

F8 = torch.float8_e4m3fn


def q(*shape):
    x = torch.randn(*shape, device="cuda")
    s = (x.abs().amax() / torch.finfo(F8).max).reshape(1)
    return (x / s).clamp(-448, 448).to(F8), s.float()


ASKED = [(c.split(":")[0], int(c.split(":")[1]) or None) for c in sys.argv[1:]]
CONFIGS = [(None, None)] + (ASKED or [("128x32c1k2t", 2), ("128x32c1k2t", 4), ("128x64c1k2t", 2), ("128x64c1k2t", 4),
                                      ("128x64c1t", 4)])
for m in (33, 64):
    for n, k in ((4096, 4096), (14336, 4096), (4096, 14336), (8192, 8192)):
        a, sa = q(1, m, k)
        w, sb = q(1, n, k)
        b = w.transpose(-2, -1)
        ref = torch._scaled_mm(a[0], b[0], scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16).float()
        peer = bench_gpu_time(lambda: torch._scaled_mm(a[0], b[0], scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16),
                              iters=200).median_ms * 1e3
        line = f"m={m} n={n} k={k} scaled_mm {peer:7.2f}"
        for config, splits in CONFIGS:
            with override(config=config, splits=splits):
                plan = launch_plan(m, n, k, 1, 132, True, k_tile=128)
                out = cutefi.bmm_fp8(a, b, sa, sb, torch.bfloat16)
                err = ((out[0].float() - ref).norm() / ref.norm()).item()
                us = bench_gpu_time(lambda: cutefi.bmm_fp8(a, b, sa, sb, torch.bfloat16), iters=200).median_ms * 1e3
            line += f" | {plan.config.name} s{plan.splits} {us:7.2f} x{peer / us:.3f}" + (" ERR" if err > 2e-2 else "")
        print(line, flush=True)
