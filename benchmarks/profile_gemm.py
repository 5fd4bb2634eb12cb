"""One launch of cutefi's GEMM (a chosen config) and of torch.matmul on the same problem, for
``ncu``; the first calls (kernel load) are outside ncu's range by ``--launch-skip``.

Run: ncu --clock-control none --launch-skip 4 --section SpeedOfLight --section MemoryWorkloadAnalysis \
         --section WarpStateStats --section Occupancy python3 benchmarks/profile_gemm.py --m 16 --n 8192 --k 28672
"""

from __future__ import annotations

import argparse

import torch

import cutefi
from cutefi.gemm.plan import override

parser = argparse.ArgumentParser()
parser.add_argument("--m", type=int, default=16)
parser.add_argument("--n", type=int, default=8192)
parser.add_argument("--k", type=int, default=28672)
parser.add_argument("--config", default=None)
parser.add_argument("--splits", type=int, default=None)
args = parser.parse_args()
a = torch.randn(args.m, args.k, device="cuda", dtype=torch.bfloat16)
w = torch.randn(args.n, args.k, device="cuda", dtype=torch.bfloat16)
with override(config=args.config, splits=args.splits):
    for _ in range(2):  # warm: kernel loaded, plan cached
        cutefi.mm_bf16(a, w.t())
        torch.matmul(a, w.t())
    torch.cuda.synchronize()
    cutefi.mm_bf16(a, w.t())
    torch.matmul(a, w.t())
torch.cuda.synchronize()
