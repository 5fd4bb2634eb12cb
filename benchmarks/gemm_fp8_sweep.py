"""Sweep the block-scaled FP8 GEMM's builds and split counts on this GPU.

For each issue-14 shape (M in 64 and 4096, (N, K) in DeepSeek-V3's (7168, 2048), (4096, 7168),
(7168, 18432), (2112, 7168)), gemm_fp8_nt_groupwise is timed under the plan's choice, then
under every block-scaled build with 1-8 splits (``plan.override``), with CUPTI (CUDA events
without it), one weight (warm L2, as cutefi-bench times). Written as JSON: time, TFLOP/s.

Run: python benchmarks/gemm_fp8_sweep.py OUT.json
"""

from __future__ import annotations

import json
import sys

import torch

import cutefi
from cutefi.bench.timing import bench_gpu_time
from cutefi.gemm import launch
from cutefi.gemm.plan import block_scaled_plan, override

SHAPES = [(m, n, k) for m in (64, 4096) for n, k in ((7168, 2048), (4096, 7168), (7168, 18432), (2112, 7168))]


def main(out_path: str) -> None:
    rows = []
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    for m, n, k in SHAPES:
        a, a_scale = cutefi.quantize_fp8(torch.randn(m, k, device="cuda"), group_shape=(1, 128))
        w, w_scale = cutefi.quantize_fp8(torch.randn(n, k, device="cuda"), group_shape=(128, 128))

        def call():
            return cutefi.gemm_fp8_nt_groupwise(a, w, a_scale, w_scale, "K")

        plan = block_scaled_plan(m, n, k, sms)
        candidates = [(None, None)] + [(config, splits) for config in launch.BLOCK_SCALED_CONFIGS
                                       for splits in ((1,) if m > 1024 else (1, 2, 3, 4, 6, 8))
                                       if not (config.cluster_k > 1 and splits % 2)]
        for config, splits in candidates:
            try:
                with override(config=config, splits=splits):
                    median = bench_gpu_time(call).median_ms
            except Exception as exc:  # (a build that cannot take the shape)
                print("skip", config, splits, exc, flush=True)
                continue
            name = "plan:" + plan.config.name if config is None else config.name
            rows.append(dict(m=m, n=n, k=k, config=name, splits=plan.splits if config is None else splits,
                             us=median * 1e3, tflops=2 * m * n * k / median / 1e9))
            print(rows[-1], flush=True)
    with open(out_path, "w") as f:
        json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1])
