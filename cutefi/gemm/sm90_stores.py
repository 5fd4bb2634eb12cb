"""The Hopper GEMM's output stores (a mixin of :class:`cutefi.gemm.sm90_kernel.GemmSm90`): the
staged TMA-store epilogue (fp32 accumulators -> bias -> output dtype -> stmatrix into a ring of
shared-memory pieces -> TMA stores), the swapped builds' transposed store from registers, and
the grouped builds' row-by-row store of a tile that crosses its segment's end."""

from __future__ import annotations

import cutlass
import cutlass.cute as cute
import cutlass.pipeline as pipeline
import cutlass.utils.hopper_helpers as sm90_utils
from cutlass import Float32, Int32
from cutlass.cute.nvgpu import cpasync, warp

from cutefi.gemm import launch

CONSUMER_THREADS = 2 * launch.WARPGROUP
EPI_ROUND = launch.EPI_STAGES // 2  # pieces a round of the store epilogue writes, then stores


class Sm90Stores:
    """Needs ``out_dtype``, ``epi_tile``, ``cluster_k`` of the kernel it is mixed into."""

    def _store_ring(self, thread, tiled_mma, warp_idx, s_c, tma_c, atom_c, acc):
        """The TMA-store epilogue's pieces: stmatrix copy, its views, the store ring."""
        # epilogue: fp32 registers -> out dtype -> shared memory (stmatrix; fp32 out: plain
        # stores of each thread's pairs in stmatrix's arrangement) -> TMA store
        layout_type = self.out_dtype if self.out_dtype.width == 16 else cutlass.BFloat16
        store_r2s = cute.make_tiled_copy_S(
            sm90_utils.sm90_get_smem_store_op(row_major(), elem_ty_d=self.out_dtype, elem_ty_acc=Float32),
            cute.make_tiled_copy_C_atom(cute.make_copy_atom(warp.StMatrix8x8x16bOp(False, 4), layout_type),
                                        tiled_mma))
        thr_r2s = store_r2s.get_slice(thread)
        t_sc = thr_r2s.partition_D(s_c)
        acc_pieces = store_r2s.retile(acc)
        piece_shape = cute.shape(thr_r2s.partition_S(s_c))[:3]
        piece = cute.make_rmem_tensor(piece_shape, Float32)
        piece_out = cute.make_rmem_tensor(piece_shape, self.out_dtype)
        # (the stores' groups are committed and waited for in ``_epilogue``; this object gives
        # the kernel's end its wait for every store)
        stores = pipeline.PipelineTmaStore.create(
            num_stages=launch.EPI_STAGES,
            producer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread, CONSUMER_THREADS))
        store_warp = launch.WARPGROUP // 32  # the first consumer warp
        return (tma_c, atom_c, s_c, t_sc, acc_pieces, piece, piece_out, store_r2s, stores, warp_idx == store_warp)

    @cute.jit
    def _store_transposed(self, args, acc, coord_c, bias, first_row, first_token, share, end_token):
        """swap: element (weight row r, token t < ``end_token``) of the tile to out[t, r], from
        registers (the output is a sliver of the weight's bytes), with the bias of row r;
        cluster_k: only the accumulators of this CTA's ``share``."""
        out = cute.make_tensor(args.c, cute.make_layout((args.n, args.m), stride=(args.ldc, 1)))
        share_size = cute.size(acc) // self.cluster_k
        for i in cutlass.range(cute.size(acc), unroll_full=True):
            row = first_row + coord_c[i][0]
            token = first_token + coord_c[i][1]
            if row < args.m and token < end_token and i // share_size == share:
                value = acc[i]
                if args.has_bias != 0:
                    value = value + Float32(bias[row])
                out[token, row] = value.to(self.out_dtype)

    @cute.jit
    def _store_rows(self, args, acc, coord_c, first_row, end_row, first_col):
        """grouped: the tile's rows before ``end_row`` (its segment's) from registers into out,
        two columns (4 bytes) a store."""
        for i in cutlass.range(0, cute.size(acc), 2, unroll_full=True):
            row = first_row + coord_c[i][0]
            col = first_col + coord_c[i][1]
            if row >= 0 and row < end_row and col < args.n:
                pair = cute.make_rmem_tensor(cute.make_layout(2), self.out_dtype)
                pair[0] = acc[i].to(self.out_dtype)
                pair[1] = acc[i + 1].to(self.out_dtype)
                offset = cute.assume(cutlass.Int64(row) * args.ldc + col, divby=2)
                cute.autovec_copy(pair, cute.make_tensor(args.c_rows + offset, cute.make_layout(2)))

    @cute.jit
    def _epilogue(self, args, acc, coord_c, bias, first_col, g_tile, store_ring, epi_barrier, pieces_done: Int32,
                  share: Int32) -> Int32:
        """Bias, conversion, stmatrix into the store ring, TMA stores of ``g_tile``; returns pieces
        stored so far (cluster_k: only the pieces of this CTA's ``share``)."""
        _, atom_c, s_c, t_sc, acc_pieces, piece, piece_out, store_r2s, _, is_store_warp = store_ring
        if args.has_bias != 0:
            last_col = args.n - 1
            for i in cutlass.range(cute.size(acc), unroll_full=True):
                col = cutlass.min(first_col + coord_c[i][1], last_col)
                acc[i] = acc[i] + Float32(bias[col])
        g_pieces = cute.zipped_divide(g_tile, self.epi_tile)
        t_sc_tma, t_gc_tma = cpasync.tma_partition(atom_c, 0, cute.make_layout(1), cute.group_modes(s_c, 0, 2),
                                                   g_pieces)
        grid_shape = g_pieces.shape[1]
        grid_layout = cute.make_layout(grid_shape, stride=(grid_shape[1], 1))
        piece_count = cute.size(g_pieces, mode=[1])
        share_pieces = piece_count // self.cluster_k
        # rounds of EPI_ROUND pieces, each into half of the ring: a round's stores read one half
        # while the next round writes the other (two named barriers a round, not a piece)
        per_round = EPI_ROUND if share_pieces % EPI_ROUND == 0 else 1
        for r in cutlass.range_constexpr(piece_count // per_round):
            if r * per_round // share_pieces == share:  # (a CTA-uniform test: always true without cluster_k)
                first = r * per_round - share * share_pieces  # (of this CTA's share)
                if is_store_warp:  # (this round's buffers: read by the round before the last)
                    cute.arch.cp_async_bulk_wait_group(launch.EPI_STAGES // per_round - 1, read=True)
                epi_barrier.arrive_and_wait()
                for j in cutlass.range_constexpr(per_round):
                    p = r * per_round + j
                    for v in cutlass.range_constexpr(cute.size(piece)):
                        piece[v] = acc_pieces[p * cute.size(piece) + v]
                    piece_out.store(piece.load().to(self.out_dtype))
                    cute.copy(store_r2s, piece_out, t_sc[(None, None, None, (pieces_done + first + j) % launch.EPI_STAGES)])
                # the generic-proxy writes must be visible to TMA before the stores read them
                cute.arch.fence_proxy("async.shared", space="cta")
                epi_barrier.arrive_and_wait()
                if is_store_warp:
                    for j in cutlass.range_constexpr(per_round):
                        cute.copy(atom_c, t_sc_tma[(None, (pieces_done + first + j) % launch.EPI_STAGES)],
                                  t_gc_tma[(None, grid_layout.get_hier_coord(r * per_round + j))])
                    cute.arch.cp_async_bulk_commit_group()
        return pieces_done + share_pieces


def row_major():
    from cutlass.tensor_utils import LayoutEnum

    return LayoutEnum.ROW_MAJOR
