"""``cutefi-bench`` from Python (a notebook, a script): one routine over a few shapes, or the
compile-only report, returned as :class:`~cutefi.bench.results.Results` instead of printed.

    rows = cutefi.bench.run_routine("rmsnorm", rows=[1024, 16384], hidden=[4096, 8192])
    rows               # a table (HTML in Jupyter)
    rows.plot()        # GB/s against bytes moved, a line per backend
    cutefi.bench.compile_kernels(arch="9.0a 12.0a", only=["rmsnorm"])   # no GPU needed
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from .results import Results
from .routines import ROUTINES, BenchInputError
from .runner import Options, Request, plan, time_plans
from .timing import TIMERS


def _sizes(routine: str, given: dict[str, int | Iterable[int]]) -> dict[str, tuple[int, ...]]:
    """Every shape flag of ``routine``: the sizes given (an int or several), else its short list."""
    flags = {flag.name: flag for flag in ROUTINES[routine].flags}
    unknown = sorted(set(given) - set(flags))
    if unknown:
        raise BenchInputError(f"{routine} has no size {', '.join(unknown)}; its sizes are: {', '.join(flags)}")
    sizes = {}
    for name, flag in flags.items():
        value = given.get(name, flag.quick)
        values = (value,) if isinstance(value, int) else tuple(value)
        if not values or not all(isinstance(v, int) and not isinstance(v, bool) for v in values):
            raise BenchInputError(f"{name}={value!r}: give an int or a list of ints")
        sizes[name] = values
    return sizes


def run_routine(routine: str, *, backends: Sequence[str] | None = None, dtype: str | Sequence[str] = "bf16",
                timer: str = "cupti", iters: int = 100, warmup: int = 10, cold_l2: bool = False,
                refcheck: bool = True, calls_per_graph: int = 10, ceilings: bool = True, progress: bool = True,
                **sizes: int | Iterable[int]) -> Results:
    """Time ``routine`` (a ``cutefi-bench --list`` name) on this GPU over every combination of
    ``sizes`` (its shape flags, e.g. ``rows=[128, 4096], hidden=4096``; the short defaults for
    those not given), against every installed peer (or ``backends``), each output checked
    against the routine's float32 reference (``refcheck``). Same rows as the command writes.
    """
    if routine not in ROUTINES:
        raise BenchInputError(f"unknown routine {routine!r}; known: {', '.join(ROUTINES)}")
    if timer not in TIMERS:
        raise BenchInputError(f"timer must be one of {', '.join(TIMERS)}; got {timer!r}")
    if iters < 1 or warmup < 0 or calls_per_graph < 1:
        raise BenchInputError("iters and calls_per_graph must be at least 1, warmup at least 0")
    dtypes = (dtype,) if isinstance(dtype, str) else tuple(dtype)
    request = Request(routine, tuple(backends) if backends else None, dtypes, _sizes(routine, sizes))
    checked = plan(request)
    from cutefi.jit.driver import gpu_available

    available, why = gpu_available()
    if not available:
        raise RuntimeError(f"run_routine needs a CUDA GPU ({why}); compile_kernels() reports what "
                           f"builds here without one")
    options = Options(timer, iters, warmup, cold_l2, refcheck, calls_per_graph)
    call = f"cutefi.bench.run_routine({routine!r}, " + ", ".join(f"{k}={v!r}" for k, v in sizes.items()) + ")"
    rows, _ = time_plans([checked], options, ceilings=ceilings, command=call, progress=progress)
    notes = [f"{routine}: {backend} not run: {reason}" for backend, reason in checked.skipped.items()]
    return Results.timing(rows, notes)


def compile_kernels(arch: str | None = None, only: Sequence[str] | None = None, jobs: int | None = None,
                    progress: bool = True) -> Results:
    """Build kernels (those whose name contains one of ``only``, else all) for ``arch`` (e.g.
    ``"8.0 9.0a 12.0a"``; default ``$CUTEFI_CUDA_ARCH_LIST`` or every supported target) into a
    throwaway pack: build time and cubin size per kernel and target. Needs CuTe DSL, no GPU."""
    from .compile_report import CompileReportError, build_all

    if isinstance(only, str):
        only = [only]
    try:
        rows, dropped = build_all(arch, list(only) if only else None, jobs, progress=progress)
    except CompileReportError as exc:
        raise BenchInputError(str(exc)) from exc
    return Results.compiled(rows, [f"dropped: {reason}" for reason in dropped])
