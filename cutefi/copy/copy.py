"""Launch contract and spec of the vectorised copy (kernel: ``copy_kernel.py``)."""

from __future__ import annotations

import torch

from .._checks import current_stream, require_aligned, require_contiguous, require_cuda, require_same_device
from ..jit.contract import LaunchContract, Param
from ..jit.lookup import get_kernel
from ..jit.policy import Family
from ..jit.registry import register
from ..jit.spec import KernelSpec

THREADS = 256
VECTORS_PER_THREAD = 4
CHUNK_BYTES = 16
# chunk indices are Int32 in the kernel; keep index + one block's span below 2**31
MAX_VECTORS = 2**31 - 2**20


def copy_grid(num_vectors):
    """(x, y, z) blocks for ``num_vectors`` 16-byte chunks; works on ints and DSL Int32."""
    per_block = THREADS * VECTORS_PER_THREAD
    return ((num_vectors + per_block - 1) // per_block, 1, 1)


def contract() -> LaunchContract:
    return LaunchContract(
        params=(Param("src", "ptr"), Param("dst", "ptr"), Param("num_vectors", "i32")),
        block=(THREADS, 1, 1),
        grid=lambda problem: tuple(max(1, v) for v in copy_grid(problem["num_vectors"])),
        sample={"num_vectors": 1_000_003},
    )


COPY_SPEC = KernelSpec.make(
    "copy.vector_copy", "cute", "cutefi.copy.copy_kernel:dsl_entry", "cutefi.copy.copy:contract",
    Family.SIMT,
)
register(COPY_SPEC)


def copy_(dst: torch.Tensor, src: torch.Tensor) -> torch.Tensor:
    """Copy ``src`` into ``dst`` (same dtype, shape and device; both contiguous, 16-byte aligned,
    size a multiple of 16 bytes) with 128-bit loads and stores. Returns ``dst``."""
    device = require_cuda("src", src)
    require_cuda("dst", dst)
    require_same_device(("src", src), ("dst", dst))
    if src.dtype != dst.dtype or src.shape != dst.shape:
        raise ValueError(f"dst {tuple(dst.shape)} {dst.dtype} must match src {tuple(src.shape)} {src.dtype}")
    for name, tensor in (("src", src), ("dst", dst)):
        require_contiguous(name, tensor)
        require_aligned(name, tensor, CHUNK_BYTES)
    nbytes = src.numel() * src.element_size()
    if nbytes % CHUNK_BYTES:
        raise ValueError(f"copy_ moves 16-byte chunks; src has {nbytes} bytes (not a multiple of 16)")
    num_vectors = nbytes // CHUNK_BYTES
    if num_vectors > MAX_VECTORS:
        raise ValueError(f"copy_ takes at most {MAX_VECTORS} 16-byte chunks (~32 GiB); got {num_vectors}")
    if num_vectors == 0:
        return dst
    kernel = get_kernel(COPY_SPEC, device)
    kernel.launch(copy_grid(num_vectors), (src.data_ptr(), dst.data_ptr(), num_vectors),
                  current_stream(device), device)
    return dst
