"""RMSNorm / fused-add RMSNorm against torch eager and torch.compile, same run, CUDA events.

Bytes: rmsnorm reads input + weight and writes output; fused-add reads input and residual
and writes both. For M <= 128 the per-call wall time (launch included) is compared too.
Run: ``python -m cutefi.bench.norm --out results.json``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any, Callable

import torch
import torch.nn.functional as F

import cutefi
from cutefi.bench.foundation import environment, gpu_ms

ROWS = (1, 128, 4096, 16384, 65536)
HIDDEN = (2048, 4096, 8192, 16384)


def wall_us(call: Callable[[], Any], iters: int = 2000) -> float:
    """Host wall time per call, launch included, with the GPU kept busy."""
    for _ in range(50):
        call()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(iters):
        call()
    torch.cuda.synchronize()
    return (time.perf_counter() - start) / iters * 1e6


def torch_fused_add(x, residual, weight, eps):
    residual.add_(x)
    x.copy_(F.rms_norm(residual, (x.shape[-1],), weight, eps))


def torch_norm(x, weight):
    return F.rms_norm(x, (x.shape[-1],), weight, 1e-6)


def run(dtype: torch.dtype = torch.bfloat16) -> list[dict[str, Any]]:
    # one specialised graph per shape, as a server with fixed shapes would have; without a
    # higher limit dynamo silently falls back to eager after 8 shapes
    torch._dynamo.config.recompile_limit = 1024
    rows_out = []
    for rows in ROWS:
        for hidden in HIDDEN:
            torch._dynamo.reset()
            compiled_norm = torch.compile(torch_norm, dynamic=False)
            compiled_fused = torch.compile(torch_fused_add, dynamic=False)
            x = torch.randn(rows, hidden, device="cuda", dtype=dtype)
            residual = torch.randn_like(x)
            weight = torch.randn(hidden, device="cuda", dtype=dtype)
            out = torch.empty_like(x)
            elem = x.element_size()
            backends = {
                "rmsnorm": (2 * x.numel() * elem + hidden * elem, {
                    "cutefi": lambda: cutefi.rmsnorm(x, weight, 1e-6, out=out),
                    "torch eager": lambda: F.rms_norm(x, (hidden,), weight, 1e-6),
                    "torch.compile": lambda: compiled_norm(x, weight),
                }),
                "fused_add_rmsnorm": (4 * x.numel() * elem + hidden * elem, {
                    "cutefi": lambda: cutefi.fused_add_rmsnorm(x, residual, weight, 1e-6),
                    "torch eager": lambda: torch_fused_add(x, residual, weight, 1e-6),
                    "torch.compile": lambda: compiled_fused(x, residual, weight, 1e-6),
                }),
            }
            for op, (nbytes, calls) in backends.items():
                for backend, call in calls.items():
                    ms = gpu_ms(call, iters=30)
                    row = {"op": op, "dtype": str(dtype)[6:], "M": rows, "N": hidden, "backend": backend,
                           "gpu_ms": ms, "gbps": nbytes / ms / 1e6}
                    if rows <= 128:
                        row["wall_us"] = wall_us(call)
                    rows_out.append(row)
                    print(f"{op:18s} M={rows:6d} N={hidden:6d} {backend:14s} {ms * 1e3:9.2f} us "
                          f"{row['gbps']:7.0f} GB/s" + (f"  wall {row['wall_us']:.2f} us" if "wall_us" in row else ""),
                          flush=True)
    return rows_out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    report = {"env": environment(), "results": run()}
    with open(args.out, "w") as handle:
        json.dump(report, handle, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
