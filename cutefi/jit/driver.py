"""Devices and the driver, as cutefi's run time sees them (through :mod:`.libcuda`).

Without a GPU, opening libcuda or ``cuInit`` fails; that is how cutefi learns there is no
device, and every function here then reports it plainly.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from . import libcuda
from .libcuda import CudaDriverError, NoGpuError

__all__ = ["CudaDriverError", "NoGpuError", "DeviceInfo", "init", "gpu_available", "devices",
           "device_info", "driver_cuda_version"]

init = libcuda.init


def gpu_available() -> tuple[bool, str]:
    try:
        count = libcuda.device_count()
    except (NoGpuError, CudaDriverError) as exc:
        return False, str(exc)
    return (count > 0, f"{count} device(s)" if count else "driver present but no device visible")


def driver_cuda_version() -> tuple[int, int] | None:
    """The CUDA version the driver supports, e.g. (13, 0); None without a driver."""
    try:
        libcuda.init()
        version = libcuda.driver_version()
    except (NoGpuError, CudaDriverError):
        return None
    return (version // 1000, (version % 1000) // 10)


@dataclass(frozen=True)
class DeviceInfo:
    index: int
    name: str
    cc: tuple[int, int]
    sms: int
    memory_bytes: int


@functools.lru_cache(maxsize=None)
def device_info(index: int) -> DeviceInfo:
    """One visible device (CUDA ordinal, as torch numbers them)."""
    if not 0 <= index < libcuda.device_count():
        raise NoGpuError(f"CUDA device {index} is not visible")
    return DeviceInfo(
        index=index,
        name=libcuda.device_name(index),
        cc=(libcuda.device_attribute(libcuda.ATTR_CC_MAJOR, index),
            libcuda.device_attribute(libcuda.ATTR_CC_MINOR, index)),
        sms=libcuda.device_attribute(libcuda.ATTR_SM_COUNT, index),
        memory_bytes=libcuda.device_memory(index),
    )


def devices() -> list[DeviceInfo]:
    """Visible devices; an empty list when there is no driver or device."""
    available, _ = gpu_available()
    return [device_info(index) for index in range(libcuda.device_count())] if available else []
