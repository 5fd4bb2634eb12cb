"""Host time of one public grouped GEMM call (µs, median of 300 ``perf_counter`` spans of the
Python call while the GPU runs behind): group_gemm_fp8_nt_groupwise (8 experts x 64 rows,
4096 x 7168, with and without ``out=``), SegmentGEMMWrapper.run (8 x 16 rows, 4096², seg_lens),
and the dense gemm_fp8_nt_groupwise of the first expert as a same-process reference.

Run one tree a process (its own directory first on the path), alternating trees per round:
    CUTEFI_PACK_PATH=... python benchmarks/grouped_host_time.py LABEL
"""

from __future__ import annotations

import json
import sys
import time

import torch

import cutefi


def _median_host_us(call, spans: int = 300) -> float | str:
    try:
        call()
    except Exception as exc:  # (a tree whose pack lacks the build)
        return type(exc).__name__
    for _ in range(20):
        call()
    torch.cuda.synchronize()
    times = []
    for index in range(spans):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
        if index % 50 == 49:  # (keeps the launch queue short of full)
            torch.cuda.synchronize()
    torch.cuda.synchronize()
    return round(sorted(times)[spans // 2] * 1e6, 1)


def main() -> None:
    label = sys.argv[1] if len(sys.argv) > 1 else "tree"
    experts, rows, n, k = 8, 64, 4096, 7168
    a, a_scale = cutefi.quantize_fp8(torch.randn(experts * rows, k, device="cuda"), group_shape=(1, 128))
    b = torch.randn(experts, n, k, device="cuda").to(torch.float8_e4m3fn)
    b_scale = torch.rand(experts, n // 128, k // 128, device="cuda") + 0.5
    indptr = torch.arange(0, experts * rows + 1, rows, device="cuda", dtype=torch.int32)
    out = torch.empty(experts * rows, n, device="cuda", dtype=torch.bfloat16)
    x = torch.randn(experts * 16, 4096, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(experts, 4096, 4096, device="cuda", dtype=torch.bfloat16)
    lens = torch.full((experts,), 16, device="cuda", dtype=torch.int32)
    y = torch.empty(experts * 16, 4096, device="cuda", dtype=torch.bfloat16)
    segment = cutefi.SegmentGEMMWrapper(torch.empty(1 << 20, dtype=torch.int8, device="cuda"))
    calls = {
        "group_gemm_fp8 out=": lambda: cutefi.group_gemm_fp8_nt_groupwise(a, b, a_scale, b_scale, indptr,
                                                                          scale_major_mode="K", out=out),
        "group_gemm_fp8 new out": lambda: cutefi.group_gemm_fp8_nt_groupwise(a, b, a_scale, b_scale, indptr,
                                                                             scale_major_mode="K"),
        "segment run out=": lambda: segment.run(x, w, experts, True, out=y, seg_lens=lens),
        "dense gemm_fp8 (reference)": lambda: cutefi.gemm_fp8_nt_groupwise(a, b[0], a_scale, b_scale[0], "K", out=out),
    }
    print(json.dumps({"tree": label, "host_us": {name: _median_host_us(call) for name, call in calls.items()}}))


if __name__ == "__main__":
    main()
