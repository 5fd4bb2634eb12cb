"""LayerNorm bf16 16384×4096 at several occupancy targets (``.minnctapersm``), same run.

The variants are built on a machine with CuTe DSL (``--build``: the shipped kernel with
``launch.min_ctas_per_sm`` changed for the layer kind, saved to ``.tune/``); on the GPU each
is loaded with the shipped contract, launched exactly as ``cutefi.layernorm`` does, checked
against a float32 reference and timed by CUDA-graph replay next to cutefi.layernorm, rmsnorm
and torch's copy.

Run: python benchmarks/tune_layernorm.py --build            (CPU machine, CuTe DSL)
     python benchmarks/tune_layernorm.py --out tune.json     (GPU, with .tune/ carried)
"""

from __future__ import annotations

import argparse
import glob
import json
import pickle
import statistics
import sys

import torch

import cutefi
from cutefi.jit.cache import Artifact
from cutefi.jit.loader import Kernel
from cutefi.norm import launch

ROWS, HIDDEN = 16384, 4096


def graph_ms(fn, calls: int = 20, replays: int = 30) -> float:
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(calls):
            fn()
    times = []
    for _ in range(replays):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / calls)
    return statistics.median(times)


def build_variants(occupancies: tuple[int, ...] = (4, 5, 6, 8)) -> None:
    import os

    from cutefi.jit import spec as spec_module
    from cutefi.jit.compile import build
    from cutefi.jit.targets import Target

    os.makedirs(".tune", exist_ok=True)
    shipped = launch.min_ctas_per_sm
    try:
        for ctas in occupancies:
            launch.min_ctas_per_sm = lambda n, d, kind="rms", ctas=ctas: ctas if kind == "layer" else shipped(n, d, kind)
            spec_module._contract.cache_clear()
            artifact = build(launch.NORM_SPECS[("layer", "bf16", 4096, False, False)], Target.parse("sm_90"))
            with open(f".tune/layer_bf16_4096_ctas{ctas}.pkl", "wb") as handle:
                pickle.dump({"cubin": artifact.cubin, "metadata": artifact.metadata, "ctas": ctas}, handle)
    finally:
        launch.min_ctas_per_sm = shipped
        spec_module._contract.cache_clear()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out")
    parser.add_argument("--build", action="store_true", help="build the variants into .tune/ (needs CuTe DSL)")
    args = parser.parse_args(argv)
    if args.build:
        build_variants()
        return 0
    torch.manual_seed(0)
    x = torch.randn(ROWS, HIDDEN, device="cuda", dtype=torch.bfloat16)
    gamma, beta = torch.rand(HIDDEN, device="cuda") + 0.5, torch.randn(HIDDEN, device="cuda")
    out = torch.empty_like(x)
    reference = torch.nn.functional.layer_norm(x.float(), (HIDDEN,), gamma, beta, 1e-6)
    moved = 2 * x.numel() * 2 + 2 * HIDDEN * 4
    contract = launch.contract("layer", "bf16", 4096, False, False)
    rows = {}
    for path in sorted(glob.glob(".tune/layer_bf16_4096_ctas*.pkl")):
        with open(path, "rb") as handle:
            saved = pickle.load(handle)
        kernel = Kernel(Artifact(cubin=saved["cubin"], metadata=saved["metadata"]), contract)
        grid = contract.grid({"M": ROWS})

        def call(kernel=kernel, grid=grid):
            kernel.launch(grid, 0, None, False, x=x.data_ptr(), weight=gamma.data_ptr(), bias=beta.data_ptr(),
                          out=out.data_ptr(), residual=x.data_ptr(), M=ROWS, N=HIDDEN, x_row_stride=HIDDEN,
                          out_row_stride=HIDDEN, residual_row_stride=HIDDEN, eps=1e-6)

        cutefi.poison_(out)
        call()
        error = ((out.float() - reference).norm() / reference.norm()).item()
        rows[f"minnctapersm {saved['ctas']}"] = {"gbps": moved / graph_ms(call) / 1e6, "rel_error": error}
    rows["cutefi.layernorm (shipped)"] = {"gbps": moved / graph_ms(lambda: cutefi.layernorm(x, gamma, beta)) / 1e6}
    w = torch.randn(HIDDEN, device="cuda", dtype=torch.bfloat16)
    rows["cutefi.rmsnorm (same shape)"] = {"gbps": 2 * x.numel() * 2 / graph_ms(lambda: cutefi.rmsnorm(x, w, out=out)) / 1e6}
    big = torch.empty(1 << 30, device="cuda", dtype=torch.bfloat16)
    big_out = torch.empty_like(big)
    rows["torch copy_ 2 GiB (ceiling)"] = {"gbps": 2 * big.numel() * 2 / graph_ms(lambda: big_out.copy_(big), 5, 15) / 1e6}
    report = {"gpu": torch.cuda.get_device_name(0), "command": " ".join(sys.argv), "timer": "CUDA-graph replay",
              "rows": rows}
    print(json.dumps(report, indent=1))
    with open(args.out, "w") as handle:
        json.dump(report, handle, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
