"""Rows of a benchmark script: each printed as a JSON line when measured, all written at the end
with the GPU and torch version (the form ``benchmarks/results`` keeps)."""

from __future__ import annotations

import json

import torch


def record(rows: list[dict], row: dict) -> None:
    rows.append(row)
    print(json.dumps(row), flush=True)


def save(path: str | None, rows: list[dict]) -> None:
    if path:
        with open(path, "w") as handle:
            json.dump({"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "rows": rows}, handle, indent=1)
