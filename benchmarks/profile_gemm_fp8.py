"""One launch of cutefi's block-scaled FP8 GEMM (gemm_fp8_nt_groupwise, DeepSeek-V3 scales),
of its per-tensor FP8 GEMM (bmm_fp8) and of cuBLAS's block-scaled FP8 GEMM on the same problem,
for ``ncu``; the first calls (kernel load) are outside ncu's range by ``--launch-skip``.

Run: ncu --clock-control none --kernel-name regex:"cutefi_gemm|nvjet|sm90" --launch-skip 3 --launch-count 3 \
         --section SpeedOfLight --section WarpStateStats --section SchedulerStats \
         python3 benchmarks/profile_gemm_fp8.py --m 4096 --n 7168 --k 2048
"""

from __future__ import annotations

import argparse

import torch

import cutefi
from cutefi.gemm.plan import override

parser = argparse.ArgumentParser()
parser.add_argument("--m", type=int, default=4096)
parser.add_argument("--n", type=int, default=7168)
parser.add_argument("--k", type=int, default=2048)
parser.add_argument("--config", default=None, help="the block-scaled build (default: the plan's)")
args = parser.parse_args()
a, a_scale = cutefi.quantize_fp8(torch.randn(args.m, args.k, device="cuda"), group_shape=(1, 128))
w, w_scale = cutefi.quantize_fp8(torch.randn(args.n, args.k, device="cuda"), group_shape=(128, 128))
one = torch.ones(1, device="cuda")


def calls() -> None:
    with override(config=args.config):
        cutefi.gemm_fp8_nt_groupwise(a, w, a_scale, w_scale, "K")
    cutefi.bmm_fp8(a[None], w.t()[None], one, one, torch.bfloat16)
    try:  # (cuBLAS's block-scaled FP8 GEMM where this torch has it)
        torch._scaled_mm(a, w.t(), scale_a=a_scale.t().contiguous().t(), scale_b=w_scale.t(), out_dtype=torch.bfloat16)
    except (RuntimeError, ValueError):
        pass


for _ in range(2):  # warm: kernels loaded, plans cached
    calls()
torch.cuda.synchronize()
calls()
torch.cuda.synchronize()
