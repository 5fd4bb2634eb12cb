"""``cutefi-bench``: time cutefi and every installed peer on this GPU, side by side.

With no arguments on a GPU machine it runs a short suite of every routine and prints a table.
Without a GPU it says so and runs the compile-only report (every kernel built for every target,
with build time and cubin size).
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import shlex
import sys
import warnings
from collections.abc import Sequence
from pathlib import Path

from .routines import DTYPES, ROUTINES, BenchInputError, ShapeFlag
from .timing import TIMERS

EXIT_BAD_INPUT = 2


def shape_flags() -> dict[str, list[tuple[str, ShapeFlag]]]:
    """Flag name -> (routine, flag) for every routine that takes it."""
    found: dict[str, list[tuple[str, ShapeFlag]]] = {}
    for name, routine in ROUTINES.items():
        for flag in routine.flags:
            found.setdefault(flag.name, []).append((name, flag))
    return found


def option(name: str) -> str:
    return "--" + name.replace("_", "-")


def _add_case_arguments(parser: argparse.ArgumentParser, routine_nargs: str) -> None:
    """What one case (a command line, or one testlist line) may say."""
    parser.add_argument("--routine", nargs=routine_nargs, metavar="NAME",
                        help=f"routines to run: {', '.join(ROUTINES)} (default: a short suite of all)")
    parser.add_argument("--backends", nargs="+", metavar="NAME",
                        help="cutefi, torch, torch.compile, cudnn, cublas, flashinfer (default: all installed)")
    parser.add_argument("--dtype", nargs="+", default=["bf16"], metavar="DTYPE",
                        help=f"input dtypes: {', '.join(DTYPES)} (default: bf16)")
    shapes = parser.add_argument_group("shape flags (each takes one or more sizes; cases are all combinations)")
    for name, users in shape_flags().items():
        routines = ", ".join(routine for routine, _ in users)
        shapes.add_argument(option(name), dest=name, type=int, nargs="+", metavar="N",
                            help=f"{users[0][1].help} ({routines}; default {' '.join(map(str, users[0][1].default))})")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="cutefi-bench", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    _add_case_arguments(parser, "+")
    parser.add_argument("--testlist", metavar="FILE",
                        help="a file of cases, one per line, each in the case flags above (# comments)")
    timing = parser.add_argument_group("timing")
    timing.add_argument("--timer", choices=TIMERS, default="cupti",
                        help="cupti (activity records; falls back to events), events, or graph (CUDA-graph replay)")
    timing.add_argument("--iters", type=int, default=100, help="timed iterations per case (default 100)")
    timing.add_argument("--warmup", type=int, default=10, help="untimed calls first (default 10)")
    timing.add_argument("--calls-per-graph", type=int, default=10, help="calls captured per graph (--timer graph)")
    timing.add_argument("--cold-l2", action="store_true", help="time every iteration with a cold L2")
    timing.add_argument("--rounds", type=int, default=2,
                        help="timing rounds a case, backends in order then reversed, the faster kept (default 2: "
                             "the first backend timed after a case's inputs are made can measure slower)")
    timing.add_argument("--wall", action="store_true",
                        help="also host wall time per call, launches back to back (launch overhead included)")
    timing.add_argument("--refcheck", action="store_true",
                        help="compare every backend's output with a float32 reference; fail if any differs")
    timing.add_argument("--remeasure-ceilings", action="store_true",
                        help="measure copy bandwidth and matmul rate again instead of using the cached numbers")
    timing.add_argument("--no-ceilings", action="store_true", help="skip the ceilings (no %% of ceiling column)")
    out = parser.add_argument_group("output")
    out.add_argument("--output", nargs="+", default=[], metavar="FILE", help="write the rows to FILE.csv / FILE.json")
    out.add_argument("--plot", metavar="FILE.png", help="plot GB/s or TFLOP/s against size, a line per backend")
    out.add_argument("--list", action="store_true", help="list routines, their shape flags and backends, then exit")
    report = parser.add_argument_group("compile-only report (runs instead when no GPU is visible)")
    report.add_argument("--compile-only", action="store_true", help="run the compile-only report even with a GPU")
    report.add_argument("--arch", help="targets for the report (default: $CUTEFI_CUDA_ARCH_LIST or sm_80 ... sm_121a)")
    report.add_argument("--only", nargs="+", metavar="NAME", help="report only kernels whose name contains one")
    report.add_argument("--jobs", type=int, default=None, help="build processes for the report")
    return parser


def _case_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="testlist line", add_help=False, exit_on_error=False)
    _add_case_arguments(parser, "?")
    return parser


def requests_from(args: argparse.Namespace, routines: Sequence[str] | None, quick: bool) -> list:
    """Requests for ``routines`` with the sizes given on ``args`` (routine defaults elsewhere)."""
    from .runner import Request

    given = {name for name in shape_flags() if getattr(args, name, None) is not None}
    names = list(routines) if routines else list(ROUTINES)
    for name in names:
        if name not in ROUTINES:
            raise BenchInputError(f"unknown routine {name!r}; known: {', '.join(ROUTINES)}")
    takers = {flag.name for name in names for flag in ROUTINES[name].flags}
    for flag in sorted(given - takers):
        raise BenchInputError(f"{option(flag)} does not apply to {', '.join(names)} (shape flags taken: "
                              f"{', '.join(sorted(option(t) for t in takers))})")
    requests = []
    for name in names:
        sizes = {}
        for flag in ROUTINES[name].flags:
            value = getattr(args, flag.name, None)
            sizes[flag.name] = tuple(value) if value is not None else (flag.quick if quick else flag.default)
        backends = tuple(args.backends) if args.backends else None
        requests.append(Request(name, backends, tuple(args.dtype), sizes))
    return requests


def read_testlist(path: str, backends: Sequence[str] | None = None) -> list:
    """The cases of a testlist file; ``backends`` (the command line's) go to lines that name none."""
    try:
        lines = Path(path).read_text().splitlines()
    except OSError as exc:
        raise BenchInputError(f"--testlist {path}: {exc.strerror}") from exc
    parser, requests = _case_parser(), []
    for number, line in enumerate(lines, 1):
        text = line.split("#", 1)[0].strip()
        if not text:
            continue
        try:
            args, unknown = parser.parse_known_args(shlex.split(text))
        except (argparse.ArgumentError, ValueError) as exc:
            raise BenchInputError(f"{path}:{number}: {exc}") from exc
        if unknown:
            raise BenchInputError(f"{path}:{number}: not a case flag: {' '.join(unknown)} "
                                  f"(timing and output flags go on the command line)")
        if not args.routine:
            raise BenchInputError(f"{path}:{number}: each line needs --routine NAME")
        try:
            requests += requests_from(args, [args.routine], quick=False)
        except BenchInputError as exc:
            raise BenchInputError(f"{path}:{number}: {exc}") from exc
    if not requests:
        raise BenchInputError(f"--testlist {path}: no cases in it")
    if backends:
        requests = [r if r.backends else dataclasses.replace(r, backends=tuple(backends)) for r in requests]
    return requests


def list_routines() -> str:
    from tabulate import tabulate

    from .backends import missing_reason
    from .runner import offered_backends

    body = []
    for name, routine_type in ROUTINES.items():
        routine = routine_type()
        backends = [b if missing_reason(b) is None else f"({b}: not installed)" for b in offered_backends(routine)]
        flags = " ".join(f"{option(f.name)} {' '.join(map(str, f.default))}" for f in routine.flags)
        body.append([name, routine.bound, ", ".join(backends), flags])
    return tabulate(body, headers=["routine", "bound", "backends", "shape flags (full defaults)"])


def _check_outputs(args: argparse.Namespace) -> None:
    from .report import OUTPUT_SUFFIXES

    for path in args.output:
        if Path(path).suffix not in OUTPUT_SUFFIXES:
            raise BenchInputError(f"--output {path}: the suffix picks the format, one of {', '.join(OUTPUT_SUFFIXES)}")
    for path in [*args.output, *([args.plot] if args.plot else [])]:
        if not Path(path).resolve().parent.is_dir():
            raise BenchInputError(f"{path}: the folder {Path(path).resolve().parent} does not exist")
    if args.plot and Path(args.plot).suffix != ".png":
        raise BenchInputError(f"--plot {args.plot}: write a .png")
    if args.plot and importlib.util.find_spec("matplotlib") is None:
        raise BenchInputError("--plot needs matplotlib: pip install 'cutefi[bench]'")
    if args.iters < 1 or args.warmup < 0 or args.calls_per_graph < 1:
        raise BenchInputError("--iters and --calls-per-graph must be at least 1, --warmup at least 0")


def compile_only(args: argparse.Namespace) -> int:
    from . import compile_report, report

    try:
        rows, dropped = compile_report.build_all(args.arch, args.only, args.jobs)
    except compile_report.CompileReportError as exc:
        print(f"cutefi-bench: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    print(compile_report.table(rows))
    for reason in dropped:
        print(f"dropped: {reason}")
    for path in args.output:
        report.write(path, rows, compile_report.SCHEMA, compile_report.COLUMNS)
    failed = [row for row in rows if "error" in row]
    for row in failed:
        print(f"FAILED {row['kernel']} {row['target']}: {row['error']}", file=sys.stderr)
    return 1 if failed else 0


def run_gpu(args: argparse.Namespace, plans: list, argv: Sequence[str] = ()) -> int:
    from . import report
    from .runner import Options, time_plans

    options = Options(args.timer, args.iters, args.warmup, args.cold_l2, args.refcheck, args.calls_per_graph,
                      args.wall, args.rounds)
    rows, ceilings = time_plans(plans, options, ceilings=not args.no_ceilings, remeasure=args.remeasure_ceilings,
                                command=["cutefi-bench", *argv])
    print(report.table(rows))
    for item in plans:
        for backend, reason in item.skipped.items():
            print(f"{item.routine.name}: {backend} not run: {reason}")
    for path in args.output:
        report.write(path, rows)
        print(f"wrote {path}")
    if args.plot:
        report.plot(args.plot, rows)
        print(f"wrote {args.plot}")
    failed = [row for row in rows if row.get("refcheck") == "FAIL"]
    errors = [row for row in rows if row.get("error")]
    for row in failed:
        print(f"REFCHECK FAILED: {row['routine']} {row['shape']} {row['dtype']} {row['backend']}: "
              f"max abs error {row['max_abs_err']:.3g}, relative {row['rel_err']:.3g}", file=sys.stderr)
    for row in errors:
        print(f"ERROR: {row['routine']} {row['shape']} {row['dtype']} {row['backend']}: {row['error']}",
              file=sys.stderr)
    return 1 if failed or errors else 0


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    print(f"cutefi-bench: warning: {message}", file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(argv)
    with warnings.catch_warnings():  # plain one-line warnings (e.g. the CUPTI fallback), restored after
        warnings.showwarning = _show_warning
        return _run(args, argv)


def _run(args: argparse.Namespace, argv: list[str]) -> int:
    from cutefi.jit.driver import gpu_available

    try:
        if args.list:
            print(list_routines())
            return 0
        _check_outputs(args)
        if args.testlist and args.routine:
            raise BenchInputError("--testlist and --routine: give the cases one way, not both")
        from .runner import plan

        if args.testlist:
            requests = read_testlist(args.testlist, args.backends)
        else:
            requests = requests_from(args, args.routine, quick=not args.routine)
        plans = [plan(request) for request in requests]
    except BenchInputError as exc:
        print(f"cutefi-bench: error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    available, why = gpu_available()
    if args.compile_only or not available:
        if not available:
            print(f"cutefi-bench: no CUDA GPU visible ({why}), so nothing can be timed here; "
                  f"running the compile-only report instead.", file=sys.stderr)
        return compile_only(args)
    return run_gpu(args, plans, argv)


if __name__ == "__main__":
    sys.exit(main())
