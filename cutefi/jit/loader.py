"""Load artifacts into the driver and launch them on torch's current stream.

One ``cuLibraryLoadData`` per artifact gives a context-independent ``CUkernel``; per device
the loader forces the load into the device's context (so a wrong-target cubin fails here,
with the target and the device named), checks parameter sizes with
``cuKernelGetParamInfo``, and sets the dynamic shared-memory and cluster attributes.

The launch path does no allocation, synchronisation, import or tracing: a per-thread
parameter block is refilled in place and handed to the driver as a ``void**``, so launches
can be captured in CUDA graphs. Kernels without a cluster call libcuda's ``cuLaunchKernelEx``
through ctypes with a struct-packed config (cuda-python's wrapper builds Python objects on
every call); cluster kernels, and machines where libcuda cannot be opened by name, go
through cuda-python.
"""

from __future__ import annotations

import ctypes
import functools
import struct
import sys
import threading
from collections.abc import Sequence
from typing import Any

from . import driver as drv
from .cache import Artifact
from .contract import LaunchContract, TmaRecipe

_CTYPE_FOR_KIND = {
    "ptr": ctypes.c_uint64,
    "i64": ctypes.c_int64,
    "i32": ctypes.c_int32,
    "f32": ctypes.c_float,
    "tma": ctypes.c_uint8 * 128,
}
_STRUCT_FOR_KIND = {"ptr": "Q", "i64": "q", "i32": "i", "f32": "f"}
_SMEM_DEFAULT_LIMIT = 48 * 1024


@functools.lru_cache(maxsize=1)
def _ctypes_launch() -> Any:
    """libcuda's ``cuLaunchKernelEx`` as a ctypes function, or None where it cannot be opened.

    Four pointer-sized arguments: the per-thread ``CUlaunchConfig`` is refilled with one
    ``struct.pack_into`` (grid, block, shared memory, stream), so a launch converts no Python
    objects beyond four integers.
    """
    try:
        library = ctypes.CDLL("nvcuda.dll" if sys.platform == "win32" else "libcuda.so.1")
        launch = library.cuLaunchKernelEx
    except (OSError, AttributeError):
        return None
    launch.argtypes = [ctypes.c_void_p] * 4
    launch.restype = ctypes.c_int
    return launch


# CUlaunchConfig: gridDim{X,Y,Z}, blockDim{X,Y,Z}, sharedMemBytes (uint32), pad, hStream at 32,
# attrs at 40 (NULL), numAttrs at 48 (0): 56 bytes
_LAUNCH_CONFIG = struct.Struct("@7I4xQ")
_LAUNCH_CONFIG_BYTES = 56


class KernelLoadError(RuntimeError):
    """The driver could not load a cubin on a device (usually a target/device mismatch)."""


class _ParamBlock:
    """ctypes storage for one launch's parameters plus the ``void*[]`` pointing at them.

    Scalar-only kernels are filled with one ``struct.pack_into`` (native alignment, as in the
    kernel's parameter list), about ten times cheaper than setting ctypes values one by one;
    kernels with TMA descriptors keep one ctypes object per parameter.
    """

    def __init__(self, kinds: Sequence[str]) -> None:
        self.values: list[Any] = []
        self.packer = None
        if "tma" not in kinds:
            fmt = "@" + "".join(_STRUCT_FOR_KIND[kind] for kind in kinds)
            self.packer = struct.Struct(fmt)
            self.buffer = ctypes.create_string_buffer(max(1, self.packer.size))
            base = ctypes.addressof(self.buffer)
            offsets = [struct.calcsize("@" + "".join(_STRUCT_FOR_KIND[k] for k in kinds[:i]) + _STRUCT_FOR_KIND[kind])
                       - struct.calcsize(_STRUCT_FOR_KIND[kind]) for i, kind in enumerate(kinds)]
            addresses = [base + offset for offset in offsets]
        else:
            self.values = [_CTYPE_FOR_KIND[kind]() for kind in kinds]
            addresses = [ctypes.addressof(value) for value in self.values]
        self.pointers = (ctypes.c_void_p * max(1, len(kinds)))(*addresses)
        self.address = ctypes.addressof(self.pointers)
        # this thread's CUlaunchConfig for the ctypes path (no attributes: no cluster)
        self.config = ctypes.create_string_buffer(_LAUNCH_CONFIG_BYTES)
        self.config_address = ctypes.addressof(self.config)


