"""RMSNorm, fused-add RMSNorm and LayerNorm against torch eager and torch.compile, same run.

Bytes: rmsnorm reads input + weight and writes output; fused-add reads input and residual
and writes both; layernorm reads input + fp32 gamma and beta and writes output. For M <= 128
the per-call wall time (launch included) is compared too.
Run: ``python -m cutefi.bench.norm --out results.json``.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

import torch
import torch.nn.functional as F

import cutefi
from cutefi.bench.foundation import environment
from cutefi.bench.timing import measure

ROWS = (1, 128, 4096, 16384, 65536)
HIDDEN = (2048, 4096, 8192, 16384)


def torch_fused_add(x, residual, weight, eps):
    residual.add_(x)
    x.copy_(F.rms_norm(residual, (x.shape[-1],), weight, eps))


def torch_norm(x, weight):
    return F.rms_norm(x, (x.shape[-1],), weight, 1e-6)


def torch_layernorm(x, gamma, beta):
    # fp32 parameters, as cutefi.layernorm takes them; compute in fp32
    return F.layer_norm(x.float(), (x.shape[-1],), gamma, beta, 1e-6).to(x.dtype)


def cases(rows: int, hidden: int, dtype: torch.dtype) -> dict[str, tuple[int, dict[str, Any]]]:
    """op -> (bytes moved, backend -> zero-argument call) for one shape."""
    compiled_norm = torch.compile(torch_norm, dynamic=False)
    compiled_fused = torch.compile(torch_fused_add, dynamic=False)
    compiled_layer = torch.compile(torch_layernorm, dynamic=False)
    x = torch.randn(rows, hidden, device="cuda", dtype=dtype)
    residual = torch.randn_like(x)
    weight = torch.randn(hidden, device="cuda", dtype=dtype)
    gamma, beta = torch.randn(hidden, device="cuda"), torch.randn(hidden, device="cuda")
    gamma16, beta16 = gamma.to(dtype), beta.to(dtype)
    out = torch.empty_like(x)
    elem = x.element_size()
    copy_src, copy_dst = torch.empty_like(x), torch.empty_like(x)
    floor = {"copy floor": lambda: copy_dst.copy_(copy_src)}  # torch copy of the input: same bytes, no math
    return {
        "rmsnorm": (2 * x.numel() * elem + hidden * elem, floor | {
            "cutefi": lambda: cutefi.rmsnorm(x, weight, 1e-6, out=out),
            "torch eager": lambda: F.rms_norm(x, (hidden,), weight, 1e-6),
            "torch.compile": lambda: compiled_norm(x, weight),
        }),
        "fused_add_rmsnorm": (4 * x.numel() * elem + hidden * elem, {
            "cutefi": lambda: cutefi.fused_add_rmsnorm(x, residual, weight, 1e-6),
            "torch eager": lambda: torch_fused_add(x, residual, weight, 1e-6),
            "torch.compile": lambda: compiled_fused(x, residual, weight, 1e-6),
        }),
        "layernorm": (2 * x.numel() * elem + 2 * hidden * 4, {
            "cutefi": lambda: cutefi.layernorm(x, gamma, beta, 1e-6),
            # eager's fused kernel wants parameters in the input dtype: converted beforehand
            "torch eager": lambda: F.layer_norm(x, (hidden,), gamma16, beta16, 1e-6),
            "torch.compile": lambda: compiled_layer(x, gamma, beta),
        }),
    }


def run(dtype: torch.dtype = torch.bfloat16, rows_list=ROWS, hidden_list=HIDDEN,
        ops: list[str] | None = None) -> list[dict[str, Any]]:
    # one specialised graph per shape, as a server with fixed shapes would have; without a
    # higher limit dynamo silently falls back to eager after 8 shapes
    torch._dynamo.config.recompile_limit = 1024
    results = []
    for rows in rows_list:
        for hidden in hidden_list:
            torch._dynamo.reset()
            for op, (nbytes, calls) in cases(rows, hidden, dtype).items():
                if ops and op not in ops:
                    continue
                for backend, call in calls.items():
                    results.append(measure(call, nbytes, f"{op:18s} M={rows:6d} N={hidden:6d} {backend:14s}",
                                           wall=rows <= 128, op=op, dtype=str(dtype)[6:], M=rows, N=hidden,
                                           backend=backend))
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", required=True)
    parser.add_argument("--rows", type=int, nargs="+", default=list(ROWS))
    parser.add_argument("--hidden", type=int, nargs="+", default=list(HIDDEN))
    parser.add_argument("--ops", nargs="+", default=None, help="subset of rmsnorm fused_add_rmsnorm layernorm")
    args = parser.parse_args(argv)
    report = {"env": environment(), "results": run(rows_list=args.rows, hidden_list=args.hidden, ops=args.ops)}
    with open(args.out, "w") as handle:
        json.dump(report, handle, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
