"""GPU and host timers shared by the benchmarks (CUDA events; CUPTI arrives with cutefi-bench).

``gpu_ms`` queues a short device-side sleep before the start event, so the host has already
enqueued the measured launch when the GPU reaches it: the events bracket device execution,
not the Python launch path (on an idle GPU a start event fires at once, and a slower host
call would otherwise be charged to the kernel).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

import torch

# ~50 us at H200 clocks: longer than any host launch path measured here (<= 25 us)
_QUEUE_CYCLES = 100_000


def gpu_ms(call: Callable[[], Any], iters: int = 50, warmup: int = 5) -> float:
    """Median device time of one ``call`` in milliseconds (warm L2, launch queued ahead)."""
    for _ in range(warmup):
        call()
    times = []
    for _ in range(iters):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda._sleep(_QUEUE_CYCLES)
        start.record()
        call()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def wall_us(call: Callable[[], Any], iters: int = 2000) -> float:
    """Host wall time per call, launch included, back to back (what a small-batch server sees)."""
    for _ in range(50):
        call()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(iters):
        call()
    torch.cuda.synchronize()
    return (time.perf_counter() - start) / iters * 1e6


def measure(call: Callable[[], Any], nbytes: int, label: str, wall: bool = False, **fields: Any) -> dict[str, Any]:
    """One benchmark row: ``fields`` plus device time, GB/s and (``wall``) host wall time; printed."""
    ms = gpu_ms(call, iters=30)
    row = {**fields, "gpu_ms": ms, "gbps": nbytes / ms / 1e6}
    if wall:
        row["wall_us"] = wall_us(call)
    print(f"{label} {ms * 1e3:9.2f} us {row['gbps']:7.0f} GB/s"
          + (f"  wall {row['wall_us']:.2f} us" if wall else ""), flush=True)
    return row
