"""Time the block-scaled FP8 GEMM's wide tiles against each other and the plan, on this GPU.

For each M and (N, K), gemm_fp8_nt_groupwise (e4m3, 1x128 activation / 128x128 weight scales
from ``quantize_fp8`` of random normals, bf16 out) runs under the plan's choice and under each
forced build with one split (``plan.override``), CUPTI median (CUDA events without it), and
checks its relative error against a dequantised float32 reference. One JSON line per run, so
two source trees can alternate in their own processes (``--tree``, ``--round`` label the lines):

    PYTHONPATH=TREE CUTEFI_PACK_PATH=PACK python benchmarks/gemm_fp8_tiles.py --m 4096 --tree new >> OUT.jsonl

The shapes: DeepSeek-V3's (issue 14's four and a few more); ``--nk 7168,2048 ...`` picks others.
"""

from __future__ import annotations

import argparse
import json

import torch

import cutefi
from cutefi.bench.timing import bench_gpu_time
from cutefi.gemm.plan import block_scaled_plan, override

NK = ["7168,2048", "4096,7168", "7168,18432", "2112,7168", "24576,1536", "7168,16384", "2048,7168", "1536,7168",
      "576,7168", "4096,512", "14336,4096", "4096,14336"]
CONFIGS = ["plan", "128x256c1", "128x192c1", "128x128c1"]


def reference(a, a_scale, w, w_scale) -> torch.Tensor:
    k = a.shape[1]
    a32 = a.float() * a_scale.repeat_interleave(128, 1)[:, :k]
    w32 = w.float() * w_scale.repeat_interleave(128, 0).repeat_interleave(128, 1)[:w.shape[0], :k]
    return a32 @ w32.t()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--m", type=int, nargs="+", default=[4096])
    parser.add_argument("--nk", nargs="+", default=NK, help="N,K pairs")
    parser.add_argument("--configs", nargs="+", default=CONFIGS, help="'plan' or build names")
    parser.add_argument("--tree", default="", help="a label for the source tree")
    parser.add_argument("--round", default="", help="a label for the round")
    args = parser.parse_args()
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    torch.manual_seed(0)
    for m in args.m:
        for n, k in (tuple(int(v) for v in pair.split(",")) for pair in args.nk):
            a, a_scale = cutefi.quantize_fp8(torch.randn(m, k, device="cuda"), group_shape=(1, 128))
            w, w_scale = cutefi.quantize_fp8(torch.randn(n, k, device="cuda"), group_shape=(128, 128))
            ref = reference(a, a_scale, w, w_scale)
            for config in args.configs:
                forced = {} if config == "plan" else {"config": config, "splits": 1}
                with override(**forced):
                    build = block_scaled_plan(m, n, k, sms).config.name

                    def call():
                        return cutefi.gemm_fp8_nt_groupwise(a, w, a_scale, w_scale, "K")

                    ms = bench_gpu_time(call).median_ms
                    rel = ((call().float() - ref).norm() / ref.norm()).item()
                print(json.dumps({"tree": args.tree, "round": args.round, "m": m, "n": n, "k": k, "config": config,
                                  "build": build, "us": round(ms * 1e3, 2),
                                  "tflops": round(2 * m * n * k / ms / 1e9, 1), "rel_err": round(rel, 5)}), flush=True)


if __name__ == "__main__":
    main()
