"""The few CUDA driver entry points cutefi's run time needs, called through ctypes.

Loading and launching go straight to ``libcuda``: importing ``cuda.bindings.driver`` costs
16–20 ms on a GPU host and its wrappers build Python objects on every call, while a ctypes
call converts a handful of integers. cuda-python stays for NVRTC and toolchain queries.

Every function raises :class:`CudaDriverError` naming the call and the driver's error, or
:class:`NoGpuError` when there is no driver at all (how a CPU machine learns it has no GPU).
"""

from __future__ import annotations

import ctypes
import functools
import sys
from typing import Any

CUDA_SUCCESS = 0
CUDA_ERROR_INVALID_VALUE = 1
CUDA_ERROR_INVALID_CONTEXT = 201

# CUdevice_attribute
ATTR_CC_MAJOR = 75
ATTR_CC_MINOR = 76
ATTR_SM_COUNT = 16
ATTR_MAX_SMEM_PER_BLOCK_OPTIN = 97
ATTR_MAX_SMEM_PER_SM = 81
# CUfunction_attribute
FUNC_MAX_DYNAMIC_SMEM = 8
FUNC_NON_PORTABLE_CLUSTER = 14
# CUlaunchAttributeID
LAUNCH_ATTR_CLUSTER_DIMENSION = 4
LAUNCH_ATTR_PROGRAMMATIC_STREAM_SERIALIZATION = 6


class CudaDriverError(RuntimeError):
    """A CUDA driver call failed; the message names the call and the driver's error."""

    def __init__(self, message: str, code: int = -1) -> None:
        super().__init__(message)
        self.code = code


class NoGpuError(RuntimeError):
    """No usable CUDA driver or device on this machine."""


@functools.lru_cache(maxsize=1)
def lib() -> ctypes.CDLL:
    """libcuda, opened once; NoGpuError where it is not installed."""
    name = "nvcuda.dll" if sys.platform == "win32" else "libcuda.so.1"
    try:
        library = ctypes.CDLL(name)
    except OSError as exc:
        raise NoGpuError(f"no CUDA driver: cannot open {name} ({exc})") from exc
    u64, vp, i32, u32 = ctypes.c_uint64, ctypes.c_void_p, ctypes.c_int, ctypes.c_uint
    signatures = {
        "cuInit": [u32],
        "cuDriverGetVersion": [ctypes.POINTER(i32)],
        "cuDeviceGetCount": [ctypes.POINTER(i32)],
        "cuDeviceGet": [ctypes.POINTER(i32), i32],
        "cuDeviceGetAttribute": [ctypes.POINTER(i32), i32, i32],
        "cuDeviceGetName": [ctypes.c_char_p, i32, i32],
        "cuDeviceTotalMem_v2": [ctypes.POINTER(ctypes.c_size_t), i32],
        "cuDevicePrimaryCtxRetain": [ctypes.POINTER(vp), i32],
        "cuCtxGetCurrent": [ctypes.POINTER(vp)],
        "cuCtxPushCurrent_v2": [vp],
        "cuCtxPopCurrent_v2": [ctypes.POINTER(vp)],
        "cuLibraryLoadData": [ctypes.POINTER(vp), ctypes.c_char_p, vp, vp, u32, vp, vp, u32],
        "cuLibraryUnload": [vp],
        "cuLibraryGetKernel": [ctypes.POINTER(vp), vp, ctypes.c_char_p],
        "cuKernelGetFunction": [ctypes.POINTER(vp), vp],
        "cuKernelGetParamInfo": [vp, ctypes.c_size_t, ctypes.POINTER(ctypes.c_size_t),
                                 ctypes.POINTER(ctypes.c_size_t)],
        "cuKernelSetAttribute": [i32, i32, vp, i32],
        "cuLaunchKernelEx": [vp, vp, vp, vp],
        "cuTensorMapEncodeTiled": [vp, i32, u32, vp, ctypes.POINTER(u64), ctypes.POINTER(u64),
                                   ctypes.POINTER(u32), ctypes.POINTER(u32), i32, i32, i32, i32],
        "cuGetErrorName": [i32, ctypes.POINTER(ctypes.c_char_p)],
        "cuGetErrorString": [i32, ctypes.POINTER(ctypes.c_char_p)],
        "cuMemcpyHtoDAsync_v2": [u64, vp, ctypes.c_size_t, vp],
        "cuEventCreate": [ctypes.POINTER(vp), u32],
        "cuEventRecord": [vp, vp],
        "cuEventSynchronize": [vp],
        "cuEventDestroy_v2": [vp],
    }
    # (drivers of CUDA 12.x lack these: callers check hasattr)
    optional = {"cuKernelGetParamCount": [vp, ctypes.POINTER(ctypes.c_size_t)]}
    for function, argtypes in [*signatures.items(), *optional.items()]:
        entry = getattr(library, function, None)
        if entry is None and function in optional:
            continue
        if entry is None:
            raise AttributeError(f"{name} has no {function}")
        entry.argtypes = argtypes
        entry.restype = ctypes.c_int
    return library


