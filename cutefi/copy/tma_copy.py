"""Launch contract, specs and API of the TMA + cluster 2-D copy (kernel: ``tma_copy_kernel.py``).

One tile per CTA: a TMA load into swizzled shared memory, then a TMA store, in clusters of
two CTAs. The descriptors are encoded by cutefi's loader from the real tensors, so one
build serves every (M, N).
"""

from __future__ import annotations

import torch

from .._checks import current_stream, require_aligned, require_cuda, require_dtype, require_same_device
from ..jit.contract import LaunchContract, Param, TmaRecipe, ceil_div
from ..jit.lookup import get_kernel
from ..jit.policy import Family
from ..jit.registry import register
from ..jit.spec import KernelSpec

THREADS = 32
CLUSTER = (2, 1, 1)
SMEM_ALIGN_BYTES = 1024  # the mbarrier slot, padded so the swizzled tile starts on 1 KiB
ELEMENT_BYTES = {"bf16": 2, "fp16": 2, "fp32": 4}
TORCH_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
DEFAULT_TILES = {"bf16": (128, 64), "fp16": (128, 64), "fp32": (128, 32)}  # 128-byte rows
MAX_GRID_Y = 65535


def grid_for(m: int, n: int, tile_m: int, tile_n: int) -> tuple[int, int, int]:
    """x walks M tiles (rounded up to the cluster size), y walks N tiles."""
    tiles_m = ceil_div(ceil_div(m, tile_m), CLUSTER[0]) * CLUSTER[0]
    return (tiles_m, ceil_div(n, tile_n), 1)


def smem_bytes(dtype: str, tile_m: int, tile_n: int) -> int:
    return SMEM_ALIGN_BYTES + tile_m * tile_n * ELEMENT_BYTES[dtype]


def swizzle_for(dtype: str, tile_n: int) -> str:
    row_bytes = tile_n * ELEMENT_BYTES[dtype]
    if row_bytes not in (32, 64, 128):
        raise ValueError(f"tile_n * element bytes must be 32, 64 or 128, got {row_bytes}")
    return f"{row_bytes}B"


def contract(dtype: str, tile_m: int, tile_n: int) -> LaunchContract:
    recipe = dict(dtype=str(TORCH_DTYPES[dtype]).replace("torch.", ""), box=(tile_n, tile_m),
                  swizzle=swizzle_for(dtype, tile_n), l2_promotion="128B")
    return LaunchContract(
        params=(Param("src", "tma"), Param("dst", "tma")),
        block=(THREADS, 1, 1),
        cluster=CLUSTER,
        smem_bytes=smem_bytes(dtype, tile_m, tile_n),
        grid=lambda problem: grid_for(problem["m"], problem["n"], tile_m, tile_n),
        sample={"m": 4096, "n": 4096},  # the build's placeholder shape
        tma=(TmaRecipe("src", **recipe), TmaRecipe("dst", **recipe)),
        host_args=lambda problem: [None, None],
    )


TMA_COPY_SPECS = {
    dtype: KernelSpec.make("copy.tma_copy", "cute", "cutefi.copy.tma_copy_kernel:dsl_entry",
                           "cutefi.copy.tma_copy:contract", Family.TMA,
                           dtype=dtype, tile_m=DEFAULT_TILES[dtype][0], tile_n=DEFAULT_TILES[dtype][1])
    for dtype in ELEMENT_BYTES
}
register(*TMA_COPY_SPECS.values())
_NAME_OF = {torch_dtype: name for name, torch_dtype in TORCH_DTYPES.items()}


def tma_copy_(dst: torch.Tensor, src: torch.Tensor) -> torch.Tensor:
    """Copy a 2-D row-major ``src`` [M, N] into ``dst`` with TMA (sm_90+). Returns ``dst``.

    Accepts bf16, fp16, fp32; rows must be contiguous (the row stride may exceed N), the row
    stride in bytes a multiple of 16 and both base addresses 16-byte aligned.
    """
    device = require_cuda("src", src)
    require_cuda("dst", dst)
    require_same_device(("src", src), ("dst", dst))
    require_dtype("src", src, TORCH_DTYPES.values())
    if src.dtype != dst.dtype or src.shape != dst.shape:
        raise ValueError(f"dst {tuple(dst.shape)} {dst.dtype} must match src {tuple(src.shape)} {src.dtype}")
    if src.dim() != 2:
        raise ValueError(f"src must be 2-D [M, N], got shape {tuple(src.shape)}")
    for name, tensor in (("src", src), ("dst", dst)):
        if tensor.stride(1) != 1:
            raise ValueError(f"{name} rows must be contiguous (stride(1) == 1), got strides {tuple(tensor.stride())}")
        if (tensor.stride(0) * tensor.element_size()) % 16 or tensor.stride(0) < tensor.shape[1]:
            raise ValueError(f"{name} row stride must be >= N and a multiple of 16 bytes, got {tensor.stride(0)} elements")
        require_aligned(name, tensor, 16)
    m, n = src.shape
    if m == 0 or n == 0:
        return dst
    dtype = _NAME_OF[src.dtype]
    spec = TMA_COPY_SPECS[dtype]
    tile_m, tile_n = DEFAULT_TILES[dtype]
    grid = grid_for(m, n, tile_m, tile_n)
    if grid[1] > MAX_GRID_Y:
        raise ValueError(f"N must be at most {MAX_GRID_Y * tile_n} for {dtype}, got {n}")
    kernel = get_kernel(spec, device)
    kernel.launch(grid, (src, dst), current_stream(device), device)
    return dst