class Kernel:
    """A loaded kernel with its launch contract; call :meth:`launch` to run it."""

    def __init__(self, artifact: Artifact, contract: LaunchContract) -> None:
        self.artifact = artifact
        self.contract = contract
        self.entry: str = artifact.metadata["entry"]
        self.target: str = artifact.metadata["target"]
        self.name: str = artifact.metadata.get("spec", self.entry)
        self._kinds = [p.kind for p in contract.params]
        self._tma_slots = {
            index: next(t for t in contract.tma if t.param == p.name)
            for index, p in enumerate(contract.params) if p.kind == "tma"
        }
        self._local = threading.local()
        self._ready_devices: set[int] = set()
        # device index -> CUfunction handle (int) for the ctypes fast path
        self._functions: dict[int, int] = {}
        self._fast_launch = None
        self._block_and_smem = (*contract.block, contract.smem_bytes)
        drv.init()
        driver = drv._driver()
        self._driver = driver
        try:
            self._library = drv.check(
                driver.cuLibraryLoadData(artifact.cubin, [], [], 0, [], [], 0), "cuLibraryLoadData"
            )
            self._kernel = drv.check(
                driver.cuLibraryGetKernel(self._library, self.entry.encode()), "cuLibraryGetKernel"
            )
        except drv.CudaDriverError as exc:
            raise self._load_error(exc) from exc
        self._config = self._make_config()

    # -- set-up, once per kernel and device --------------------------------------------
    def _make_config(self) -> Any:
        driver = self._driver
        config = driver.CUlaunchConfig()
        config.blockDimX, config.blockDimY, config.blockDimZ = self.contract.block
        config.sharedMemBytes = self.contract.smem_bytes
        attrs = []
        if self.contract.cluster != (1, 1, 1):
            attr = driver.CUlaunchAttribute()
            attr.id = driver.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
            attr.value.clusterDim.x, attr.value.clusterDim.y, attr.value.clusterDim.z = self.contract.cluster
            attrs.append(attr)
        config.attrs = attrs
        config.numAttrs = len(attrs)
        return config

    def prepare(self, device_index: int) -> None:
        """Load into ``device_index``'s context and check the cubin against the device."""
        if device_index in self._ready_devices:
            return
        driver = self._driver
        device = drv.check(driver.cuDeviceGet(device_index), "cuDeviceGet")
        _ensure_context(device)
        try:
            function = drv.check(driver.cuKernelGetFunction(self._kernel), "cuKernelGetFunction")
        except drv.CudaDriverError as exc:
            raise self._load_error(exc) from exc
        self._check_params()
        attr = driver.CUfunction_attribute
        if self.contract.smem_bytes > _SMEM_DEFAULT_LIMIT:
            drv.check(driver.cuKernelSetAttribute(
                attr.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, self.contract.smem_bytes,
                self._kernel, device), "cuKernelSetAttribute(max dynamic smem)")
        cx, cy, cz = self.contract.cluster
        if cx * cy * cz > 8:
            drv.check(driver.cuKernelSetAttribute(
                attr.CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1, self._kernel, device),
                "cuKernelSetAttribute(non-portable cluster)")
        if self.contract.cluster == (1, 1, 1) and _ctypes_launch() is not None:
            self._fast_launch = _ctypes_launch()
            self._functions[device_index] = int(function)
        self._ready_devices.add(device_index)

    def _fill_one_by_one(self, values: list[Any], args: Sequence[Any]) -> None:
        for index, value in enumerate(args):
            if index in self._tma_slots:
                _encode_tma(self._driver, self._tma_slots[index], value, values[index])
            else:
                values[index].value = value

    def _load_error(self, exc: Exception) -> KernelLoadError:
        return KernelLoadError(
            f"cannot load {self.name}: the cubin is built for {self.target}, which "
            f"{_describe_current_device()} cannot run ({exc}); build for this device's target "
            f"(see `cutefi env`)"
        )

    def _check_params(self) -> None:
        driver = self._driver
        for index, param in enumerate(self.contract.params):
            _offset, size = drv.check(driver.cuKernelGetParamInfo(self._kernel, index), "cuKernelGetParamInfo")
            if size != param.size:  # offsets differ from the PTX order for descriptors: sizes only
                raise KernelLoadError(
                    f"{self.name}: parameter {index} ({param.name}) is {size} bytes in the cubin, "
                    f"the contract says {param.size}"
                )
        err, *_ = driver.cuKernelGetParamInfo(self._kernel, len(self.contract.params))
        if err == driver.CUresult.CUDA_SUCCESS:
            raise KernelLoadError(f"{self.name}: the cubin has more parameters than the contract")

    # -- the launch path -----------------------------------------------------------------
    def launch(self, grid: tuple[int, int, int], args: Sequence[Any], stream: int,
               device_index: int) -> None:
        """Launch on ``stream`` (a raw ``cudaStream_t``) of ``device_index``.

        ``args`` follow the contract's parameters: ints (addresses for ``ptr``), floats, and
        for ``tma`` parameters a torch tensor whose descriptor is encoded here.
        """
        if device_index not in self._ready_devices:
            self.prepare(device_index)
        block = getattr(self._local, "params", None)
        if block is None:
            block = self._local.params = _ParamBlock(self._kinds)
        if block.packer is not None:
            block.packer.pack_into(block.buffer, 0, *args)
        else:
            self._fill_one_by_one(block.values, args)
        function = self._functions.get(device_index)
        if function is not None:
            _LAUNCH_CONFIG.pack_into(block.config, 0, *grid, *self._block_and_smem, stream)
            err = self._fast_launch(block.config_address, function, block.address, None)
            if err != 0:
                drv.check((self._driver.CUresult(err),), f"cuLaunchKernelEx({self.name}, grid={grid})")
            return
        config = self._config
        config.gridDimX, config.gridDimY, config.gridDimZ = grid
        config.hStream = stream
        err, = self._driver.cuLaunchKernelEx(config, self._kernel, block.address, 0)
        if err != 0:
            drv.check((err,), f"cuLaunchKernelEx({self.name}, grid={grid})")