def error_text(code: int) -> str:
    name, text = ctypes.c_char_p(), ctypes.c_char_p()
    library = lib()
    library.cuGetErrorName(code, ctypes.byref(name))
    library.cuGetErrorString(code, ctypes.byref(text))
    return f"{(name.value or b'CUDA_ERROR_%d' % code).decode()} ({(text.value or b'').decode()})"


def check(code: int, call: str) -> None:
    if code != CUDA_SUCCESS:
        raise CudaDriverError(f"{call} failed: {error_text(code)}", code)


@functools.lru_cache(maxsize=1)
def init() -> None:
    """``cuInit(0)`` once; NoGpuError with the reason where there is no driver or device."""
    code = lib().cuInit(0)
    if code != CUDA_SUCCESS:
        raise NoGpuError(f"cuInit failed: {error_text(code)}")


def _int_out(function: str, *args: Any) -> int:
    value = ctypes.c_int()
    check(getattr(lib(), function)(ctypes.byref(value), *args), function)
    return value.value


def driver_version() -> int:
    return _int_out("cuDriverGetVersion")


def device_count() -> int:
    init()
    return _int_out("cuDeviceGetCount")


def device_attribute(attribute: int, device: int) -> int:
    return _int_out("cuDeviceGetAttribute", attribute, device)


def device_name(device: int) -> str:
    buffer = ctypes.create_string_buffer(256)
    check(lib().cuDeviceGetName(buffer, 256, device), "cuDeviceGetName")
    return buffer.value.decode()


def device_memory(device: int) -> int:
    size = ctypes.c_size_t()
    check(lib().cuDeviceTotalMem_v2(ctypes.byref(size), device), "cuDeviceTotalMem")
    return size.value


@functools.lru_cache(maxsize=None)
def primary_context(device: int) -> int:
    """The device's primary context (the one torch uses), retained for the process's life."""
    init()
    context = ctypes.c_void_p()
    check(lib().cuDevicePrimaryCtxRetain(ctypes.byref(context), device), "cuDevicePrimaryCtxRetain")
    return context.value or 0


def current_context() -> int:
    context = ctypes.c_void_p()
    check(lib().cuCtxGetCurrent(ctypes.byref(context)), "cuCtxGetCurrent")
    return context.value or 0


class on_device:
    """Make ``device``'s primary context current for a block, restoring the caller's after."""

    def __init__(self, device: int) -> None:
        self.context = primary_context(device)
        self.pushed = False

    def __enter__(self) -> "on_device":
        if current_context() != self.context:
            check(lib().cuCtxPushCurrent_v2(self.context), "cuCtxPushCurrent")
            self.pushed = True
        return self

    def __exit__(self, *exc: object) -> None:
        if self.pushed:
            popped = ctypes.c_void_p()
            check(lib().cuCtxPopCurrent_v2(ctypes.byref(popped)), "cuCtxPopCurrent")


