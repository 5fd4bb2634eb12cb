"""Result rows out: a table on the terminal, CSV and JSON files, a PNG plot."""

from __future__ import annotations

import csv
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

SCHEMA = "cutefi-bench/1"

# columns every CSV starts with; routine-specific shape columns and the rest follow
LEADING = ("routine", "shape", "dtype", "backend", "median_us", "p10_us", "p90_us", "spread", "wall_us", "gbps",
           "tflops",
           "ceiling", "pct_of_ceiling", "vs_fastest", "refcheck", "rel_err", "max_abs_err", "error")
OUTPUT_SUFFIXES = (".csv", ".json")


def columns(rows: Sequence[dict[str, Any]], leading: Sequence[str] = LEADING) -> list[str]:
    """Every key in any row: the leading ones first, then the rest in first-seen order."""
    seen = dict.fromkeys(leading)
    for row in rows:
        seen.update(dict.fromkeys(row))
    return list(seen)


def write(path: str | Path, rows: Sequence[dict[str, Any]], schema: str = SCHEMA,
          leading: Sequence[str] = LEADING) -> None:
    """Rows to ``path``: JSON ``{"schema": ..., "rows": [...]}`` or CSV with a header of every key."""
    path = Path(path)
    if path.suffix == ".json":
        path.write_text(json.dumps({"schema": schema, "rows": list(rows)}, indent=1, default=str) + "\n")
    elif path.suffix == ".csv":
        with path.open("w", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=columns(rows, leading), restval="")
            writer.writeheader()
            writer.writerows(rows)
    else:
        raise ValueError(f"--output {path}: the suffix picks the format, one of {', '.join(OUTPUT_SUFFIXES)}")


def _fmt(value: Any, digits: int) -> str:
    return "" if value is None or value == "" else f"{value:.{digits}f}"


TABLE_HEADERS = ["routine", "shape", "dtype", "backend", "median µs", "spread %", "wall µs", "rate", "of ceiling",
                 "× fastest", "refcheck", "error"]


def table_body(rows: Sequence[dict[str, Any]]) -> list[list[str]]:
    """One line per (case, backend), the cells of :data:`TABLE_HEADERS`."""
    body = []
    for row in rows:
        rate = (f"{row['tflops']:.1f} TFLOP/s" if row.get("tflops") else
                f"{row['gbps']:.0f} GB/s" if row.get("gbps") is not None else "")
        pct = row.get("pct_of_ceiling")
        body.append([
            row["routine"], row["shape"], row["dtype"], row["backend"],
            _fmt(row.get("median_us"), 2), _fmt(100 * row["spread"], 1) if "spread" in row else "",
            _fmt(row.get("wall_us"), 2), rate,
            f"{pct:.0f}% {row['ceiling']}" if pct is not None else "",
            _fmt(row.get("vs_fastest"), 2),
            row.get("refcheck", "") + (f" {row['rel_err']:.1e}" if row.get("rel_err") is not None else ""),
            row.get("error", ""),
        ])
    return body


def table(rows: Sequence[dict[str, Any]], tablefmt: str = "simple") -> str:
    """The terminal table (``tablefmt="html"``: the same table for a notebook, escaped)."""
    from tabulate import tabulate

    return tabulate(table_body(rows), headers=TABLE_HEADERS, tablefmt=tablefmt, disable_numparse=True)


def plot(path: str | Path, rows: Sequence[dict[str, Any]]) -> None:
    """:func:`figure` written to a PNG."""
    figure(rows).savefig(path, dpi=110)


def figure(rows: Sequence[dict[str, Any]]):
    """One panel per routine: GB/s (or TFLOP/s) against bytes (or FLOPs) per call, a line per backend.

    A ``matplotlib.figure.Figure`` made without pyplot, so no backend is switched (a notebook
    keeps its inline one) and nothing is left open.
    """
    from matplotlib.figure import Figure

    timed = [row for row in rows if row.get("median_us") is not None]
    routines = list(dict.fromkeys(row["routine"] for row in timed))
    if not routines:
        raise ValueError("nothing was timed, so there is nothing to plot")
    columns_n = min(4, len(routines))
    rows_n = -(-len(routines) // columns_n)
    result = Figure(figsize=(5 * columns_n, 4 * rows_n))
    axes = result.subplots(rows_n, columns_n, squeeze=False)
    for axis in axes.flat[len(routines):]:
        axis.set_visible(False)
    for axis, routine in zip(axes.flat, routines):
        mine = [row for row in timed if row["routine"] == routine]
        compute = bool(mine[0].get("tflops"))
        x_key, y_key = ("flops", "tflops") if compute else ("bytes", "gbps")
        dtypes = {row["dtype"] for row in mine}
        for series in dict.fromkeys((row["backend"], row["dtype"]) for row in mine):
            points = sorted((row[x_key], row[y_key]) for row in mine if (row["backend"], row["dtype"]) == series)
            label = series[0] if len(dtypes) == 1 else f"{series[0]} {series[1]}"
            axis.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=label)
        ceiling = next((row for row in mine if row.get("pct_of_ceiling")), None)
        if ceiling is not None:
            level = ceiling[y_key] / ceiling["pct_of_ceiling"] * 100
            axis.axhline(level, linestyle="--", color="gray", linewidth=1, label=f"{ceiling['ceiling']} ceiling")
        axis.set_xscale("log")
        axis.set_ylim(bottom=0)
        axis.set_xlabel("FLOPs per call" if compute else "bytes moved per call")
        axis.set_ylabel("TFLOP/s" if compute else "GB/s")
        axis.set_title(routine)
        axis.grid(True, alpha=0.3)
        axis.legend(fontsize=8)
    first = timed[0]
    result.suptitle(f"cutefi-bench on {first.get('gpu', 'GPU')} ({first.get('timer', '')} timer)", fontsize=10)
    result.tight_layout()
    return result
