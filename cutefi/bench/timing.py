"""GPU timing for benchmarks: CUPTI activity records, CUDA events, or CUDA-graph replay.

``bench_gpu_time(fn, args)`` is the one entry (also for notebooks). Every timer measures
device time, not the Python launch path:

* ``cupti``: each iteration is a host window around ``fn(*args)``; CUPTI's records say which
  kernels/memcpys/memsets that window launched, and the iteration lasts from the first start to
  the last end of them (:mod:`cutefi.bench.cupti_records`). Falls back to ``events`` with a
  one-time warning when CUPTI is unavailable.
* ``events``: a CUDA event pair around the call.
* ``graph``: ``calls_per_graph`` calls captured in one CUDA graph, each replay timed by CUPTI
  (else events) and divided by the calls in it: launch overhead is gone entirely.

Before each window a short device-side sleep is queued, so the host has enqueued all of
``fn``'s launches before the GPU reaches them (an idle GPU would otherwise run each kernel the
moment it is launched and charge host gaps to ``fn``). Cold L2: for ``cupti``/``events`` a
buffer twice the L2 size is zeroed before each window (outside it); for ``graph`` the inputs
are cloned into rotating copies so consecutive calls in the graph touch different memory.
"""

from __future__ import annotations

import math
import statistics
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import torch

from .cupti_records import iteration_spans_ns
from .cupti_timer import ActivityTrace, CuptiUnavailable

TIMERS = ("cupti", "events", "graph")
_MAX_ROTATING_COPIES = 256
_MIN_QUEUE_US = 50.0
_MAX_QUEUE_US = 2000.0
_CYCLES_PER_US = 2000  # torch.cuda._sleep spins clock cycles; ~2 GHz is the top boost clock of current GPUs

_warned_fallback = False


@dataclass(frozen=True, repr=False)
class GpuTime:
    """Device time per call of one benchmark, in milliseconds, with its spread (shown as one line
    in a terminal, a small table in a notebook)."""

    samples_ms: tuple[float, ...]
    timer: str  # what timed it: "cupti", "events", "graph+cupti" or "graph+events"
    cold_l2: bool

    @property
    def median_ms(self) -> float:
        return statistics.median(self.samples_ms)

    @property
    def mean_ms(self) -> float:
        return statistics.fmean(self.samples_ms)

    @property
    def std_ms(self) -> float:
        return statistics.pstdev(self.samples_ms)

    def quantile_ms(self, q: float) -> float:
        ordered = sorted(self.samples_ms)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))]

    @property
    def spread(self) -> float:
        """(p90 - p10) / median: how far apart the middle 80% of iterations are."""
        return (self.quantile_ms(0.9) - self.quantile_ms(0.1)) / self.median_ms if self.median_ms else 0.0

    def summary(self) -> dict[str, Any]:
        return {"median_us": self.median_ms * 1e3, "mean_us": self.mean_ms * 1e3, "std_us": self.std_ms * 1e3,
                "p10_us": self.quantile_ms(0.1) * 1e3, "p90_us": self.quantile_ms(0.9) * 1e3,
                "min_us": min(self.samples_ms) * 1e3, "spread": self.spread, "iters": len(self.samples_ms),
                "timer": self.timer, "cold_l2": self.cold_l2}

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def __repr__(self) -> str:
        return (f"GpuTime(median {self.median_ms * 1e3:.2f} µs, p10 {self.quantile_ms(0.1) * 1e3:.2f}, "
                f"p90 {self.quantile_ms(0.9) * 1e3:.2f}, spread {100 * self.spread:.1f}%, "
                f"{len(self.samples_ms)} iterations, {self.timer}{', cold L2' if self.cold_l2 else ''})")

    def _repr_html_(self) -> str:
        cells = [("median", f"{self.median_ms * 1e3:.2f} µs"), ("p10", f"{self.quantile_ms(0.1) * 1e3:.2f} µs"),
                 ("p90", f"{self.quantile_ms(0.9) * 1e3:.2f} µs"), ("spread", f"{100 * self.spread:.1f}%"),
                 ("iterations", str(len(self.samples_ms))),
                 ("timer", self.timer + (", cold L2" if self.cold_l2 else ""))]
        head = "".join(f"<th>{name}</th>" for name, _ in cells)
        body = "".join(f"<td>{value}</td>" for _, value in cells)
        return f"<table><tr>{head}</tr><tr>{body}</tr></table>"


def bench_gpu_time(fn: Callable[..., Any], args: Sequence[Any] = (), kwargs: dict[str, Any] | None = None, *,
                   timer: str = "cupti", iters: int = 100, warmup: int = 10, cold_l2: bool = False,
                   calls_per_graph: int = 10) -> GpuTime:
    """Device time of ``fn(*args, **kwargs)`` over ``iters`` iterations after ``warmup`` calls.

    ``timer`` is ``"cupti"`` (falls back to ``"events"`` with a warning when CUPTI cannot
    trace), ``"events"`` or ``"graph"``. ``cold_l2`` times every iteration with nothing of
    ``fn``'s data in L2. Returns a :class:`GpuTime` (median, quantiles, spread, the timer used).
    """
    if timer not in TIMERS:
        raise ValueError(f"timer must be one of {', '.join(TIMERS)}; got {timer!r}")
    if not callable(fn):
        raise TypeError(f"fn must be callable; got {type(fn).__name__}")
    if iters < 1 or warmup < 0 or calls_per_graph < 1:
        raise ValueError(f"need iters >= 1, warmup >= 0, calls_per_graph >= 1; got {iters}, {warmup}, "
                         f"{calls_per_graph}")
    if not torch.cuda.is_available():
        raise RuntimeError("bench_gpu_time needs a CUDA GPU; none is visible")
    kwargs = kwargs or {}
    call = (lambda: fn(*args, **kwargs))
    host_us = _warm_up(call, warmup)
    cycles = queue_cycles(host_us)
    if timer == "graph":
        return _time_graph(fn, args, kwargs, iters, cold_l2, calls_per_graph, cycles)
    flush = _l2_flush_buffer() if cold_l2 else None

    def before_window() -> None:
        if flush is not None:
            flush.zero_()
        torch.cuda._sleep(cycles)

    if timer == "cupti":
        try:
            return GpuTime(tuple(_cupti_windows(call, before_window, iters)), "cupti", cold_l2)
        except CuptiUnavailable as exc:
            _warn_fallback(str(exc))
    return GpuTime(tuple(_event_windows(call, before_window, iters)), "events", cold_l2)