def library_load(cubin: bytes) -> int:
    """A context-independent library (``cuLibraryLoadData``); kernels load into each context
    when first asked for there."""
    init()
    handle = ctypes.c_void_p()
    check(lib().cuLibraryLoadData(ctypes.byref(handle), cubin, None, None, 0, None, None, 0),
          "cuLibraryLoadData")
    return handle.value or 0


def library_kernel(library: int, entry: str) -> int:
    handle = ctypes.c_void_p()
    check(lib().cuLibraryGetKernel(ctypes.byref(handle), library, entry.encode()),
          f"cuLibraryGetKernel({entry})")
    return handle.value or 0


def kernel_function(kernel: int) -> int:
    """The kernel's function in the current context (forces the load there)."""
    handle = ctypes.c_void_p()
    check(lib().cuKernelGetFunction(ctypes.byref(handle), kernel), "cuKernelGetFunction")
    return handle.value or 0


def kernel_param_sizes(kernel: int, declared: int) -> list[int]:
    """The cubin's parameter sizes in bytes, in entry order: all of them where the driver
    counts them (``cuKernelGetParamCount``), else the first ``declared`` (fewer where the
    cubin has fewer). Never a query past the last parameter: the driver answers it with an
    API error, which compute-sanitizer reports in the user's program. (Without the count a
    cubin with extra parameters goes unseen here; its metadata's contract is checked at
    lookup.)"""
    library = lib()
    offset, size = ctypes.c_size_t(), ctypes.c_size_t()
    count = declared
    if hasattr(library, "cuKernelGetParamCount"):
        counted = ctypes.c_size_t()
        check(library.cuKernelGetParamCount(kernel, ctypes.byref(counted)), "cuKernelGetParamCount")
        count = counted.value
    sizes = []
    for index in range(count):
        code = library.cuKernelGetParamInfo(kernel, index, ctypes.byref(offset), ctypes.byref(size))
        if code == CUDA_ERROR_INVALID_VALUE:  # (past the cubin's last parameter)
            break
        check(code, "cuKernelGetParamInfo")
        sizes.append(size.value)
    return sizes


def kernel_set_attribute(attribute: int, value: int, kernel: int, device: int, what: str) -> None:
    check(lib().cuKernelSetAttribute(attribute, value, kernel, device), f"cuKernelSetAttribute({what})")


def encode_tensor_map(out_address: int, dtype_code: int, address: int, dims: list[int],
                      byte_strides: list[int], box: list[int], swizzle: int, l2_promotion: int,
                      oob_fill: int) -> None:
    """``cuTensorMapEncodeTiled`` into 128 bytes at ``out_address`` (64-byte aligned).

    ``dims``/``box`` innermost first; ``byte_strides`` are the rank-1 outer strides.
    """
    rank = len(dims)
    u64s, u32s = ctypes.c_uint64 * max(1, rank), ctypes.c_uint * max(1, rank)
    check(lib().cuTensorMapEncodeTiled(
        out_address, dtype_code, rank, address, u64s(*dims), u64s(*byte_strides),
        u32s(*box), u32s(*([1] * rank)), 0, swizzle, l2_promotion, oob_fill,
    ), "cuTensorMapEncodeTiled")


EVENT_DISABLE_TIMING = 2


def event_create(device: int) -> int:
    """An event of ``device``'s primary context that records no time (the cheapest kind)."""
    event = ctypes.c_void_p()
    with on_device(device):
        check(lib().cuEventCreate(ctypes.byref(event), EVENT_DISABLE_TIMING), "cuEventCreate")
    return event.value or 0


def event_destroy(event: int) -> None:
    check(lib().cuEventDestroy_v2(event), "cuEventDestroy")
