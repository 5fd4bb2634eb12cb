"""Hopper TMA + thread-block-cluster 2-D tiled copy: ``dst[M, N] = src[M, N]``.

Algorithm (one tile per CTA, one warp per CTA):
  1. prefetch the two TMA descriptors (src load, dst store);
  2. init one mbarrier, cluster-sync (cluster = (2, 1, 1) CTAs);
  3. TMA-load the (TILE_M, TILE_N) tile at block (bidx, bidy) of ``src`` into
     swizzled shared memory (``cp.async.bulk.tensor.2d...mbarrier::complete_tx``);
  4. wait on the mbarrier;
  5. TMA-store the tile from shared memory to ``dst`` and wait until the
     store has finished reading shared memory before the CTA exits.

Grid (documented contract for external launchers):
  grid = (2 * ceil(ceil(M / TILE_M) / 2), ceil(N / TILE_N), 1),  block = (32, 1, 1),
  cluster = (2, 1, 1).  blockIdx.x walks M tiles, blockIdx.y walks N tiles.

Runtime sizes: the kernel body only uses the descriptors and block indices
(TMA coordinates are (bidy * TILE_N, bidx * TILE_M), innermost first), so a
kernel compiled against placeholder static shapes runs on any (M, N) when the
launcher encodes the descriptors with the real sizes.  Partial / fully
out-of-range tiles (including the padding CTA of an odd M-tile count) are
handled by TMA: OOB loads fill zeros, OOB stores are dropped.

Limits:
  * dtype in {bf16, fp16, fp32}; row-major, N contiguous; row stride
    (N * elem_bytes) must be a multiple of 16 bytes and base addresses 16-byte
    aligned (TMA requirements; 128-byte alignment recommended for swizzle).
  * TILE_N * elem_bytes must be 32, 64 or 128 bytes (one swizzle row, one TMA
    box per tile); TILE_M a multiple of 8 and <= 256 (TMA box limit).
  * gridDim.y <= 65535, i.e. N <= 65535 * TILE_N.
  * Dynamic smem = 1024 (mbarrier slot, padded to the 1 KiB swizzle alignment)
    + TILE_M * TILE_N * elem_bytes  (<= 33792 B, below the 48 KiB default).
  * Compile with placeholder shapes giving >= 2 tiles per mode (dsl_entry uses
    4096 x 4096): with a single static tile the compiler folds bidx/bidy away.

TMA descriptors (both identical except the base address), for
cuTensorMapEncodeTiled, see ``cutefi/copy/tma_copy.py``: rank 2,
globalDim = [N, M], globalStrides = [N * elem_bytes], boxDim = [TILE_N, TILE_M],
elementStrides = [1, 1], INTERLEAVE_NONE, SWIZZLE_{TILE_N * elem_bytes}B,
L2_PROMOTION_L2_128B, FLOAT_OOB_FILL_NONE.  The kernel takes exactly two
params: the src and dst CUtensorMap by value (.param .align 64 .b8 [128]).
"""

import cutlass
import cutlass.cute as cute
import cutlass.memory
from cutlass.cute.nvgpu import cpasync, warpgroup
from cutlass.cute.runtime import make_fake_compact_tensor

from cutefi.copy.tma_copy import CLUSTER as CLUSTER_SHAPE
from cutefi.copy.tma_copy import SMEM_ALIGN_BYTES, THREADS as THREADS_PER_CTA

PLACEHOLDER_SHAPE = (4096, 4096)

_DTYPES = {
    "bf16": cutlass.BFloat16,
    "fp16": cutlass.Float16,
    "fp32": cutlass.Float32,
}
# row bytes of the tile -> (smem swizzle atom kind, CU_TENSOR_MAP_SWIZZLE_* name)
_SWIZZLE_BY_ROW_BYTES = {
    32: (warpgroup.SmemLayoutAtomKind.K_SW32, "CU_TENSOR_MAP_SWIZZLE_32B"),
    64: (warpgroup.SmemLayoutAtomKind.K_SW64, "CU_TENSOR_MAP_SWIZZLE_64B"),
    128: (warpgroup.SmemLayoutAtomKind.K_SW128, "CU_TENSOR_MAP_SWIZZLE_128B"),
}


def _check_config(dtype, tile_m: int, tile_n: int) -> None:
    row_bytes = tile_n * dtype.width // 8
    if row_bytes not in _SWIZZLE_BY_ROW_BYTES:
        raise ValueError(
            f"tile_n * elem_bytes must be 32, 64 or 128 bytes, got {row_bytes}"
        )
    if tile_m % 8 != 0 or not 8 <= tile_m <= 256:
        raise ValueError(f"tile_m must be a multiple of 8 in [8, 256], got {tile_m}")


