"""Benchmarks: ``bench_gpu_time`` for notebooks, and the ``cutefi-bench`` command (:mod:`.cli`)."""

from .timing import GpuTime, bench_gpu_time

__all__ = ["GpuTime", "bench_gpu_time"]
