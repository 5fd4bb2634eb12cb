"""Without a GPU: build every registered kernel for the policy's targets; report time and size."""

from __future__ import annotations

import os
import tempfile
from collections import defaultdict
from typing import Any

from cutefi.jit.policy import ARCH_LIST_ENV

# every target cutefi supports; the policy drops what this toolchain cannot build, with reasons
DEFAULT_ARCH = "8.0 8.6 8.9 9.0a 10.0a 10.3a 12.0a 12.1a"
SCHEMA = "cutefi-bench-compile/1"
COLUMNS = ("kernel", "target", "build_s", "cubin_bytes", "error")


class CompileReportError(RuntimeError):
    """The report cannot run (no compiler installed, nothing matched)."""


def build_all(arch: str | None = None, only: list[str] | None = None, workers: int | None = None,
              progress: bool = True) -> tuple[list[dict[str, Any]], list[str]]:
    """Build into a throwaway pack; rows (kernel, target, build_s, cubin_bytes or error), dropped notes."""
    from tqdm.auto import tqdm

    from cutefi.jit.aot import build_pack, plan
    from cutefi.jit.lookup import can_build
    from cutefi.jit.registry import all_specs

    if not can_build("cute"):
        raise CompileReportError("the CuTe DSL compiler is not installed (pip install 'cutefi[build]'), "
                                 "so kernels cannot be built here")
    specs = all_specs()
    if only:
        specs = [spec for spec in specs if any(pattern in spec.describe() for pattern in only)]
        if not specs:
            raise CompileReportError(f"no kernel name contains any of: {' '.join(only)}")
    from cutefi.jit.settings import parse_arch_list

    source = "--arch" if arch else ARCH_LIST_ENV
    arch = arch or os.environ.get(ARCH_LIST_ENV, "").strip() or DEFAULT_ARCH
    try:
        parse_arch_list(arch, source)  # an error names the option or the variable it came from
        jobs, report = plan(arch, specs)
    except ValueError as exc:
        raise CompileReportError(str(exc)) from exc
    with tempfile.TemporaryDirectory(prefix="cutefi-compile-report-") as out, \
            tqdm(total=len(jobs), desc="building", unit="cubin", disable=not progress) as bar:
        build_pack(out, jobs, report, workers=workers, progress=bar.update)
    rows = [{"kernel": spec.describe(), "target": target.sm, "build_s": seconds, "cubin_bytes": size}
            for spec, target, seconds, size in report.built]
    rows += [{"kernel": spec.describe(), "target": target.sm, "error": error} for spec, target, error in report.failed]
    dropped = sorted({reason for _, reason in report.dropped})
    return sorted(rows, key=lambda row: (row["kernel"], row["target"])), dropped


def table(rows: list[dict[str, Any]], tablefmt: str = "simple") -> str:
    """Kernels down, targets across: 'seconds / KiB' in each cell, totals last (``tablefmt="html"``
    for a notebook)."""
    from tabulate import tabulate

    targets = sorted({row["target"] for row in rows}, key=lambda sm: (len(sm), sm))
    cells: dict[str, dict[str, str]] = defaultdict(dict)
    total_s: dict[str, float] = defaultdict(float)
    total_bytes: dict[str, int] = defaultdict(int)
    for row in rows:
        if "error" in row:
            cells[row["kernel"]][row["target"]] = "FAILED"
            continue
        cells[row["kernel"]][row["target"]] = f"{row['build_s']:.2f} s / {row['cubin_bytes'] / 1024:.0f} KiB"
        total_s[row["target"]] += row["build_s"]
        total_bytes[row["target"]] += row["cubin_bytes"]
    body = [[kernel] + [cells[kernel].get(target, "") for target in targets] for kernel in cells]
    body.append([f"total ({len(cells)} kernels)"]
                + [f"{total_s[t]:.1f} s / {total_bytes[t] / 1024:.0f} KiB" for t in targets])
    return tabulate(body, headers=["kernel (build time / cubin size)"] + targets, tablefmt=tablefmt)
