"""Sweep the RoPE launch's CTA target (how many heads a CTA walks) on the current GPU.

heads_per_cta is a run-time argument of the kernel, so one build serves every setting.
Run: ``python benchmarks/tune_rope.py --out rope_tune.json`` (needs cubins and a GPU).
"""

from __future__ import annotations

import argparse
import json

import torch

import cutefi
from cutefi.bench import bench_gpu_time
from cutefi.bench.environment import environment
from cutefi.rope import rope, rope_launch

SHAPES = ((4096, 32, 8), (16384, 32, 8), (16384, 64, 8), (65536, 32, 8))  # tokens, q heads, k heads


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", required=True)
    parser.add_argument("--targets", type=int, nargs="+", default=[1024, 2048, 3168, 4096, 6336, 8192, 16384])
    args = parser.parse_args()
    rows = []
    for tokens, heads_q, heads_k in SHAPES:
        q = torch.randn(tokens, heads_q, 128, device="cuda", dtype=torch.bfloat16)
        k = torch.randn(tokens, heads_k, 128, device="cuda", dtype=torch.bfloat16)
        pos = torch.randint(0, 16384, (tokens,), device="cuda", dtype=torch.int32)
        nbytes = 2 * (q.numel() + k.numel()) * 2 + 4 * tokens
        for target in args.targets:
            rope_launch.TARGET_CTAS = target
            rope._PLANS._plans.clear()
            hpc = rope_launch.pick_heads_per_cta(tokens, 128, heads_q + heads_k)
            timed = bench_gpu_time(cutefi.apply_rope_pos_ids, (q, k, pos), iters=200)
            gbps = nbytes / timed.median_ms / 1e6
            rows.append({"tokens": tokens, "q_heads": heads_q, "k_heads": heads_k, "target_ctas": target,
                         "heads_per_cta": hpc, "grid": rope_launch.grid(tokens, 128, heads_q + heads_k, hpc),
                         "median_us": timed.median_ms * 1e3, "gbps": gbps, "timer": timed.timer})
            print(f"T={tokens:6d} {heads_q}/{heads_k} target {target:6d} heads/cta {hpc:3d} "
                  f"{timed.median_ms * 1e3:8.2f} us {gbps:6.0f} GB/s", flush=True)
    with open(args.out, "w") as handle:
        json.dump({"env": environment(), "rows": rows}, handle, indent=1)


if __name__ == "__main__":
    main()
