"""Load cubins per device and launch them on the tensors' device, whatever device is current.

One ``cuLibraryLoadData`` per artifact gives a context-independent ``CUkernel``. Per device,
:meth:`Kernel.prepare` forces the load into that device's primary context (so a wrong-target
cubin fails there, naming the target and the device), checks every parameter's size with
``cuKernelGetParamInfo`` and sets the shared-memory and cluster attributes.

A launch passes the ``CUkernel`` itself to ``cuLaunchKernelEx``: the driver then runs it in
the context of the stream it is given, so a call on ``cuda:1`` tensors runs on ``cuda:1``
even while ``cuda:0`` is current. Only torch's legacy default stream (handle 0) carries no
context; for it the device's primary context is pushed around the launch when another one
is current.

The launch path allocates nothing and makes no Python-level driver wrapper: arguments are
packed **by name** into a per-thread parameter buffer by a function generated from the
contract, the launch config (with cluster and PDL attributes) is refilled with one
``struct.pack_into``, and libcuda is called through ctypes. TMA descriptors are encoded
once per (address, shape, strides) and copied in afterwards. Every launch can be captured
in a CUDA graph.
"""

from __future__ import annotations

import ctypes
import struct
import threading
from collections.abc import Callable
from typing import Any

from . import libcuda
from .cache import Artifact
from .contract import LaunchContract, Param, TmaRecipe

_SMEM_DEFAULT_LIMIT = 48 * 1024
_STRUCT_CODE = {"ptr": "Q", "i64": "q", "i32": "i", "f32": "f"}
# CUlaunchConfig: grid xyz, block xyz, sharedMemBytes (u32), pad, hStream @32, attrs @40,
# numAttrs @48, pad: 56 bytes
_LAUNCH_CONFIG = struct.Struct("=7I4xQQI4x")
# CUlaunchAttribute: id (u32), pad to 8, 64-byte value union: 72 bytes
_ATTRIBUTE_BYTES = 72
_DESCRIPTOR_CACHE_LIMIT = 1024
_SWIZZLE = {"none": 0, "32B": 1, "64B": 2, "128B": 3}
_L2_PROMOTION = {"none": 0, "64B": 1, "128B": 2, "256B": 3}


class KernelLoadError(RuntimeError):
    """The driver could not load a cubin on a device (usually a target/device mismatch)."""