def _warm_up(call: Callable[[], Any], warmup: int) -> float:
    """Run the warm-up calls, then return the host time of a warm call (µs, the longest of 3).

    The first calls are left out of it: they may compile (torch.compile, a first cubin load).
    """
    for _ in range(warmup):
        call()
    torch.cuda.synchronize()
    longest = 0.0
    for _ in range(3):
        start = time.perf_counter()
        call()
        longest = max(longest, (time.perf_counter() - start) * 1e6)
        torch.cuda.synchronize()
    return longest


def queue_cycles(host_us: float) -> int:
    """Device sleep (clock cycles) to queue before a window: twice a warm call's host time,
    at least 50 µs and at most 2 ms (a call slower than that on the host is host-bound anyway)."""
    return int(min(_MAX_QUEUE_US, max(_MIN_QUEUE_US, 2 * host_us)) * _CYCLES_PER_US)


def _warn_fallback(reason: str) -> None:
    global _warned_fallback
    if not _warned_fallback:
        warnings.warn(f"CUPTI is unavailable, timing with CUDA events instead: {reason}", RuntimeWarning,
                      stacklevel=3)
        _warned_fallback = True


def _cupti_windows(call: Callable[[], Any], before_window: Callable[[], None], iters: int) -> list[float]:
    windows = []
    with ActivityTrace() as trace:
        for _ in range(iters):
            before_window()
            start = trace.timestamp()
            call()
            windows.append((start, trace.timestamp()))
            torch.cuda.synchronize()
    return [span / 1e6 for span in iteration_spans_ns(windows, trace.api_calls, trace.activities)]


def _event_windows(call: Callable[[], Any], before_window: Callable[[], None], iters: int) -> list[float]:
    pairs = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(iters)]
    for start, end in pairs:
        before_window()
        start.record()
        call()
        end.record()
        end.synchronize()
    return [start.elapsed_time(end) for start, end in pairs]


def _l2_bytes() -> int:
    """The current GPU's L2 size (64 MiB if torch does not report it)."""
    return getattr(torch.cuda.get_device_properties(torch.cuda.current_device()), "L2_cache_size", 0) or (64 << 20)


def _l2_flush_buffer() -> torch.Tensor:
    return torch.empty(2 * _l2_bytes(), dtype=torch.uint8, device="cuda")


def clone_tensors(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return value.clone()
    if isinstance(value, (list, tuple)):
        return type(value)(clone_tensors(item) for item in value)
    if isinstance(value, dict):
        return {key: clone_tensors(item) for key, item in value.items()}
    return value


def _tensor_bytes(value: Any) -> int:
    if isinstance(value, torch.Tensor):
        return value.numel() * value.element_size()
    if isinstance(value, (list, tuple)):
        return sum(_tensor_bytes(item) for item in value)
    if isinstance(value, dict):
        return sum(_tensor_bytes(item) for item in value.values())
    return 0


def rotating_copies_needed(input_bytes: int, l2_bytes: int) -> int:
    """Copies of the inputs so that a full rotation is at least twice the L2 (capped)."""
    if input_bytes <= 0:
        return 1
    return max(1, min(_MAX_ROTATING_COPIES, math.ceil(2 * l2_bytes / input_bytes)))


def _time_graph(fn: Callable[..., Any], args: Sequence[Any], kwargs: dict[str, Any], iters: int,
                cold_l2: bool, calls_per_graph: int, cycles: int) -> GpuTime:
    inputs = [(args, kwargs)]
    if cold_l2:
        copies = rotating_copies_needed(_tensor_bytes((args, kwargs)), _l2_bytes())
        inputs += [clone_tensors((args, kwargs)) for _ in range(copies - 1)]
    calls = max(calls_per_graph, len(inputs))
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # graph capture wants a warmed-up side stream
        for call_args, call_kwargs in inputs:
            fn(*call_args, **call_kwargs)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for index in range(calls):
            call_args, call_kwargs = inputs[index % len(inputs)]
            fn(*call_args, **call_kwargs)
    graph.replay()
    torch.cuda.synchronize()

    def before_window() -> None:
        torch.cuda._sleep(cycles)

    try:
        samples = _cupti_windows(graph.replay, before_window, iters)
        name = "graph+cupti"
    except CuptiUnavailable as exc:
        _warn_fallback(str(exc))
        samples = _event_windows(graph.replay, before_window, iters)
        name = "graph+events"
    return GpuTime(tuple(sample / calls for sample in samples), name, cold_l2)


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


def gpu_ms(call: Callable[[], Any], iters: int = 50, warmup: int = 5) -> float:
    """Median device time of one zero-argument ``call`` in ms (CUDA events, warm L2)."""
    return bench_gpu_time(call, timer="events", iters=iters, warmup=warmup).median_ms
