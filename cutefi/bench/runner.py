"""Run routines × shapes × dtypes × backends: refcheck, time, and turn each into a result row."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import torch

from .backends import BACKENDS, missing_reason
from .ceilings import Ceilings
from .routines import DTYPES, ROUTINES, BenchInputError, Routine
from .routines.base import as_outputs
from .timing import bench_gpu_time, clone_tensors, wall_us


@dataclass(frozen=True)
class Request:
    """One ``--routine`` line: which routine, backends (None: every installed one), dtypes, sizes."""

    routine: str
    backends: tuple[str, ...] | None
    dtypes: tuple[str, ...]
    sizes: dict[str, tuple[int, ...]]


@dataclass(frozen=True)
class Options:
    timer: str = "cupti"
    iters: int = 100
    warmup: int = 10
    cold_l2: bool = False
    refcheck: bool = False
    calls_per_graph: int = 10
    wall: bool = False  # also host wall time per call, back to back (what a small-batch server sees)
    # timing rounds a case: the backends in order, then in reverse, each reported by its faster
    # round. The first backend timed after a case's inputs are made measured up to 20% slower
    # on the H200 (mm_bf16 at 1 x 4096 x 4096 and 16 x 28672 x 8192, either backend first), so
    # one round in a fixed order favours whoever comes last.
    rounds: int = 2


@dataclass
class Plan:
    """A request checked against this machine: the backends that will run and those left out."""

    request: Request
    routine: Routine
    backends: list[str]
    shapes: list[dict[str, int]]
    skipped: dict[str, str] = field(default_factory=dict)  # backend -> why it is not run


def offered_backends(routine: Routine) -> list[str]:
    """Backends the routine has code for, the optional peers included even when not installed."""
    return list(dict.fromkeys([*routine.backends(), *routine.optional_backends]))


def plan(request: Request) -> Plan:
    """Check a request before anything runs; a bad one raises :class:`BenchInputError`."""
    if request.routine not in ROUTINES:
        raise BenchInputError(f"unknown routine {request.routine!r}; known: {', '.join(ROUTINES)}")
    routine = ROUTINES[request.routine]()
    for dtype in request.dtypes:
        if dtype not in DTYPES:
            raise BenchInputError(f"--dtype {dtype}: accepted are {', '.join(DTYPES)}")
        if dtype not in routine.dtypes:
            raise BenchInputError(f"--dtype {dtype}: {routine.name} takes {', '.join(routine.dtypes)}")
    offered = offered_backends(routine)
    skipped: dict[str, str] = {}
    if request.backends is None:
        backends = []
        for name in offered:
            reason = missing_reason(name)
            if reason is None:
                backends.append(name)
            else:
                skipped[name] = reason
    else:
        backends = list(dict.fromkeys(request.backends))
        for name in backends:
            if name not in BACKENDS:
                raise BenchInputError(f"unknown backend {name!r}; known: {', '.join(BACKENDS)}")
            if name not in offered:
                raise BenchInputError(f"{routine.name} has no {name} backend; it has: {', '.join(offered)}")
            reason = missing_reason(name)
            if reason is not None:
                raise BenchInputError(f"backend {name} was asked for but cannot run here: {reason}")
    if not backends:
        raise BenchInputError(f"no backend of {routine.name} can run here ({'; '.join(skipped.values())})")
    shapes = list(routine.shapes(request.sizes))
    for shape in shapes:
        for flag in routine.flags:
            if shape[flag.name] < flag.minimum:
                raise BenchInputError(f"--{flag.name.replace('_', '-')} {shape[flag.name]}: "
                                      f"must be at least {flag.minimum}")
        routine.check_shape(shape)
    return Plan(request, routine, backends, shapes, skipped)


def compare(outputs: tuple[torch.Tensor, ...], expected: tuple[torch.Tensor, ...], atol: float,
            rtol: float) -> tuple[bool, float, float]:
    """(every element within atol + rtol*|ref|, max abs error, ||out - ref|| / ||ref||)."""
    if len(outputs) != len(expected):
        return False, float("inf"), float("inf")
    ok, max_abs, err_sq, ref_sq = True, 0.0, 0.0, 0.0
    for out, ref in zip(outputs, expected):
        if out.shape != ref.shape:
            return False, float("inf"), float("inf")
        diff = (out.float() - ref.float()).abs()
        ok &= bool(torch.all(diff <= atol + rtol * ref.float().abs()))  # NaN compares False: caught
        max_abs = max(max_abs, float(diff.max()))
        err_sq += float(diff.double().pow(2).sum())
        ref_sq += float(ref.double().pow(2).sum())
    return ok, max_abs, (err_sq / ref_sq) ** 0.5 if ref_sq else float(err_sq > 0)


def _time_rounds(implementations: dict, backends: list[str], rows: dict[str, dict], inputs: Any,
                 options: Options) -> dict[str, Any]:
    """Each backend's GpuTime: ``options.rounds`` rounds, alternately in order and reversed,
    the faster round kept; a backend that raises gets ``error`` in its row instead."""
    best: dict[str, Any] = {}
    order = [b for b in backends if "error" not in rows[b]]
    for round_index in range(max(1, options.rounds)):
        for backend in order if round_index % 2 == 0 else order[::-1]:
            if "error" in rows[backend]:
                continue
            try:
                timed = bench_gpu_time(implementations[backend], inputs, timer=options.timer, iters=options.iters,
                                       warmup=options.warmup, cold_l2=options.cold_l2,
                                       calls_per_graph=options.calls_per_graph)
            except Exception as exc:  # a backend refusing a shape must not stop the others
                rows[backend]["error"] = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
                best.pop(backend, None)
                continue
            if backend not in best or timed.median_ms < best[backend].median_ms:
                best[backend] = timed
    return best


def run_plan(item: Plan, options: Options, ceilings: Ceilings | None,
             progress: Callable[[int], object] | None = None) -> list[dict[str, Any]]:
    routine, rows = item.routine, []
    implementations = routine.backends()
    for shape in item.shapes:
        for dtype_name in item.request.dtypes:
            dtype = DTYPES[dtype_name]
            case = {"routine": routine.name, "shape": routine.label(shape), **shape, "dtype": dtype_name}
            try:
                inputs = routine.make_inputs(shape, dtype)
                expected = routine.reference(inputs, shape) if options.refcheck else None
                # timing an in-place op changes its inputs: each refcheck starts from these
                pristine = clone_tensors(inputs) if options.refcheck else None
            except torch.cuda.OutOfMemoryError:
                torch.cuda.empty_cache()
                for backend in item.backends:
                    rows.append({**case, "backend": backend, "error": "the inputs do not fit in the GPU's free memory"})
                    if progress:
                        progress(1)
                continue
            cost = routine.cost(shape, dtype)
            case_rows = {}
            for backend in item.backends:
                row = case_rows[backend] = {**case, "backend": backend, "bytes": cost.bytes, "flops": cost.flops}
                rows.append(row)
                if expected is not None:
                    try:
                        atol, rtol = routine.tolerance(shape, dtype)
                        outputs = as_outputs(implementations[backend](*clone_tensors(pristine)))
                        ok, max_abs, rel = compare(outputs, expected, atol, rtol)
                        row.update(refcheck="pass" if ok else "FAIL", max_abs_err=max_abs, rel_err=rel)
                    except Exception as exc:  # a backend refusing a shape must not stop the others
                        row["error"] = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
            timed_rounds = _time_rounds(implementations, item.backends, case_rows, inputs, options)
            for backend in item.backends:
                row = case_rows[backend]
                if backend in timed_rounds and "error" not in row:
                    timed = timed_rounds[backend]
                    row.update(timed.summary(), rounds=options.rounds)
                    add_rates(row, routine.bound, ceilings)
                    if options.wall:  # ~0.2 s of back-to-back calls, 20 to 2000 of them
                        fn = implementations[backend]
                        calls = int(min(2000, max(20, 200 / timed.median_ms)))
                        row["wall_us"] = wall_us(lambda fn=fn, args=inputs: fn(*args), iters=calls)
                if progress:
                    progress(1)
            del inputs, expected, pristine
    mark_fastest(rows)
    return rows


def time_plans(plans: list[Plan], options: Options, *, ceilings: bool = True, remeasure: bool = False,
               command: list[str] | str | None = None, progress: bool = True) -> tuple[list[dict[str, Any]], Ceilings | None]:
    """Run checked plans on this GPU: every row gets the environment (GPU, versions, command) and,
    with ``ceilings``, this GPU's copy/matmul ceilings (measured once, then cached)."""
    import sys

    from tqdm.auto import tqdm

    from . import ceilings as ceilings_module
    from .environment import environment

    measured = None
    if ceilings:
        measured = ceilings_module.cached(timer="events" if options.timer == "events" else "cupti",
                                          remeasure=remeasure)
        print(f"ceilings on this GPU: copy {measured.copy_gbps:.0f} GB/s, "
              f"bf16 matmul {measured.matmul_tflops:.0f} TFLOP/s ({measured.measured_with})")
    env_fields = {**environment(command), "iters": options.iters, "requested_timer": options.timer}
    if measured is not None:
        env_fields |= {"copy_ceiling_gbps": measured.copy_gbps, "matmul_ceiling_tflops": measured.matmul_tflops}
    rows: list[dict[str, Any]] = []
    total = sum(len(p.shapes) * len(p.request.dtypes) * len(p.backends) for p in plans)
    with tqdm(total=total, desc="timing", unit="case", file=sys.stderr, disable=not progress) as bar:
        for item in plans:
            rows += [{**row, **env_fields} for row in run_plan(item, options, measured, progress=bar.update)]
    return rows, measured


def add_rates(row: dict[str, Any], bound: str, ceilings: Ceilings | None) -> None:
    """GB/s, TFLOP/s and the percentage of this GPU's matching ceiling."""
    seconds = row["median_us"] * 1e-6
    row["gbps"] = row["bytes"] / seconds / 1e9
    row["tflops"] = row["flops"] / seconds / 1e12 if row["flops"] else None
    if ceilings is not None:
        if bound == "compute":
            row["ceiling"], row["pct_of_ceiling"] = "matmul", 100 * row["tflops"] / ceilings.matmul_tflops
        else:
            row["ceiling"], row["pct_of_ceiling"] = "copy", 100 * row["gbps"] / ceilings.copy_gbps


def mark_fastest(rows: Iterable[dict[str, Any]]) -> None:
    """``vs_fastest``: each backend's median over the fastest backend's, per case (1.00 = fastest)."""
    best: dict[tuple, float] = {}
    for row in rows:
        if "median_us" in row:
            key = (row["routine"], row["shape"], row["dtype"])
            best[key] = min(best.get(key, float("inf")), row["median_us"])
    for row in rows:
        if "median_us" in row:
            row["vs_fastest"] = row["median_us"] / best[(row["routine"], row["shape"], row["dtype"])]