def _describe_current_device() -> str:
    driver = drv._driver()
    index = 0
    try:
        index = int(drv.check(driver.cuCtxGetDevice(), "cuCtxGetDevice"))
    except drv.CudaDriverError:
        pass  # no current context: torch's default device 0
    info = next((d for d in drv.devices() if d.index == index), None)
    return f"device {index}" + (f" ({info.name}, CC {info.cc[0]}.{info.cc[1]})" if info else "")


def _ensure_context(device: Any) -> None:
    """Make ``device``'s primary context current on this thread (torch uses the same one)."""
    driver = drv._driver()
    current = drv.check(driver.cuCtxGetCurrent(), "cuCtxGetCurrent")
    if current is not None and int(current) != 0:
        current_device = drv.check(driver.cuCtxGetDevice(), "cuCtxGetDevice")
        if int(current_device) == int(device):
            return
    context = drv.check(driver.cuDevicePrimaryCtxRetain(device), "cuDevicePrimaryCtxRetain")
    drv.check(driver.cuCtxSetCurrent(context), "cuCtxSetCurrent")


_DTYPE_TO_TMA: dict[str, str] = {
    "bfloat16": "CU_TENSOR_MAP_DATA_TYPE_BFLOAT16",
    "float16": "CU_TENSOR_MAP_DATA_TYPE_FLOAT16",
    "float32": "CU_TENSOR_MAP_DATA_TYPE_FLOAT32",
    "uint8": "CU_TENSOR_MAP_DATA_TYPE_UINT8",
}


def _encode_tma(driver: Any, recipe: TmaRecipe, tensor: Any, slot: Any) -> None:
    """Encode ``tensor``'s descriptor for ``recipe`` with cuTensorMapEncodeTiled into ``slot``."""
    shape, strides, address = tuple(tensor.shape), tuple(tensor.stride()), tensor.data_ptr()
    if len(shape) != recipe.rank:
        raise ValueError(f"TMA parameter {recipe.param!r} needs a {recipe.rank}-D tensor, got {len(shape)}-D")
    element = tensor.element_size()
    enum = driver.CUtensorMapDataType
    swizzle = driver.CUtensorMapSwizzle
    l2 = driver.CUtensorMapL2promotion
    tensor_map = drv.check(driver.cuTensorMapEncodeTiled(
        getattr(enum, _DTYPE_TO_TMA[recipe.dtype]),
        recipe.rank,
        address,
        [driver.cuuint64_t(int(s)) for s in reversed(shape)],
        [driver.cuuint64_t(int(s) * element) for s in reversed(strides[:-1])],
        [driver.cuuint32_t(b) for b in recipe.box],
        [driver.cuuint32_t(1)] * recipe.rank,
        driver.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE,
        getattr(swizzle, {"none": "CU_TENSOR_MAP_SWIZZLE_NONE", "32B": "CU_TENSOR_MAP_SWIZZLE_32B",
                          "64B": "CU_TENSOR_MAP_SWIZZLE_64B", "128B": "CU_TENSOR_MAP_SWIZZLE_128B"}[recipe.swizzle]),
        getattr(l2, {"none": "CU_TENSOR_MAP_L2_PROMOTION_NONE", "64B": "CU_TENSOR_MAP_L2_PROMOTION_L2_64B",
                     "128B": "CU_TENSOR_MAP_L2_PROMOTION_L2_128B",
                     "256B": "CU_TENSOR_MAP_L2_PROMOTION_L2_256B"}[recipe.l2_promotion]),
        driver.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA
        if recipe.oob_fill_nan else driver.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE,
    ), "cuTensorMapEncodeTiled")
    ctypes.memmove(ctypes.addressof(slot), int(tensor_map.getPtr()), 128)
