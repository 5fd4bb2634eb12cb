"""This GPU's ceilings: copy bandwidth (GB/s) and dense bf16 matmul rate (TFLOP/s).

Measured once per GPU, driver and torch version, then cached next to the cubin cache
(``ceilings.json``), so every run reports "% of ceiling" against the same numbers.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from cutefi.jit.cache import atomic_write, default_cache_root

from .timing import bench_gpu_time

COPY_BYTES = 1 << 30  # 1 GiB each way: far past any L2
MATMUL_SIZE = 8192


@dataclass(frozen=True)
class Ceilings:
    copy_gbps: float  # device-to-device copy, bytes read + written per second
    matmul_tflops: float  # bf16 [8192, 8192] x [8192, 8192] through cuBLAS
    measured_with: str  # the timer


def _device_key() -> str:
    from cutefi.jit import driver

    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    version = driver.driver_cuda_version()
    return f"{props.name}|{getattr(props, 'uuid', '')}|driver {version}|torch {torch.__version__}"


def measure(timer: str = "cupti") -> Ceilings:
    source = torch.empty(COPY_BYTES // 2, device="cuda", dtype=torch.bfloat16).normal_()
    target = torch.empty_like(source)
    copy = bench_gpu_time(target.copy_, (source,), timer=timer, iters=30, warmup=3)
    del source, target
    a = torch.randn(MATMUL_SIZE, MATMUL_SIZE, device="cuda", dtype=torch.bfloat16)
    b = torch.randn_like(a)
    matmul = bench_gpu_time(torch.matmul, (a, b), timer=timer, iters=30, warmup=5)
    return Ceilings(copy_gbps=2 * COPY_BYTES / copy.median_ms / 1e6,
                    matmul_tflops=2 * MATMUL_SIZE**3 / matmul.median_ms / 1e9, measured_with=copy.timer)


def cached(timer: str = "cupti", remeasure: bool = False, path: Path | None = None) -> Ceilings:
    """The ceilings for the current GPU, measured now only when not cached (or ``remeasure``)."""
    path = path or default_cache_root() / "ceilings.json"
    key = _device_key()
    table: dict[str, dict] = {}
    if path.exists():
        try:
            table = json.loads(path.read_text())
        except (OSError, ValueError):
            table = {}
    if not remeasure and key in table:
        try:
            return Ceilings(**table[key])
        except TypeError:
            pass  # written by another version: measure again
    ceilings = measure(timer)
    table[key] = asdict(ceilings)
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    atomic_write(path, json.dumps(table, indent=1).encode())
    os.chmod(path, 0o600)
    return ceilings
