"""Hopper TMA + thread-block-cluster 2-D tiled copy: ``dst[M, N] = src[M, N]``.

Algorithm (one tile per CTA, one warp per CTA, clusters of two CTAs):
  1. prefetch the two TMA descriptors (src load, dst store);
  2. init one mbarrier, cluster-sync;
  3. TMA-load the (tile_m, tile_n) tile at block (bidx, bidy) of ``src`` into swizzled
     shared memory (``cp.async.bulk.tensor.2d ... mbarrier::complete_tx``);
  4. wait on the mbarrier;
  5. TMA-store the tile to ``dst`` and wait until the store has read shared memory.

The body uses only the descriptors and block indices (TMA coordinates are
``(bidy * tile_n, bidx * tile_m)``, innermost first), so the kernel compiled against the
contract's static placeholder shape runs on any (M, N) once the loader encodes the
descriptors from the real tensors. Partial and padding tiles are TMA's business: OOB loads
fill zeros, OOB stores are dropped. Limits and the grid: ``tma_contract`` in ``launch.py``.
"""

from __future__ import annotations

import cutlass
import cutlass.cute as cute
import cutlass.memory
from cutlass.cute.nvgpu import cpasync, warpgroup

from cutefi.copy import launch as contract_of
from cutefi.cute import args as kernel_args
from cutefi.cute.args import KernelArgs
from cutefi.cute.dtypes import cute_dtype

# row bytes of the tile -> smem swizzle atom (matches the descriptor's swizzle)
_SWIZZLE_ATOM = {
    32: warpgroup.SmemLayoutAtomKind.K_SW32,
    64: warpgroup.SmemLayoutAtomKind.K_SW64,
    128: warpgroup.SmemLayoutAtomKind.K_SW128,
}


class TmaCopy:
    def __init__(self, dtype: str, tile_m: int, tile_n: int) -> None:
        self.contract = contract_of.tma_contract(dtype, tile_m, tile_n)
        self.dtype = cute_dtype(dtype)
        self.tile = (tile_m, tile_n)
        if tile_m % 8 or not 8 <= tile_m <= 256:
            raise ValueError(f"tile_m must be a multiple of 8 in [8, 256], got {tile_m}")
        self.row_bytes = tile_n * self.dtype.width // 8  # swizzle_for() has checked it

    def _smem_layout(self):
        """Swizzled (tile_m, tile_n) row-major layout: (8, tile_n) atoms stacked along M."""
        atom = warpgroup.make_smem_layout_atom(_SWIZZLE_ATOM[self.row_bytes], self.dtype)
        return cute.tile_to_shape(atom, self.tile, order=(0, 1))

    @cute.jit
    def __call__(self, args: KernelArgs):
        """Host side: TMA atoms for both tensors, then the contract's launch."""
        smem_layout = self._smem_layout()
        atom_src, tensor_src = cpasync.make_tiled_tma_atom(
            cpasync.CopyBulkTensorTileG2SOp(), args.src, smem_layout, self.tile)
        atom_dst, tensor_dst = cpasync.make_tiled_tma_atom(
            cpasync.CopyBulkTensorTileS2GOp(), args.dst, smem_layout, self.tile)
        kernel_args.launch(self.kernel, self.contract, args,
                           args.replace(src=(atom_src, tensor_src), dst=(atom_dst, tensor_dst)))

    @cute.kernel
    def kernel(self, args: KernelArgs):
        bidx, bidy, _ = cute.arch.block_idx()
        atom_src, tensor_src = args.src
        atom_dst, tensor_dst = args.dst
        smem_layout = self._smem_layout()

        # ---- stage 0: prefetch TMA descriptors ---------------------------------------
        cpasync.prefetch_descriptor(atom_src)
        cpasync.prefetch_descriptor(atom_dst)

        # ---- shared memory: one mbarrier + one swizzled tile ---------------------------
        @cute.struct
        class SharedStorage:
            load_mbar: cute.struct.MemRange[cutlass.Int64, 1]
            tile: cute.struct.Align[
                cute.struct.MemRange[self.dtype, cute.cosize(smem_layout)],
                contract_of.SMEM_ALIGN_BYTES,
            ]

        storage = cutlass.memory.SmemAllocator().allocate(SharedStorage)
        load_mbar = storage.load_mbar.data_ptr()
        s_tile = storage.tile.get_tensor(smem_layout.outer, swizzle=smem_layout.inner)

        # ---- stage 1: mbarrier init, visible to the async proxy and the cluster --------
        with cute.arch.elect_one():
            cute.arch.mbarrier_init(load_mbar, 1)
        cute.arch.mbarrier_init_fence()
        cute.arch.cluster_arrive_relaxed()
        cute.arch.cluster_wait()

        # ---- partition: this CTA's tile in TMA coordinate space -------------------------
        g_src = cute.local_tile(tensor_src, self.tile, (bidx, bidy))
        g_dst = cute.local_tile(tensor_dst, self.tile, (bidx, bidy))
        s_flat = cute.group_modes(s_tile, 0, 2)
        t_s_src, t_g_src = cpasync.tma_partition(atom_src, 0, cute.make_layout(1), s_flat,
                                                 cute.group_modes(g_src, 0, 2))
        t_s_dst, t_g_dst = cpasync.tma_partition(atom_dst, 0, cute.make_layout(1), s_flat,
                                                 cute.group_modes(g_dst, 0, 2))

        # ---- stage 2: TMA load gmem -> smem, completes on load_mbar --------------------
        with cute.arch.elect_one():
            cute.arch.mbarrier_arrive_and_expect_tx(load_mbar, cute.size_in_bytes(self.dtype, smem_layout))
        cute.copy(atom_src, t_g_src, t_s_src, tma_bar_ptr=load_mbar)

        # ---- stage 3: wait for the tile (phase 0) ----------------------------------------
        cute.arch.mbarrier_wait(load_mbar, 0)

        # ---- stage 4: TMA store smem -> gmem; wait for smem reads before exit ------------
        # The DSL does not elect a single issuer for a TMA store; bulk groups are
        # per-thread, so the same thread commits and waits (smem stays alive meanwhile).
        with cute.arch.elect_one():
            cute.copy(atom_dst, t_s_dst, t_g_dst)
            cute.arch.cp_async_bulk_commit_group()
            cute.arch.cp_async_bulk_wait_group(0, read=True)
