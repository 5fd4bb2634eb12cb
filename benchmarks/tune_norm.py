"""Norm geometry variants (threads per row, CTA size, CTAs per SM) timed side by side, same run.

The variants (``VARIANTS`` of ``tune_norm_rounds.py``, which keeps every round's list) are each
the shipped kernel built with another row split and occupancy target (``launch._class_table``
and ``launch.min_ctas_per_sm`` patched), on a machine with CuTe DSL
(``--build``, into ``.tune/``). On the GPU each is loaded with the contract of the same patch,
launched as the public op launches it, checked against a float32 reference and timed by
CUDA-graph replay next to the shipped op and torch's copy (the ceiling).

Run: python benchmarks/tune_norm.py --build            (CPU machine, CuTe DSL)
     python benchmarks/tune_norm.py --out tune.json     (GPU, with .tune/ carried)
"""

from __future__ import annotations

import argparse
import contextlib
import glob
import json
import math
import os
import pickle
import statistics
import sys

import torch

from cutefi.norm import launch

from tune_norm_rounds import VARIANTS  # noqa: E402  (the round to build and time; the record of the others)

ROWS = 16384


def unpack(variant) -> tuple:
    """A variant with its defaults filled in: (..., aligned, out_dtype, vec, prefetch, early)."""
    return (*variant, None, None, None, None)[:11]


@contextlib.contextmanager
def patched(kind: str, n_class: int, fused: bool, tpr: int, threads: int, ctas: int, aligned: bool = True,
            out_dtype: str | None = None, vec: int | None = None, prefetch: int | None = None,
            early: bool | None = None):
    """launch.geometry gives this variant's split, occupancy, elements per access, prefetch
    depth and (``early``) whether its parameters load with x, for its build."""
    from cutefi.jit import spec as spec_module

    table, occupancy, access = launch._class_table, launch.min_ctas_per_sm, launch.access_elems
    depth, delays = launch.prefetch_depth, launch._delays_weight
    quant = out_dtype is not None

    def ours(k, f, a, q) -> bool:
        return (k, f, a, q) == (kind, fused, aligned, quant)

    def class_table(k, f, a, q):
        found = dict(table(k, f, a, q))
        if ours(k, f, a, q):
            found[n_class] = (tpr, threads)
        return found

    launch._class_table = class_table
    launch.min_ctas_per_sm = lambda n, t, k="rms", a=True, q=False, fused_add=False, d="bf16": (
        ctas if n == n_class and ours(k, fused_add, a, q) else occupancy(n, t, k, a, q, fused_add, d))
    if vec is not None:
        launch.access_elems = lambda k, d, a: vec if (k, a) == (kind, aligned) else access(k, d, a)
    if prefetch is not None:
        launch.prefetch_depth = lambda k, n, a, q, f: (
            prefetch if (n == n_class and ours(k, f, a, q)) else depth(k, n, a, q, f))
    if early is not None:
        launch._delays_weight = lambda k, f, a, n, t, d: (
            not early if (n == n_class and ours(k, f, a, quant)) else delays(k, f, a, n, t, d))
    spec_module._contract.cache_clear()
    try:
        yield launch.contract(kind, "bf16", n_class, fused, False, aligned, out_dtype)
    finally:
        launch._class_table, launch.min_ctas_per_sm, launch.access_elems = table, occupancy, access
        launch.prefetch_depth, launch._delays_weight = depth, delays
        spec_module._contract.cache_clear()


def name(variant) -> str:
    kind, n_class, fused, tpr, threads, ctas, aligned, out_dtype, vec, prefetch, early = unpack(variant)
    cols = n_class if aligned else n_class - 1
    return (f"{kind}{'_add' if fused else ''}{'_quant' if out_dtype else ''}_{cols}_tpr{tpr}_cta{threads}_x{ctas}"
            + (f"_vec{vec}" if vec else "") + (f"_pf{prefetch}" if prefetch is not None else "")
            + ("_early" if early else "") + ("_late" if early is False else ""))


def build_variants() -> None:
    from cutefi.jit.compile import build
    from cutefi.jit.sass import disassemble
    from cutefi.jit.targets import Target

    os.makedirs(".tune", exist_ok=True)
    for variant in VARIANTS:
        kind, n_class, fused, *_, aligned, out_dtype, _, _, _ = unpack(variant)
        with patched(*unpack(variant)):
            artifact = build(launch.norm_spec(kind, "bf16", n_class, fused, aligned=aligned, out_dtype=out_dtype),
                             Target.parse("sm_90a"))
        spills = disassemble(artifact.cubin).count("STL")
        with open(f".tune/{name(variant)}.pkl", "wb") as handle:
            pickle.dump({"cubin": artifact.cubin, "metadata": artifact.metadata, "variant": variant,
                         "spill_stores": spills}, handle)
        print(name(variant), "spill stores", spills)


TIMER = "graph"  # or "cupti" (--timer): device time of single calls, launch latency included


def graph_ms(fn, calls: int = 20, replays: int = 30) -> float:
    if TIMER == "cupti":
        from cutefi.bench.timing import bench_gpu_time
        return bench_gpu_time(fn, timer="cupti", iters=200, warmup=20).median_ms
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


