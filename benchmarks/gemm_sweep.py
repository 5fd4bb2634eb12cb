"""Sweep the dense GEMM's configurations on this GPU, cuBLAS timed in the same run.

For each problem (``--m``, ``--nk N,K ...``) every built config that can take it, times each
``--splits`` value (0: the heuristic's), are timed with CUPTI (CUDA events without it) over
weight copies rotated past the L2 (``--warm``: one weight, as ``cutefi-bench`` times), and written as JSON: time, TFLOP/s, weight GB/s, ratio to
torch.matmul, and the heuristic's own choice.

Run: python benchmarks/gemm_sweep.py --m 1 16 --nk 4096,4096 14336,4096 --out sweep.json
"""

from __future__ import annotations

import argparse
import json
import sys

import torch

import cutefi
from cutefi.bench.timing import bench_gpu_time
from cutefi.gemm import launch
from cutefi.gemm.plan import launch_plan, override

ROTATE_BYTES = 256 << 20  # weight copies rotated per call: past any L2


def _rotating(fn, a, weights):
    state = [0]

    def call():
        state[0] = (state[0] + 1) % len(weights)
        return fn(a, weights[state[0]])
    return call


def _configs(m: int):
    skinny = [c for c in launch.SKINNY_CONFIGS if m <= 8 * c.token_tiles] if m <= launch.SKINNY_MAX_M else []
    return skinny + list(launch.CONFIGS) + list(launch.SM80_CONFIGS)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--m", type=int, nargs="+", default=[1, 16])
    parser.add_argument("--nk", nargs="+", default=["4096,4096", "14336,4096", "4096,14336", "8192,8192",
                                                     "28672,8192", "8192,28672"])
    parser.add_argument("--splits", type=int, nargs="+", default=[0, 1, 2, 3, 4, 6, 8])
    parser.add_argument("--configs", nargs="*", default=None, help="config names (default: all that fit)")
    parser.add_argument("--iters", type=int, default=100)
    parser.add_argument("--warm", action="store_true", help="one weight, warm in L2 (as cutefi-bench times)")
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    l2_bytes = torch.cuda.get_device_properties(0).L2_cache_size  # (the weight's L2 policy: plan.stream_weight)
    rows = []
    for nk in args.nk:
        n, k = (int(v) for v in nk.split(","))
        weight_bytes = n * k * 2
        copies = 1 if args.warm else max(1, -(-ROTATE_BYTES // weight_bytes))
        weights = [torch.randn(n, k, device="cuda", dtype=torch.bfloat16).t() for _ in range(copies)]
        for m in args.m:
            a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
            ref = a.float() @ weights[0].float()
            peer = bench_gpu_time(_rotating(torch.matmul, a, weights), iters=args.iters).median_ms * 1e3
            chosen = launch_plan(m, n, k, 1, sms, True, l2_bytes=l2_bytes)
            for config in _configs(m):
                if args.configs and config.name not in args.configs:
                    continue
                for splits in args.splits:
                    if splits and isinstance(config, launch.Sm90Config) and config.cluster_m > 1:
                        continue
                    if splits > 1 and isinstance(config, launch.Sm80Config):
                        continue  # (no split-K in the mma.sync kernel)
                    with override(config=config, splits=splits or None):
                        try:
                            plan = launch_plan(m, n, k, 1, sms, True, l2_bytes=l2_bytes)
                        except ValueError:
                            continue  # (a split count this build cannot take: cluster_k builds split in pairs)
                        if splits and plan.splits != splits:
                            continue  # (normalised to another value: timed under that one)
                        out = cutefi.mm_bf16(a, weights[0])
                        err = ((out.float() - ref).norm() / ref.norm()).item()
                        us = bench_gpu_time(_rotating(cutefi.mm_bf16, a, weights), iters=args.iters).median_ms * 1e3
                    row = dict(m=m, n=n, k=k, config=config.name, splits=plan.splits, us=us, cublas_us=peer,
                               weight_policy=getattr(plan, "weight_policy", None),
                               k_rotation=getattr(plan, "k_rotation", None),
                               ratio=peer / us, weight_gbs=weight_bytes / us / 1e3,
                               tflops=2 * m * n * k / us / 1e6, rel_err=err,
                               heuristic=(plan.config == chosen.config and plan.splits == chosen.splits))
                    rows.append(row)
                    print(f"{m:>5} {n:>6} {k:>6} {config.name:>10} s{plan.splits:<2} {us:8.1f} us "
                          f"{row['weight_gbs']:7.0f} GB/s  cublas {peer:8.1f} us  x{row['ratio']:.2f}"
                          f"{'  <- heuristic' if row['heuristic'] else ''}", flush=True)
            del a
        del weights
    meta = dict(gpu=torch.cuda.get_device_name(0), torch=torch.__version__, cutefi=cutefi.__version__,
                command=" ".join(sys.argv), l2="warm" if args.warm else "weights rotated past L2")
    with open(args.out, "w") as handle:
        json.dump(dict(meta=meta, rows=rows), handle, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
