"""Benchmarks: ``bench_gpu_time`` and ``run_routine`` for notebooks and scripts, and the
``cutefi-bench`` command (:mod:`.cli`). Results show as tables (HTML in Jupyter)."""

from .interactive import compile_kernels, run_routine
from .results import Results
from .timing import GpuTime, bench_gpu_time

__all__ = ["GpuTime", "Results", "bench_gpu_time", "compile_kernels", "run_routine"]
