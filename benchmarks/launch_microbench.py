"""Where a cutefi launch's host time goes, on this GPU's host (median µs per call).

    python benchmarks/launch_microbench.py [--out launch_microbench.json]

Rows, cheapest first: an empty Python call; libcuda's ``cuLaunchKernelEx`` through ctypes with
everything pre-packed, for the context-free ``CUkernel`` and for the device's ``CUfunction``;
``Kernel.launch`` (stream given / torch's current stream); the public ``cutefi.copy_`` and
``cutefi.rmsnorm``; and torch's own ``torch.add(out=)`` of a tiny tensor as the peer.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import statistics
import sys
import time

import torch

import cutefi
from cutefi.copy.launch import COPY_SPEC
from cutefi.jit import libcuda
from cutefi.jit.lookup import get_kernel

CALLS = 20_000


def per_call_us(call, calls: int = CALLS) -> float:
    for _ in range(500):
        call()
    torch.cuda.synchronize()
    rounds = []
    for _ in range(5):
        start = time.perf_counter_ns()
        for _ in range(calls // 5):
            call()
        rounds.append((time.perf_counter_ns() - start) / (calls // 5) / 1e3)
        torch.cuda.synchronize()
    return statistics.median(rounds)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out")
    args = parser.parse_args(argv)
    src = torch.randn(8, device="cuda", dtype=torch.float16)
    dst = torch.empty_like(src)
    a, b, c = (torch.randn(8, device="cuda") for _ in range(3))
    x = torch.randn(1, 4096, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(4096, device="cuda", dtype=torch.bfloat16)
    y = torch.empty_like(x)
    kernel = get_kernel(COPY_SPEC, 0)
    s, d = src.data_ptr(), dst.data_ptr()
    stream = torch.cuda.current_stream().cuda_stream
    kernel.launch((1, 1, 1), 0, stream, False, src=s, dst=d, num_vectors=1)  # fills this thread's state
    state = kernel._local.state
    launch_fn = kernel._launch_fn
    with libcuda.on_device(0):
        function = ctypes.c_void_p(libcuda.kernel_function(kernel._kernel))
    noop = lambda: None  # noqa: E731
    rows = {
        "empty Python call": per_call_us(noop),
        "cuLaunchKernelEx(CUkernel) via ctypes, pre-packed":
            per_call_us(lambda: launch_fn(state.config_ptr, kernel._kernel_ptr, state.pointers_ptr, None)),
        "cuLaunchKernelEx(CUfunction) via ctypes, pre-packed":
            per_call_us(lambda: launch_fn(state.config_ptr, function, state.pointers_ptr, None)),
        "Kernel.launch, stream given": per_call_us(lambda: kernel.launch((1, 1, 1), 0, stream, False, src=s, dst=d, num_vectors=1)),
        "Kernel.launch, torch's current stream": per_call_us(lambda: kernel.launch((1, 1, 1), 0, src=s, dst=d, num_vectors=1)),
        "cutefi.copy_ (public)": per_call_us(lambda: cutefi.copy_(dst, src)),
        "cutefi.rmsnorm(out=) 1x4096 (public)": per_call_us(lambda: cutefi.rmsnorm(x, w, out=y)),
        "torch.add(out=) (peer)": per_call_us(lambda: torch.add(a, b, out=c)),
    }
    peer = rows["torch.add(out=) (peer)"]
    report = {"gpu": torch.cuda.get_device_name(0), "calls": CALLS, "median_us": rows,
              "ratio_to_torch_add": {name: value / peer for name, value in rows.items()},
              "command": " ".join(sys.argv)}
    print(json.dumps(report, indent=1))
    if args.out:
        with open(args.out, "w") as handle:
            json.dump(report, handle, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
