"""The Hopper GEMM's grouped (segment) work (a mixin of :class:`cutefi.gemm.sm90_kernel.GemmSm90`):
each CTA counts the segments' tiles (``cutefi.cute.segments``), then its producer walks its
units and TMA-loads their tiles; the consumers decode the same units (``_segment_unit``).

Two forms. The row form (``swap`` off): a unit is an M tile of a segment's rows (A, from the
segment's first row) times an N tile of its weight (B, the weight's batch entry). The swapped
form, for experts of a few tokens (decode MoE): the weight is A (128 of its rows a tile, its
batch entry) and a segment's tokens are B (``tile_n`` of them a tile, from the segment's first
row), so a tile wastes no MMA rows and loads no 128-row slab of other experts' tokens; the
tile is stored transposed from registers, up to the segment's end (``_store_transposed``).
"""

from __future__ import annotations

import cutlass
import cutlass.cute as cute
import cutlass.pipeline as pipeline
from cutlass import Int32, const_expr

from cutefi.cute import segments, staged_scales


class Sm90Segments:
    """Needs ``tile_mnk``, ``stages``, ``swap``, ``staged_scales`` and the kernel's ``_a_tile``,
    ``_b_tile`` and ``_first_row``."""

    @cute.jit
    def _count_units(self, args, staged_prefix, thread, threads: cutlass.Constexpr[int]):
        """Every CTA: the tiles before each segment into ``staged_prefix`` (the caller syncs)."""
        tile_m, tile_n, _ = self.tile_mnk
        if const_expr(self.swap):  # (a segment's tokens in tile_n tiles, times the weight's row tiles)
            segments.count_prefix(args.seg_indptr, staged_prefix, args.groups, (args.m + tile_m - 1) // tile_m,
                                  tile_n, thread, threads)
        else:
            segments.count_prefix(args.seg_indptr, staged_prefix, args.groups, (args.n + tile_n - 1) // tile_n,
                                  tile_m, thread, threads)

    @cute.jit
    def _segment_unit(self, args, staged_prefix, linear: Int32):
        """(first row of A's tile, first row or token of the tile's segment part, the weight,
        the segment's end row) of unit ``linear``; the row form's A tile starts at its M tile of
        the segment, the swapped form's at its weight row tile (``_first_row``), its tokens at
        their tile of the segment. Returns (first_row, first_col_or_token, weight, end_row,
        n_tile) with ``n_tile`` the row form's N tile."""
        tile_m, tile_n, _ = self.tile_mnk
        if const_expr(self.swap):
            token_tile, row_tile, weight, seg_first, end_row = segments.find_unit(
                staged_prefix, args.seg_indptr, args.weight_indices, args.groups, tile_n, linear)
            return self._first_row(args, row_tile), seg_first + token_tile * tile_n, weight, end_row, Int32(0)
        m_tile, n_tile, weight, seg_first, end_row = segments.find_unit(
            staged_prefix, args.seg_indptr, args.weight_indices, args.groups, tile_m, linear)
        return seg_first + m_tile * tile_m, n_tile * tile_n, weight, end_row, n_tile

    @cute.jit
    def _produce_segments(self, args, ring, groups, first, stride, atom_b, t_sb, t_gb):
        """The row form: as ``_produce``, each unit's A tiles counted from its segment's first
        row and its B tiles from its weight."""
        staged_prefix, tma_a, atom_a, s_a, _ = groups
        tile_m, tile_n, tile_k = self.tile_mnk
        state = pipeline.make_pipeline_state(pipeline.PipelineUserType.Producer, self.stages)
        k_count = (args.k + tile_k - 1) // tile_k
        linear = first
        while linear < staged_prefix[args.groups]:
            m_tile, n_tile, weight, first_row, _ = segments.find_unit(
                staged_prefix, args.seg_indptr, args.weight_indices, args.groups, tile_m, linear)
            t_sa, t_ga = self._a_tile(atom_a, tma_a, s_a, first_row, (0, 0, 0))
            src_a = t_ga[(None, m_tile, None, 0)]
            src_b = t_gb[(None, n_tile, None, weight)]
            for k_step in cutlass.range(k_count, unroll=1):
                ring.producer_acquire(state)
                self._load_stage(ring, state, ring.producer_get_barrier(state), k_step, (atom_a, src_a, t_sa),
                                 (atom_b, src_b, t_sb))
                state.advance()
            linear += stride
        ring.producer_tail(state)

    @cute.jit
    def _produce_segments_swapped(self, args, ring, staged_prefix, first, stride, atom_a, tma_a, s_a, atom_b, tma_b,
                                  s_b, slots):
        """The swapped form: per unit, the weight's row tile (A, its batch entry) and the
        segment's token tile (B), with each K step's scales staged in the ring slot (the
        weight's, ``sb_batch`` apart a weight)."""
        _, _, tile_k = self.tile_mnk
        state = pipeline.make_pipeline_state(pipeline.PipelineUserType.Producer, self.stages)
        k_count = (args.k + tile_k - 1) // tile_k
        linear = first
        while linear < staged_prefix[args.groups]:
            first_row, first_token, weight, _, _ = self._segment_unit(args, staged_prefix, linear)
            t_sa, src_a = self._a_tile(atom_a, tma_a, s_a, first_row, (0, 0, 0))
            src_a = src_a[(None, 0, None, weight)]
            t_sb, src_b = self._b_tile(atom_b, tma_b, s_b, first_token, (0, 0, 0))
            src_b = src_b[(None, 0, None, 0)]
            for k_step in cutlass.range(k_count, unroll=1):
                ring.producer_acquire(state)
                full = ring.producer_get_barrier(state)
                staged_scales.stage(args, slots, state.index, full, first_row, first_token, self.tile_mnk[:2], k_step,
                                    cute.arch.lane_idx(), True, weight * args.sb_batch)
                self._load_stage(ring, state, full, k_step, (atom_a, src_a, t_sa), (atom_b, src_b, t_sb))
                state.advance()
            linear += stride
        ring.producer_tail(state)

    @cute.jit
    def _load_stage(self, ring, state, full, k_step: Int32, a: tuple, b: tuple):
        """K step ``k_step``'s A and B tiles (each ``(atom, global K tiles, ring tiles)``) into
        ring stage ``state`` on its full barrier ``full``, then the stage committed."""
        for atom, source, ring_tiles in (a, b):
            cute.copy(atom, source[(None, k_step)], ring_tiles[(None, state.index)], tma_bar_ptr=full)
        ring.producer_commit(state)
