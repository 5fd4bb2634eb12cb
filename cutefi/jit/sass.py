"""SASS of a cubin, through ``nvdisasm``, on any machine (no GPU needed).

``nvdisasm`` comes from the ``nvidia-cuda-nvdisasm`` wheel (in cutefi's ``test`` extra; the
CUDA 13 one reads every cubin from sm_80 to sm_121a) or from a CUDA toolkit; it is found with
``cuda.pathfinder`` (wheels first, then ``CUDA_PATH``/``CUDA_HOME``), else on ``PATH``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile

NVDISASM_PACKAGE = "nvidia-cuda-nvdisasm"


class DisassemblerNotFoundError(RuntimeError):
    """No ``nvdisasm`` is installed."""


def nvdisasm_path() -> str | None:
    """The ``nvdisasm`` executable, or None when none is installed."""
    try:
        from cuda.pathfinder import find_nvidia_binary_utility
    except ImportError:
        found = None
    else:
        found = find_nvidia_binary_utility("nvdisasm")
    return found or shutil.which("nvdisasm")


def disassemble(cubin: bytes, *, timeout_s: float = 120.0) -> str:
    """The SASS of ``cubin`` as ``nvdisasm -c`` prints it (code sections only).

    Raises ``DisassemblerNotFoundError`` (naming the package to install) when no
    ``nvdisasm`` is found, and ``RuntimeError`` with its message when it fails.
    """
    tool = nvdisasm_path()
    if tool is None:
        raise DisassemblerNotFoundError(
            f"nvdisasm not found: `pip install {NVDISASM_PACKAGE}` (part of cutefi's test extra) "
            "or put a CUDA toolkit's nvdisasm on PATH"
        )
    if cubin[:4] != b"\x7fELF":
        raise ValueError("not a cubin (no ELF header)")
    fd, path = tempfile.mkstemp(suffix=".cubin", prefix="cutefi-sass-")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(cubin)
        # stderr may carry warnings (older ELF ABI cubins print two); only the status counts
        result = subprocess.run([tool, "-c", path], capture_output=True, text=True,
                                timeout=timeout_s, check=False)
    finally:
        os.unlink(path)
    if result.returncode != 0:
        raise RuntimeError(
            f"{tool} failed with status {result.returncode}: {result.stderr.strip()[:2000]}"
        )
    return result.stdout
