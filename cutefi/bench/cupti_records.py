"""Turn CUPTI activity records into per-iteration GPU times (pure Python, no CUPTI needed).

CUPTI reports two kinds of record that matter here: API calls on the host (runtime or driver:
``cudaLaunchKernel``, ``cuLaunchKernelEx``, ``cudaGraphLaunch``, ``cudaMemsetAsync`` ...) and
the GPU work they caused (kernels, memcpys, memsets). Both carry a correlation id. An iteration
is a host window; its GPU work is everything whose API call *started* inside the window, and its
time is from the first start to the last end of that work. Work launched outside the windows
(an L2 flush, the queue-ahead sleep) therefore never counts.
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import NamedTuple


class ApiCall(NamedTuple):
    """A runtime or driver API call on the host (CUPTI timestamps, ns)."""

    start: int
    end: int
    correlation_id: int


class GpuActivity(NamedTuple):
    """A kernel, memcpy or memset on the GPU (CUPTI timestamps, ns)."""

    start: int
    end: int
    correlation_id: int
    name: str


class NoGpuWork(RuntimeError):
    """An iteration launched nothing that CUPTI saw (a CPU-only call, or work on another device)."""


def iteration_spans_ns(windows: Sequence[tuple[int, int]], api_calls: Iterable[ApiCall],
                       activities: Iterable[GpuActivity]) -> list[int]:
    """For each host window ``(start, end)``, ns from the first start to the last end of its GPU work."""
    work_by_call: dict[int, list[GpuActivity]] = defaultdict(list)
    for activity in activities:
        work_by_call[activity.correlation_id].append(activity)
    calls = sorted(api_calls)
    call_starts = [call.start for call in calls]
    spans = []
    for index, (window_start, window_end) in enumerate(windows):
        first = bisect.bisect_left(call_starts, window_start)
        last = bisect.bisect_right(call_starts, window_end)
        work = [item for call in calls[first:last] for item in work_by_call.get(call.correlation_id, ())]
        if not work:
            raise NoGpuWork(f"iteration {index} launched no GPU work that CUPTI recorded "
                            f"({last - first} API calls in its window)")
        spans.append(max(item.end for item in work) - min(item.start for item in work))
    return spans
