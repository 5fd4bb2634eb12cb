"""group_gemm_fp8_nt_groupwise at decode-size experts (1-64 rows each): device time of a call
(CUPTI) and the weight bytes read per second, against the HBM read floor.

Run: CUTEFI_PACK_PATH=... python benchmarks/grouped_fp8_decode.py [--output X.json]
"""

from __future__ import annotations

import argparse

import torch

import cutefi
from cutefi.bench.timing import bench_gpu_time

from row_log import record, save  # (benchmarks/row_log.py, beside this script)

SHAPES = ((8, 64, 4096, 7168), (16, 16, 4096, 7168), (32, 4, 4096, 7168), (64, 2, 4096, 7168), (128, 1, 2048, 7168),
          (64, 8, 7168, 2048), (256, 2, 4096, 7168))  # (experts, rows each, N, K)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", default=None, help="write the rows as JSON here")
    args = parser.parse_args()
    rows = []
    for experts, each, n, k in SHAPES:
        a, a_scale = cutefi.quantize_fp8(torch.randn(experts * each, k, device="cuda"), group_shape=(1, 128))
        b = torch.randn(experts, n, k, device="cuda").to(torch.float8_e4m3fn)
        b_scale = torch.rand(experts, n // 128, k // 128, device="cuda") + 0.5
        indptr = torch.arange(0, experts * each + 1, each, device="cuda", dtype=torch.int32)
        out = torch.empty(experts * each, n, device="cuda", dtype=torch.bfloat16)
        ms = bench_gpu_time(lambda: cutefi.group_gemm_fp8_nt_groupwise(a, b, a_scale, b_scale, indptr,
                                                                       scale_major_mode="K", out=out)).median_ms
        row = dict(experts=experts, rows=each, n=n, k=k, us=round(ms * 1e3, 1), weight_gbps=round(b.numel() / ms / 1e6))
        record(rows, row)
    save(args.output, rows)


if __name__ == "__main__":
    main()
