"""``copy_`` (vectorised) and ``tma_copy_`` (TMA + cluster): the copy family's public API."""

from __future__ import annotations

import torch

from .._checks import (require_aligned, require_contiguous, require_cuda, require_dtype, require_same_device,
                       require_tensor)
from .._capability import declare
from .._library import compiling, define
from .._plans import PlanCache
from ..dtypes import name_of
from ..jit.logs import api_log
from ..jit.lookup import get_kernel
from ..jit.policy import Family
from . import launch

_PLANS = PlanCache()


@api_log
def copy_(dst: torch.Tensor, src: torch.Tensor) -> torch.Tensor:
    """Copy ``src`` into ``dst`` (same dtype, shape and device; both contiguous, 16-byte aligned,
    size a multiple of 16 bytes) with 128-bit loads and stores. Returns ``dst``."""
    if compiling():  # torch.compile traces this: one cutefi op in the graph (see _library)
        _OPS["copy_into"](dst, src)
        return dst
    try:  # what a plan depends on (signature() inlined: this runs on every call)
        key = (dst.dtype, dst.shape, dst.stride(), dst.get_device(),
               src.dtype, src.shape, src.stride(), src.get_device())
    except AttributeError:  # not tensors: the full check names the argument
        key = None
    plan = _PLANS.get(key)
    if plan is None:
        plan = _PLANS.put(key, _copy_plan(dst, src))
    kernel, device, num_vectors, grid = plan
    if kernel is None:
        return dst
    src_ptr, dst_ptr = src.data_ptr(), dst.data_ptr()
    if (src_ptr | dst_ptr) & 15:
        _copy_plan(dst, src)  # raises, naming the tensor
    kernel.launch(grid, device, src=src_ptr, dst=dst_ptr, num_vectors=num_vectors)
    return dst


def _copy_plan(dst: torch.Tensor, src: torch.Tensor) -> tuple:
    # types, shapes and layouts first (CPU tensors reach these too); devices last
    require_tensor("src", src)
    require_tensor("dst", dst)
    if src.dtype != dst.dtype or src.shape != dst.shape:
        raise ValueError(f"dst {tuple(dst.shape)} {dst.dtype} must match src {tuple(src.shape)} {src.dtype}")
    for name, tensor in (("src", src), ("dst", dst)):
        require_contiguous(name, tensor)
        require_aligned(name, tensor, launch.CHUNK_BYTES)
    nbytes = src.numel() * src.element_size()
    if nbytes % launch.CHUNK_BYTES:
        raise ValueError(f"copy_ moves 16-byte chunks; src has {nbytes} bytes (not a multiple of 16)")
    num_vectors = nbytes // launch.CHUNK_BYTES
    if num_vectors > launch.MAX_VECTORS:
        raise ValueError(f"copy_ takes at most {launch.MAX_VECTORS} 16-byte chunks (~32 GiB); got {num_vectors}")
    device = require_cuda("src", src)
    require_cuda("dst", dst)
    require_same_device(("src", src), ("dst", dst))
    kernel = get_kernel(launch.COPY_SPEC, device) if num_vectors else None
    return kernel, device, num_vectors, launch.copy_grid({"num_vectors": num_vectors})


@api_log
def tma_copy_(dst: torch.Tensor, src: torch.Tensor) -> torch.Tensor:
    """Copy a 2-D row-major ``src`` [M, N] into ``dst`` with TMA (sm_90+). Returns ``dst``.

    Accepts bf16, fp16, fp32; rows must be contiguous (the row stride may exceed N), the row
    stride in bytes a multiple of 16 and both base addresses 16-byte aligned.
    """
    if compiling():
        _OPS["tma_copy_into"](dst, src)
        return dst
    # types, dimensions, shapes and layouts first (CPU tensors reach these too); devices last
    require_tensor("src", src)
    require_tensor("dst", dst)
    if src.dim() != 2:
        raise ValueError(f"src must be 2-D [M, N], got shape {tuple(src.shape)}")
    require_dtype("src", src, [torch.bfloat16, torch.float16, torch.float32])
    if src.dtype != dst.dtype or src.shape != dst.shape:
        raise ValueError(f"dst {tuple(dst.shape)} {dst.dtype} must match src {tuple(src.shape)} {src.dtype}")
    m, n = src.shape
    empty = m == 0 or n == 0  # nothing to copy: torch gives empty tensors arbitrary strides
    for name, tensor in () if empty else (("src", src), ("dst", dst)):
        if tensor.stride(1) != 1:
            raise ValueError(f"{name} rows must be contiguous (stride(1) == 1), got strides {tuple(tensor.stride())}")
        if (tensor.stride(0) * tensor.element_size()) % 16 or tensor.stride(0) < tensor.shape[1]:
            raise ValueError(f"{name} row stride must be >= N and a multiple of 16 bytes, got {tensor.stride(0)} elements")
        require_aligned(name, tensor, 16)
    dtype = name_of(src.dtype)
    tile_m, tile_n = launch.DEFAULT_TILES[dtype]
    grid = launch.tma_grid(m, n, tile_m, tile_n)
    if grid[1] > launch.MAX_GRID_Y:
        raise ValueError(f"N must be at most {launch.MAX_GRID_Y * tile_n} for {dtype}, got {n}")
    device = require_cuda("src", src)
    require_cuda("dst", dst)
    require_same_device(("src", src), ("dst", dst))
    if empty:
        return dst
    get_kernel(launch.TMA_COPY_SPECS[dtype], device).launch(grid, device, src=src, dst=dst)
    return dst


# ---- torch.compile: the ops Dynamo records ------------------------------------------------
def _no_output(*args: object) -> None:
    return None


def _copy_into(dst: torch.Tensor, src: torch.Tensor) -> None:
    copy_(dst, src)


def _tma_copy_into(dst: torch.Tensor, src: torch.Tensor) -> None:
    tma_copy_(dst, src)


_OPS = {
    "copy_into": define("copy_into(Tensor(a!) dst, Tensor src) -> ()", _copy_into, _no_output),
    "tma_copy_into": define("tma_copy_into(Tensor(a!) dst, Tensor src) -> ()", _tma_copy_into, _no_output),
}
declare(copy_, (Family.SIMT,), ("any dtype: 16-byte chunks",))
declare(tma_copy_, (Family.TMA,), launch.TMA_DTYPES)
