"""Contracts and specs of the copy family (pure Python; kernels: ``copy_kernel.py``,
``tma_copy_kernel.py``).

- ``copy.vector_copy``: 16-byte chunks, 128-bit loads and stores, any length (runtime Int32).
- ``copy.tma_copy``: one TMA-loaded, TMA-stored tile per CTA in clusters of two; the loader
  encodes both descriptors from the real tensors, so one build serves every (M, N).
"""

from __future__ import annotations

from .. import dtypes
from ..jit.contract import LaunchContract, Param, TmaRecipe, ceil_div, pointers
from ..jit.policy import Family
from ..jit.registry import register
from ..jit.spec import KernelSpec

# ---- vector copy ------------------------------------------------------------------------
THREADS = 256
VECTORS_PER_THREAD = 4
CHUNK_BYTES = 16
# chunk indices are Int32 in the kernel; keep index + one block's span below 2**31
MAX_VECTORS = 2**31 - 2**20


def copy_grid(problem):
    """(x, y, z) blocks for ``problem["num_vectors"]`` 16-byte chunks (ints or DSL Int32)."""
    return (ceil_div(problem["num_vectors"], THREADS * VECTORS_PER_THREAD), 1, 1)


def copy_contract() -> LaunchContract:
    return LaunchContract(
        params=(*pointers("src", "dst", dtype="i32"), Param("num_vectors", "i32")),
        block=(THREADS, 1, 1), grid=copy_grid, sample={"num_vectors": 1_000_003},
        entry="cutefi_vector_copy", pdl=True,
    )


COPY_SPEC = KernelSpec.make("copy.vector_copy", "cute", "cutefi.copy.copy_kernel:VectorCopy",
                            "cutefi.copy.launch:copy_contract", Family.SIMT)

# ---- TMA + cluster copy -----------------------------------------------------------------
TMA_THREADS = 32
CLUSTER = (2, 1, 1)
SMEM_ALIGN_BYTES = 1024  # the mbarrier slot, padded so the swizzled tile starts on 1 KiB
TMA_DTYPES = ("bf16", "fp16", "fp32")
DEFAULT_TILES = {"bf16": (128, 64), "fp16": (128, 64), "fp32": (128, 32)}  # 128-byte rows
MAX_GRID_Y = 65535
# the static shape the build compiles against: >= 2 tiles per mode, else the compiler folds
# the block index away (the kernel reads only the descriptors, so any shape runs)
PLACEHOLDER = (4096, 4096)


def tma_grid(m, n, tile_m: int, tile_n: int):
    """x walks M tiles (rounded up to the cluster size), y walks N tiles."""
    tiles_m = ceil_div(ceil_div(m, tile_m), CLUSTER[0]) * CLUSTER[0]
    return (tiles_m, ceil_div(n, tile_n), 1)


def tma_smem_bytes(dtype: str, tile_m: int, tile_n: int) -> int:
    return SMEM_ALIGN_BYTES + tile_m * tile_n * dtypes.bits(dtype) // 8


def swizzle_for(dtype: str, tile_n: int) -> str:
    row_bytes = tile_n * dtypes.bits(dtype) // 8
    if row_bytes not in (32, 64, 128):
        raise ValueError(f"tile_n * element bytes must be 32, 64 or 128, got {row_bytes}")
    return f"{row_bytes}B"


def tma_contract(dtype: str, tile_m: int, tile_n: int) -> LaunchContract:
    recipe = dict(dtype=dtype, box=(tile_n, tile_m), placeholder=PLACEHOLDER,
                  swizzle=swizzle_for(dtype, tile_n), l2_promotion="128B")
    return LaunchContract(
        params=(Param("src", "tma"), Param("dst", "tma")),
        block=(TMA_THREADS, 1, 1),
        cluster=CLUSTER,
        smem_bytes=tma_smem_bytes(dtype, tile_m, tile_n),
        grid=lambda p: tma_grid(p["src"].shape[0], p["src"].shape[1], tile_m, tile_n),
        tma=(TmaRecipe("src", **recipe), TmaRecipe("dst", **recipe)),
        entry=f"cutefi_tma_copy_{dtype}",
    )


TMA_COPY_SPECS = {
    dtype: KernelSpec.make("copy.tma_copy", "cute", "cutefi.copy.tma_copy_kernel:TmaCopy",
                           "cutefi.copy.launch:tma_contract", Family.TMA,
                           dtype=dtype, tile_m=DEFAULT_TILES[dtype][0], tile_n=DEFAULT_TILES[dtype][1])
    for dtype in TMA_DTYPES
}
register(COPY_SPEC, *TMA_COPY_SPECS.values())