def param_offsets(params: tuple[Param, ...]) -> tuple[list[int], int]:
    """Each parameter's offset in a naturally aligned buffer, and the buffer's size."""
    offsets, cursor = [], 0
    for param in params:
        cursor = -(-cursor // param.abi_align) * param.abi_align
        offsets.append(cursor)
        cursor += param.size
    return offsets, max(cursor, 1)


def _packing_code(contract: LaunchContract, buffer: str) -> tuple[list[str], dict[str, Any]]:
    """Statements that write every parameter (bound to a local of its own name) into ``buffer``
    at its offset: one ``struct.pack_into`` of the scalars and pointers, one copy per TMA
    descriptor. A wrong value raises a TypeError naming the parameter."""
    offsets, _ = param_offsets(contract.params)
    fmt, cursor, scalar_names, tma_slots = "=", 0, [], []
    for param, offset in zip(contract.params, offsets):
        if param.kind == "tma":
            tma_slots.append((param.name, offset))
            continue
        fmt += f"{offset - cursor}x" if offset > cursor else ""
        fmt += _STRUCT_CODE[param.kind]
        cursor = offset + param.size
        scalar_names.append(param.name)
    lines = []
    if scalar_names:
        lines += ["try:",
                  f"    _pack_into({buffer}, 0, {', '.join(scalar_names)})",
                  "except struct.error as exc:",
                  f"    _explain(exc, {', '.join(f'{n}={n}' for n in scalar_names)})"]
    lines += [f"_encode({buffer}, {offset}, {name}, {name!r})" for name, offset in tma_slots]
    return lines, {"_pack_into": struct.Struct(fmt).pack_into, "struct": struct, "_explain": _explainer(contract)}


def _compile(source: str, scope: dict[str, Any], name: str) -> Callable[..., Any]:
    exec(source, scope)  # noqa: S102 - built from validated identifiers only
    return scope[name]


def make_packer(contract: LaunchContract, encode_tma: Callable[[bytearray, int, Any, str], None]) -> Callable[..., None]:
    """``pack(buffer, **args)``: write every parameter, given by name, at its offset.

    Generated once per contract; a missing, unknown or misspelled name is a TypeError from
    Python's own keyword matching, a wrong value one naming the parameter.
    """
    lines, scope = _packing_code(contract, "buffer")
    body = "\n".join("    " + line for line in lines or ["pass"])
    return _compile(f"def pack(buffer, *, {', '.join(contract.names)}):\n{body}\n", {**scope, "_encode": encode_tma},
                    "pack")


def _explainer(contract: LaunchContract) -> Callable[..., None]:
    kinds = {p.name: p.kind for p in contract.params}

    def explain(exc: struct.error, **values: Any) -> None:
        for name, value in values.items():
            try:
                struct.pack("=" + _STRUCT_CODE[kinds[name]], value)
            except struct.error as bad:
                raise TypeError(f"kernel parameter {name!r} ({kinds[name]}): {value!r} ({bad})") from None
        raise TypeError(str(exc))

    return explain


class _ThreadState:
    """One thread's parameter buffer, ``void*[]`` and launch config (with attributes)."""

    def __init__(self, contract: LaunchContract) -> None:
        offsets, size = param_offsets(contract.params)
        self.buffer = bytearray(size)
        self._raw = (ctypes.c_char * size).from_buffer(self.buffer)
        base = ctypes.addressof(self._raw)
        self.pointers = (ctypes.c_void_p * max(1, len(offsets)))(*(base + o for o in offsets))
        self.pointers_address = ctypes.addressof(self.pointers)
        self.config = ctypes.create_string_buffer(_LAUNCH_CONFIG.size)
        self.config_address = ctypes.addressof(self.config)
        # pre-built pointer objects: the launch passes them to libcuda without conversion
        self.config_ptr = ctypes.c_void_p(self.config_address)
        self.pointers_ptr = ctypes.c_void_p(self.pointers_address)
        self.last: tuple | None = None  # (grid, stream, pdl) the config holds
        # attributes: the cluster shape (if any), then PDL (counted only when asked for)
        self.attributes = ctypes.create_string_buffer(2 * _ATTRIBUTE_BYTES)
        self.attributes_address = ctypes.addressof(self.attributes)
        count = 0
        if contract.cluster != (1, 1, 1):
            struct.pack_into("=I4x3I", self.attributes, 0, libcuda.LAUNCH_ATTR_CLUSTER_DIMENSION,
                             *contract.cluster)
            count = 1
        struct.pack_into("=I4xi", self.attributes, count * _ATTRIBUTE_BYTES,
                         libcuda.LAUNCH_ATTR_PROGRAMMATIC_STREAM_SERIALIZATION, 1)
        self.base_attributes = count


class Kernel:
    """A loaded kernel with its launch contract; call :meth:`launch` to run it."""

    def __init__(self, artifact: Artifact, contract: LaunchContract) -> None:
        self.artifact = artifact
        self.contract = contract
        self.entry: str = artifact.metadata["entry"]
        self.target: str = artifact.metadata["target"]
        self.name: str = artifact.metadata.get("spec", self.entry)
        self._local = threading.local()
        self._ready: dict[int, bool] = {}  # device -> PDL usable there
        self._descriptors: dict[tuple, bytes] = {}
        try:
            self._library = libcuda.library_load(artifact.cubin)
            self._kernel = libcuda.library_kernel(self._library, self.entry)
        except libcuda.CudaDriverError as exc:
            raise self._load_error(exc, None) from exc
        self.launch = self._make_launch()

    # -- set-up, once per kernel and device --------------------------------------------
    def prepare(self, device: int) -> None:
        """Load into ``device``'s context and check the cubin against the device."""
        if device in self._ready:
            return
        with libcuda.on_device(device):
            try:
                libcuda.kernel_function(self._kernel)
            except libcuda.CudaDriverError as exc:
                raise self._load_error(exc, device) from exc
        self._check_params()
        if self.contract.smem_bytes > _SMEM_DEFAULT_LIMIT:
            libcuda.kernel_set_attribute(libcuda.FUNC_MAX_DYNAMIC_SMEM, self.contract.smem_bytes,
                                         self._kernel, device, "max dynamic smem")
        cx, cy, cz = self.contract.cluster
        if cx * cy * cz > 8:
            libcuda.kernel_set_attribute(libcuda.FUNC_NON_PORTABLE_CLUSTER, 1, self._kernel, device,
                                         "non-portable cluster")
        major = libcuda.device_attribute(libcuda.ATTR_CC_MAJOR, device)
        self._ready[device] = self.contract.pdl and major >= 9

    def _load_error(self, exc: Exception, device: int | None) -> KernelLoadError:
        """Name the target and the device(s): ``device`` None means the library as a whole
        has no image any visible device can run (``cuLibraryGetKernel`` refuses it)."""
        from .driver import devices

        described = [f"device {d.index} ({d.name}, CC {d.cc[0]}.{d.cc[1]})" for d in devices()
                     if device is None or d.index == device]
        where = " or ".join(described) or "this machine"
        return KernelLoadError(
            f"cannot load {self.name}: the cubin is built for {self.target}, which {where} cannot "
            f"run ({exc}); build for this device's target (see `cutefi env`)"
        )

    def _check_params(self) -> None:
        declared = [p.size for p in self.contract.params]
        sizes = libcuda.kernel_param_sizes(self._kernel, len(declared))
        # offsets differ from the PTX order for descriptors: compare sizes
        if sizes != declared:
            raise KernelLoadError(
                f"{self.name}: the cubin's parameter sizes are {sizes}, the contract declares "
                f"{list(zip(self.contract.names, declared))}"
            )

    def _encode_tma(self, buffer: bytearray, offset: int, tensor: Any, name: str) -> None:
        key = (name, tensor.data_ptr(), tuple(tensor.shape), tuple(tensor.stride()))
        descriptor = self._descriptors.get(key)
        if descriptor is None:
            if len(self._descriptors) >= _DESCRIPTOR_CACHE_LIMIT:
                self._descriptors.clear()
            descriptor = self._descriptors[key] = encode_descriptor(self.contract.recipe(name), tensor)
        buffer[offset:offset + 128] = descriptor

    # -- the launch path -----------------------------------------------------------------
    def launch(self, grid: tuple[int, int, int], device: int, stream: int | None = None,
               pdl: bool = False, /, **args: Any) -> None:
        """Launch on ``device`` (the tensors' device), with the contract's parameters by name.

        ``stream``: a raw ``cudaStream_t`` of that device; None: torch's current stream there.
        Pointers are ints (addresses), ``tma`` parameters tensors. ``pdl`` asks for
        programmatic dependent launch; it is used only where the kernel waits for its inputs
        (``contract.pdl``) and the device has it (sm_90+), and ignored elsewhere.

        (Replaced per instance by the function :meth:`_make_launch` generates, with the same
        signature and the parameters as keyword-only arguments; this body is its reference.)
        """
        raise NotImplementedError  # pragma: no cover

    def _make_launch(self) -> Callable[..., None]:
        """The launch path as one generated function: argument packing inlined (no kwargs
        dict, no extra call), the config refilled only when grid, stream or PDL change, and
        libcuda called with pre-built pointer objects (no ctypes argument conversion)."""
        lines, scope = _packing_code(self.contract, "state.buffer")
        current_stream, current_device = _torch_hooks()
        self._launch_fn = launch_fn = libcuda.lib()["cuLaunchKernelEx"]  # a fresh function: no argtypes
        launch_fn.restype = ctypes.c_int
        self._kernel_ptr = ctypes.c_void_p(self._kernel)
        scope.update(
            _encode=self._encode_tma, _ready=self._ready, _prepare=self.prepare, _local=self._local,
            _new_state=self._new_state, _current_stream=current_stream,
            _config_pack=_LAUNCH_CONFIG.pack_into, _block_and_smem=(*self.contract.block, self.contract.smem_bytes),
            _launch_fn=launch_fn, _kernel=self._kernel_ptr, _current_device=current_device,
            _pushed=self._launch_pushed, _failed=self._failed,
        )
        body = [
            "ready = _ready.get(device)",
            "if ready is None:",
            "    _prepare(device)",
            "    ready = _ready[device]",
            "state = _local.__dict__.get('state') or _new_state()",
            *lines,
            "if stream is None:",
            "    stream = _current_stream(device)",
            "config = (grid, stream, pdl and ready)",
            "if config != state.last:",
            "    state.last = config",
            "    count = state.base_attributes + (1 if pdl and ready else 0)",
            "    _config_pack(state.config, 0, *grid, *_block_and_smem, stream,",
            "                 state.attributes_address if count else 0, count)",
            # the legacy default stream (0) runs in the current context: torch's current device
            # says which (cudaSetDevice keeps the two together); a thread with no context
            # at all fails with CUDA_ERROR_INVALID_CONTEXT and is retried in the device's own
            "if stream == 0 and _current_device() != device:",
            "    return _pushed(state, grid, device)",
            "err = _launch_fn(state.config_ptr, _kernel, state.pointers_ptr, None)",
            "if err:",
            "    _failed(err, grid, state, device)",
        ]
        params = ", ".join(self.contract.names)
        source = (f"def launch(grid, device, stream=None, pdl=False, /, *, {params}):\n"
                  + "\n".join("    " + line for line in body) + "\n")
        return _compile(source, scope, "launch")

    def _new_state(self) -> _ThreadState:
        state = self._local.state = _ThreadState(self.contract)
        return state

    def _launch_pushed(self, state: _ThreadState, grid: tuple[int, int, int], device: int) -> None:
        """The default stream while another context is current: launch in the device's own."""
        with libcuda.on_device(device):
            err = self._launch_fn(state.config_ptr, self._kernel_ptr, state.pointers_ptr, None)
        if err:
            libcuda.check(err, f"cuLaunchKernelEx({self.name}, grid={grid})")

    def _failed(self, err: int, grid: tuple[int, int, int], state: _ThreadState | None = None,
                device: int | None = None) -> None:
        if err == libcuda.CUDA_ERROR_INVALID_CONTEXT and state is not None and device is not None:
            return self._launch_pushed(state, grid, device)  # a thread that never touched CUDA
        libcuda.check(err, f"cuLaunchKernelEx({self.name}, grid={grid})")


def _torch_hooks() -> tuple[Callable[[int], int], Callable[[], int]]:
    """torch's C functions for (a device's current raw stream, the current device): far
    cheaper than ``torch.cuda.current_stream()`` / ``current_device()``."""
    import torch

    return torch._C._cuda_getCurrentRawStream, torch._C._cuda_getDevice


def encode_descriptor(recipe: TmaRecipe, tensor: Any) -> bytes:
    """The 128-byte descriptor of ``tensor`` (a row-major torch tensor) for ``recipe``."""
    from ..dtypes import tma_code

    shape, strides = tuple(tensor.shape), tuple(tensor.stride())
    if len(shape) != recipe.rank:
        raise ValueError(f"TMA parameter {recipe.param!r} needs a {recipe.rank}-D tensor, got {len(shape)}-D")
    element = tensor.element_size()
    out = (ctypes.c_uint8 * 192)()  # 128 bytes at a 64-byte aligned address inside
    address = -(-ctypes.addressof(out) // 64) * 64
    libcuda.encode_tensor_map(
        address, tma_code(recipe.dtype), tensor.data_ptr(),
        dims=[int(s) for s in reversed(shape)],
        byte_strides=[int(s) * element for s in reversed(strides[:-1])],
        box=list(recipe.box), swizzle=_SWIZZLE[recipe.swizzle],
        l2_promotion=_L2_PROMOTION[recipe.l2_promotion], oob_fill=1 if recipe.oob_fill_nan else 0,
    )
    return ctypes.string_at(address, 128)
