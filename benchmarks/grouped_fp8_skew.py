"""group_gemm_fp8_nt_groupwise at decode-size experts under skewed routing: the same rows spread
uniformly or by a Zipf law over the experts, timed (CUPTI median) at the plan's build and at each
grouped build forced, each checked against a dequantised fp32 reference.

The plan sees only the average rows an expert (the lengths stay on the device), so a few hot
experts among many cold ones take the builds chosen for the average.

Run: CUTEFI_PACK_PATH=... python benchmarks/grouped_fp8_skew.py [--output X.json]
"""

from __future__ import annotations

import argparse

import torch

import cutefi
import cutefi.gemm.api  # noqa: F401  (the family first: it imports segment_api in order)
from cutefi.bench.timing import bench_gpu_time
from cutefi.gemm import segment_api
from cutefi.gemm.launch import Sm90Config

from row_log import record, save  # (benchmarks/row_log.py, beside this script)

BUILDS = (("plan", None), ("128x256", Sm90Config(128, 256, 1)), ("128x128", Sm90Config(128, 128, 1)),
          ("128x64t", Sm90Config(128, 64, 1, True)), ("128x32t", Sm90Config(128, 32, 1, True)))
SHAPES = ((8, 128, 14336, 4096), (8, 512, 14336, 4096), (64, 512, 4096, 7168), (256, 512, 4096, 7168),
          (256, 2048, 4096, 7168))  # (experts, rows in all, N, K)
ROUTINGS = (("uniform", 0.0), ("zipf1.0", 1.0), ("zipf1.5", 1.5))


def zipf_counts(experts: int, total: int, exponent: float, generator: torch.Generator) -> torch.Tensor:
    """Rows an expert: shares 1 / rank**exponent (0: uniform), in a random expert order."""
    weights = 1.0 / torch.arange(1, experts + 1, dtype=torch.float64) ** exponent
    counts = torch.floor(weights / weights.sum() * total).long()
    counts[0] += total - counts.sum()
    return counts[torch.randperm(experts, generator=generator)]


def reference(a, a_scale, b, b_scale, indptr_host) -> torch.Tensor:
    a_deq = a.float() * a_scale.repeat_interleave(128, 1)
    ref = torch.empty(a.shape[0], b.shape[1], device="cuda")
    for expert in range(b.shape[0]):
        lo, hi = int(indptr_host[expert]), int(indptr_host[expert + 1])
        if hi > lo:
            weight = b[expert].float() * b_scale[expert].repeat_interleave(128, 0).repeat_interleave(128, 1)
            ref[lo:hi] = a_deq[lo:hi] @ weight.t()
    return ref


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", default=None, help="write the rows as JSON here")
    args = parser.parse_args()
    planned = segment_api._config
    generator = torch.Generator().manual_seed(0)
    rows = []
    for experts, total, n, k in SHAPES:
        b = torch.randn(experts, n, k, device="cuda").to(torch.float8_e4m3fn)
        b_scale = torch.rand(experts, n // 128, k // 128, device="cuda") + 0.5
        a, a_scale = cutefi.quantize_fp8(torch.randn(total, k, device="cuda"), group_shape=(1, 128))
        for routing, exponent in ROUTINGS:
            counts = zipf_counts(experts, total, exponent, generator)
            indptr_host = torch.zeros(experts + 1, dtype=torch.int32)
            indptr_host[1:] = torch.cumsum(counts, 0)
            indptr = indptr_host.cuda()
            ref = reference(a, a_scale, b, b_scale, indptr_host)
            out = torch.empty(total, n, device="cuda", dtype=torch.bfloat16)
            builds = {}
            try:
                for name, config in BUILDS:
                    segment_api._config = planned if config is None else (lambda *_, config=config, **__: config)
                    segment_api._FP8_CALLS.clear()
                    call = lambda: cutefi.group_gemm_fp8_nt_groupwise(a, b, a_scale, b_scale, indptr,  # noqa: E731
                                                                       scale_major_mode="K", out=out)
                    us = bench_gpu_time(call).median_ms * 1e3
                    out.fill_(float("nan"))
                    call()
                    err = ((out.float() - ref).norm() / ref.norm()).item()
                    builds[name] = dict(us=round(us, 1), err=round(err, 5))
            finally:
                segment_api._config = planned
                segment_api._FP8_CALLS.clear()
            row = dict(experts=experts, total=total, n=n, k=k, routing=routing, max_rows=int(counts.max()),
                       plan=planned(total, n, experts, torch.cuda.get_device_properties(0).multi_processor_count,
                                    swapped=True).name, builds=builds)
            record(rows, row)
    save(args.output, rows)


if __name__ == "__main__":
    main()
