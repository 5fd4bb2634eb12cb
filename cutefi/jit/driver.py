"""Thin access to the CUDA driver through cuda-python: init, devices, error checks.

Without a GPU, ``cuInit`` raises (``DynamicLibNotFoundError``: no libcuda) or fails; that
is how cutefi learns there is no device, and every function here then reports it plainly.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any


class CudaDriverError(RuntimeError):
    """A CUDA driver call failed; the message names the call and the driver's error."""


class NoGpuError(RuntimeError):
    """No usable CUDA driver or device on this machine."""


def _driver() -> Any:
    from cuda.bindings import driver

    return driver


def check(result: Any, call: str) -> Any:
    """Unpack a cuda-python ``(err, *values)`` result, raising on error."""
    err, *values = result if isinstance(result, tuple) else (result,)
    driver = _driver()
    if err != driver.CUresult.CUDA_SUCCESS:
        _, name = driver.cuGetErrorName(err)
        _, text = driver.cuGetErrorString(err)
        name = name.decode() if isinstance(name, bytes) else name
        text = text.decode() if isinstance(text, bytes) else text
        raise CudaDriverError(f"{call} failed: {name} ({text})")
    if not values:
        return None
    return values[0] if len(values) == 1 else tuple(values)


@functools.lru_cache(maxsize=1)
def init() -> None:
    """``cuInit(0)`` once; raise ``NoGpuError`` with the reason when there is no driver/GPU."""
    try:
        driver = _driver()
        err, = driver.cuInit(0)
    except Exception as exc:  # DynamicLibNotFoundError and friends: no libcuda at all
        raise NoGpuError(f"no CUDA driver: {exc}") from exc
    if err != driver.CUresult.CUDA_SUCCESS:
        raise NoGpuError(f"cuInit failed: {err.name}")


def gpu_available() -> tuple[bool, str]:
    try:
        init()
        count = check(_driver().cuDeviceGetCount(), "cuDeviceGetCount")
    except (NoGpuError, CudaDriverError) as exc:
        return False, str(exc)
    return (count > 0, f"{count} device(s)" if count else "driver present but no device visible")


def driver_cuda_version() -> tuple[int, int] | None:
    """The CUDA version the driver supports, e.g. (13, 0); None without a driver."""
    try:
        init()
        version = check(_driver().cuDriverGetVersion(), "cuDriverGetVersion")
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


def devices() -> list[DeviceInfo]:
    """Visible devices; an empty list when there is no driver or device."""
    if not gpu_available()[0]:
        return []
    driver = _driver()
    attr = driver.CUdevice_attribute
    found = []
    for index in range(check(driver.cuDeviceGetCount(), "cuDeviceGetCount")):
        device = check(driver.cuDeviceGet(index), "cuDeviceGet")

        def get(which: Any) -> int:
            return check(driver.cuDeviceGetAttribute(which, device), "cuDeviceGetAttribute")

        raw_name = check(driver.cuDeviceGetName(256, device), "cuDeviceGetName")
        found.append(
            DeviceInfo(
                index=index,
                name=raw_name.split(b"\0", 1)[0].decode(),
                cc=(
                    get(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR),
                    get(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR),
                ),
                sms=get(attr.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT),
                memory_bytes=check(driver.cuDeviceTotalMem(device), "cuDeviceTotalMem"),
            )
        )
    return found