def time_variant(saved: dict, ROWS: int = ROWS) -> dict:
    import torch.nn.functional as F

    import cutefi
    from cutefi.jit.cache import Artifact
    from cutefi.jit.loader import Kernel

    variant = unpack(saved["variant"])
    kind, n_class, fused, *_, aligned, out_dtype, _, _, _ = variant
    n_class = n_class if aligned else n_class - 1  # shifted: odd rows
    x = torch.randn(ROWS, n_class, device="cuda", dtype=torch.bfloat16)
    residual = torch.randn_like(x)
    out = torch.empty(x.shape, device="cuda", dtype=torch.float8_e4m3fn if out_dtype else x.dtype)
    out_bytes = out.element_size() * x.numel()
    if kind == "layer":
        w, b = torch.rand(n_class, device="cuda") + 0.5, torch.randn(n_class, device="cuda")
        reference = F.layer_norm(x.float(), (n_class,), w, b, 1e-6)
        moved = x.numel() * 2 + out_bytes + 2 * n_class * 4
        shipped = ((lambda: cutefi.layernorm_quant(out, x, w, b, 1.0)) if out_dtype  # noqa: E731
                   else (lambda: cutefi.layernorm(x, w, b)))
    else:
        w = torch.rand(n_class, device="cuda", dtype=torch.bfloat16) + 0.5
        b = w
        s = x.float() + (residual.float() if fused else 0)
        reference = s * torch.rsqrt(s.pow(2).mean(-1, keepdim=True) + 1e-6) * w.float()
        moved = (3 if fused else 1) * x.numel() * 2 + out_bytes
        r2 = residual.clone()
        if out_dtype:
            shipped = ((lambda: cutefi.fused_add_rmsnorm_quant(out, x, r2, w, 1.0)) if fused
                       else (lambda: cutefi.rmsnorm_quant(out, x, w, 1.0)))
        else:
            shipped = ((lambda: cutefi.fused_add_rmsnorm(out, r2, w)) if fused
                       else (lambda: cutefi.rmsnorm(x, w, out=out)))
    if out_dtype:
        reference = reference.clamp(-448, 448)
    with patched(*variant) as contract:
        kernel = Kernel(Artifact(cubin=saved["cubin"], metadata=saved["metadata"]), contract)
        shape = launch.geometry(kind, "bf16", variant[1], fused, aligned, out_dtype)
        sms = torch.cuda.get_device_properties(0).multi_processor_count
        # rows of n_class columns (aligned) or n_class - 1: a lead repeats every 8 // gcd(8, n) rows
        iters, grid_x = launch.persistent_grid(shape, ROWS, sms, 8 // math.gcd(8, n_class))
        grid = (grid_x, 1, 1)
    target = residual.clone()

    def call():
        kernel.launch(grid, 0, None, False, x=x.data_ptr(), weight=w.data_ptr(), bias=b.data_ptr(),
                      out=out.data_ptr(), residual=target.data_ptr(), scale=w.data_ptr(), M=ROWS, N=n_class,
                      heads=1, shift=0, row_iters=iters, x_row_stride=n_class, x_head_stride=0, out_row_stride=n_class, out_head_stride=0,
                      residual_row_stride=n_class, residual_head_stride=0, eps=1e-6, scale_value=1.0)

    cutefi.poison_(out)
    call()
    torch.cuda.synchronize()
    error = ((out.float() - reference).norm() / reference.norm()).item()
    return {"gbps": moved / graph_ms(call) / 1e6, "rel_error": error, "spill_stores": saved["spill_stores"],
            "shipped_gbps": moved / graph_ms(shipped) / 1e6}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out")
    parser.add_argument("--build", action="store_true", help="build the variants into .tune/ (needs CuTe DSL)")
    parser.add_argument("--only", default="", help="variant name prefix (e.g. rms_8192)")
    parser.add_argument("--rows", type=int, nargs="+", default=[ROWS], help="rows M to time each variant at")
    parser.add_argument("--timer", choices=("graph", "cupti"), default="graph",
                        help="CUDA-graph replay of 20 calls (throughput) or CUPTI per call (latency)")
    args = parser.parse_args(argv)
    global TIMER
    TIMER = args.timer
    if args.build:
        build_variants()
        return 0
    torch.manual_seed(0)
    rows = {}
    for path in sorted(glob.glob(f".tune/{args.only}*.pkl")):
        with open(path, "rb") as handle:
            saved = pickle.load(handle)
        for m in args.rows:
            label = name(saved["variant"]) + ("" if args.rows == [ROWS] else f"_M{m}")
            rows[label] = time_variant(saved, m)
            print(label, rows[label], flush=True)
    big = torch.empty(1 << 30, device="cuda", dtype=torch.bfloat16)
    big_out = torch.empty_like(big)
    rows["torch copy_ 2 GiB (ceiling)"] = {"gbps": 2 * big.numel() * 2 / graph_ms(lambda: big_out.copy_(big), 5, 15) / 1e6}
    report = {"gpu": torch.cuda.get_device_name(0), "command": " ".join(sys.argv),
              "timer": "CUDA-graph replay" if TIMER == "graph" else "CUPTI, median of 200 calls",
              "rows": args.rows, "dtype": "bf16", "results": rows}
    print(json.dumps(report, indent=1))
    if args.out:
        with open(args.out, "w") as handle:
            json.dump(report, handle, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
