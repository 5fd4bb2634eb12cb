"""Benchmark and compile-report rows as one object that reads well in a notebook and a terminal.

``Results`` is a sequence of row dicts (the same rows ``cutefi-bench --output`` writes) that
shows itself as a table: HTML in Jupyter, text in a terminal. ``to_pandas()`` gives a
DataFrame, ``write()`` a CSV/JSON file, and timing results draw themselves with ``plot()``.
"""

from __future__ import annotations

import html
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from . import compile_report, report


class Results(Sequence[dict[str, Any]]):
    """Rows of one run, with ``notes`` (backends not run, targets dropped) shown under the table."""

    def __init__(self, rows: Sequence[dict[str, Any]], table: Callable[..., str], schema: str,
                 leading: Sequence[str], notes: Sequence[str] = (), plottable: bool = False):
        self.rows = list(rows)
        self.notes = list(notes)
        self._table = table
        self._schema = schema
        self._leading = tuple(leading)
        self._plottable = plottable

    @classmethod
    def timing(cls, rows: Sequence[dict[str, Any]], notes: Sequence[str] = ()) -> Results:
        return cls(rows, report.table, report.SCHEMA, report.LEADING, notes, plottable=True)

    @classmethod
    def compiled(cls, rows: Sequence[dict[str, Any]], notes: Sequence[str] = ()) -> Results:
        return cls(rows, compile_report.table, compile_report.SCHEMA, compile_report.COLUMNS, notes)

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, index):  # type: ignore[override]
        return self.rows[index]

    def __repr__(self) -> str:
        if not self.rows:
            return "\n".join(["(no rows)", *self.notes])
        return "\n".join([self._table(self.rows), *self.notes])

    def _repr_html_(self) -> str:
        if not self.rows:
            body = "<p>(no rows)</p>"
        else:
            body = self._table(self.rows, tablefmt="html")
        return body + "".join(f"<p>{html.escape(note)}</p>" for note in self.notes)

    def to_pandas(self):
        """The rows as a ``pandas.DataFrame`` (every column of every row, the leading ones first)."""
        try:
            import pandas
        except ImportError as exc:
            raise ImportError("Results.to_pandas needs pandas: pip install pandas") from exc
        return pandas.DataFrame(self.rows, columns=report.columns(self.rows, self._leading))

    def write(self, path: str | Path) -> None:
        """The rows to ``path``: ``.csv`` or ``.json`` (the suffix picks the format)."""
        report.write(path, self.rows, self._schema, self._leading)

    def plot(self, path: str | Path | None = None):
        """GB/s (or TFLOP/s) against bytes (or FLOPs) per call, a line per backend, a panel per
        routine; a ``matplotlib`` Figure (shown inline in Jupyter), also saved when ``path`` is given."""
        if not self._plottable:
            raise TypeError("only timing results can be plotted (a compile report has no rates)")
        figure = report.figure(self.rows)
        if path is not None:
            figure.savefig(path, dpi=110)
        return figure
