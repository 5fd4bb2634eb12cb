"""Where a benchmark ran: GPU, driver, library versions, the command line (one dict, every row)."""

from __future__ import annotations

import platform
import shlex
import sys
import time
from importlib import metadata
from typing import Any

import torch

import cutefi


def _version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def environment(argv: list[str] | str | None = None) -> dict[str, Any]:
    """The facts every row carries; ``argv`` is the command line (a list) or a Python call (a str)."""
    from cutefi.jit import driver

    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    version = driver.driver_cuda_version()
    command = argv if argv is not None else sys.argv
    return {
        "gpu": props.name, "cc": f"{props.major}.{props.minor}", "sms": props.multi_processor_count,
        "driver_cuda": f"{version[0]}.{version[1]}" if version else None,
        "torch": torch.__version__, "torch_cuda": torch.version.cuda,
        "cuda_bindings": _version("cuda-bindings"), "cupti_python": _version("cupti-python"),
        "flashinfer": _version("flashinfer-python"), "cutefi": cutefi.__version__,
        "python": platform.python_version(), "command": command if isinstance(command, str) else shlex.join(command),
        "date": time.strftime("%Y-%m-%d %H:%M:%S"),
    }