def _make_smem_layout(dtype, tile_m: int, tile_n: int):
    """Swizzled (tile_m, tile_n) row-major smem layout: (8, tile_n) atoms stacked along M."""
    kind, _ = _SWIZZLE_BY_ROW_BYTES[tile_n * dtype.width // 8]
    atom = warpgroup.make_smem_layout_atom(kind, dtype)
    return cute.tile_to_shape(atom, (tile_m, tile_n), order=(0, 1))


@cute.kernel
def tma_copy_kernel(
    tma_atom_src: cute.CopyAtom,
    tma_tensor_src: cute.Tensor,
    tma_atom_dst: cute.CopyAtom,
    tma_tensor_dst: cute.Tensor,
    smem_layout: cute.ComposedLayout,
    dtype: cutlass.Constexpr,
    tile_m: cutlass.Constexpr,
    tile_n: cutlass.Constexpr,
    tx_bytes: cutlass.Constexpr,
):
    bidx, bidy, _ = cute.arch.block_idx()

    # ---- stage 0: prefetch TMA descriptors ---------------------------------
    cpasync.prefetch_descriptor(tma_atom_src)
    cpasync.prefetch_descriptor(tma_atom_dst)

    # ---- shared memory: one mbarrier + one swizzled tile --------------------
    @cute.struct
    class SharedStorage:
        load_mbar: cute.struct.MemRange[cutlass.Int64, 1]
        tile: cute.struct.Align[
            cute.struct.MemRange[dtype, cute.cosize(smem_layout)],
            SMEM_ALIGN_BYTES,
        ]

    storage = cutlass.memory.SmemAllocator().allocate(SharedStorage)
    load_mbar = storage.load_mbar.data_ptr()
    s_tile = storage.tile.get_tensor(smem_layout.outer, swizzle=smem_layout.inner)

    # ---- stage 1: mbarrier init, visible to the async proxy and the cluster -
    with cute.arch.elect_one():
        cute.arch.mbarrier_init(load_mbar, 1)
    cute.arch.mbarrier_init_fence()
    cute.arch.cluster_arrive_relaxed()
    cute.arch.cluster_wait()

    # ---- partition: this CTA's tile in TMA coordinate space -----------------
    # local_tile -> (tile_m, tile_n) view at tile (bidx, bidy); its coordinates
    # are (bidx*tile_m + i, bidy*tile_n + j); no M/N enters the computation.
    g_src = cute.local_tile(tma_tensor_src, (tile_m, tile_n), (bidx, bidy))
    g_dst = cute.local_tile(tma_tensor_dst, (tile_m, tile_n), (bidx, bidy))
    t_s_src, t_g_src = cpasync.tma_partition(
        tma_atom_src,
        0,
        cute.make_layout(1),
        cute.group_modes(s_tile, 0, 2),
        cute.group_modes(g_src, 0, 2),
    )
    t_s_dst, t_g_dst = cpasync.tma_partition(
        tma_atom_dst,
        0,
        cute.make_layout(1),
        cute.group_modes(s_tile, 0, 2),
        cute.group_modes(g_dst, 0, 2),
    )

    # ---- stage 2: TMA load gmem -> smem, completes on load_mbar -------------
    with cute.arch.elect_one():
        cute.arch.mbarrier_arrive_and_expect_tx(load_mbar, tx_bytes)
    cute.copy(tma_atom_src, t_g_src, t_s_src, tma_bar_ptr=load_mbar)

    # ---- stage 3: wait for the tile (phase 0) --------------------------------
    cute.arch.mbarrier_wait(load_mbar, 0)

    # ---- stage 4: TMA store smem -> gmem; wait for smem reads before exit ---
    # Unlike the load, the DSL does not elect a single issuer for the TMA
    # store, so elect one thread; bulk groups are per-thread, so the same
    # thread commits and waits (smem stays alive while it waits).
    with cute.arch.elect_one():
        cute.copy(tma_atom_dst, t_s_dst, t_g_dst)
        cute.arch.cp_async_bulk_commit_group()
        cute.arch.cp_async_bulk_wait_group(0, read=True)


@cute.jit
def tma_copy_2d(
    src: cute.Tensor,
    dst: cute.Tensor,
    tile_m: cutlass.Constexpr,
    tile_n: cutlass.Constexpr,
):
    """Host side: build smem layout + TMA atoms, launch with a (2, 1, 1) cluster.

    The DSL's own launch path is only used to get the kernel compiled; external
    loaders launch the kernel directly (see module docstring for the contract).
    """
    dtype = src.element_type
    smem_layout = _make_smem_layout(dtype, tile_m, tile_n)
    tile = (tile_m, tile_n)

    tma_atom_src, tma_tensor_src = cpasync.make_tiled_tma_atom(
        cpasync.CopyBulkTensorTileG2SOp(), src, smem_layout, tile
    )
    tma_atom_dst, tma_tensor_dst = cpasync.make_tiled_tma_atom(
        cpasync.CopyBulkTensorTileS2GOp(), dst, smem_layout, tile
    )
    tx_bytes = cute.size_in_bytes(dtype, smem_layout)

    tiles_m = cute.ceil_div(src.shape[0], tile_m)
    tiles_m = cute.ceil_div(tiles_m, CLUSTER_SHAPE[0]) * CLUSTER_SHAPE[0]
    tiles_n = cute.ceil_div(src.shape[1], tile_n)

    tma_copy_kernel(
        tma_atom_src,
        tma_tensor_src,
        tma_atom_dst,
        tma_tensor_dst,
        smem_layout,
        dtype,
        tile_m,
        tile_n,
        tx_bytes,
    ).launch(
        grid=(tiles_m, tiles_n, 1),
        block=(THREADS_PER_CTA, 1, 1),
        cluster=CLUSTER_SHAPE,
    )


def dsl_entry(dtype: str, tile_m: int, tile_n: int):
    """Return ``(jit_fn, fake_args)`` for ``cute.compile(jit_fn, *fake_args)``.

    The fake tensors are static PLACEHOLDER_SHAPE row-major placeholders; the
    compiled kernel does not depend on them beyond the (externally re-encoded)
    TMA descriptors.  Static shapes keep the kernel ABI to the two descriptors.
    """
    dtype = _DTYPES[dtype]
    _check_config(dtype, tile_m, tile_n)
    # >= 2 tiles per mode, else the compiler folds the block index away.
    assert PLACEHOLDER_SHAPE[0] >= 2 * tile_m and PLACEHOLDER_SHAPE[1] >= 2 * tile_n

    def fake():
        return make_fake_compact_tensor(
            dtype, PLACEHOLDER_SHAPE, stride_order=(1, 0), assumed_align=128
        )

    return tma_copy_2d, (fake(), fake(), tile_m, tile_n)
