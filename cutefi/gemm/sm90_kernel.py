"""Hopper (sm_90a) dense GEMM: TMA loads, wgmma, warp-specialised and persistent, in CuTe DSL.

ABI, configurations and launch: ``launch.py`` (``sm90_contract``). A CTA has three warpgroups:

  0. producer: after giving registers back, one warp walks this CTA's tiles and, per K step,
     waits for a free ring slot and TMA-loads the A and B tiles into it (B multicast to the
     cluster's CTAs when ``cluster_m`` is 2: they share the N tile, so each loads half; A
     multicast when ``cluster_n`` is 2: they share the M tile); a swapped build streaming a
     weight (``launch.streams_weight``) starts each weight tile's K steps at its own step
     (``k_rotation``) and loads the weight under an L2 cache policy, both given at launch; a
     slot of the 16-bit swapped 64-row builds holds two K tiles (``pair``: half the ring's
     waits and bookkeeping a byte), an odd count's last one loaded from past K's end, which
     TMA fills with zeros;
  1-2. consumers: each owns 64 rows of the 128-row tile and, per K
     step, waits for the slot to fill, issues the wgmmas on it and frees the slot of the step
     before once those wgmmas are done (one step of MMAs stays in flight; both loops are
     unrolled 4 times);
  then the epilogue: bias added to the fp32 accumulators, converted to the output dtype,
  written to shared memory with stmatrix in pieces 64 bytes wide (``launch.epi_tile_n``) and
  stored by TMA from a ring of ``EPI_STAGES`` buffers (one consumer warp issues the stores).

Tiles are taken in :class:`~cutefi.cute.tile_scheduler.GroupedRaster` order, clusters
``gridDim.x / cluster size`` apart. Where M or N is not a multiple of the tile, the last tile
moves back to end on the last row or column (rows it shares with the tile before are computed
and stored twice, with the same bits): a TMA box that crosses the tensor's end loads slowly.
Only below one tile, and in K, do boxes cross the end: TMA zero-fills them on load and drops
them on store.

Split-K: the last split of a tile to arrive sums the partials through the workspace
(:mod:`cutefi.cute.split_k`), or, in the ``cluster_k`` builds, the two CTAs of a cluster sum
each other's halves through distributed shared memory (:mod:`cutefi.cute.cluster_split_k`).
FP8 builds (e4m3/e5m2, K-major operands) take 128-element K stages and multiply the fp32
sums by the two per-tensor scales at the store; the ``block_scaled`` ones (DeepSeek-style
scales, :mod:`cutefi.cute.block_scale`) instead sum each K stage into a scratch set (a
256-wide tile 128 columns at a time) and add it into the accumulators times that stage's
scales, which the producer stages in the ring where the build has a slot for them
(:mod:`cutefi.cute.staged_scales`).
"""

from __future__ import annotations

import cutlass
import cutlass.cute as cute
import cutlass.pipeline as pipeline
import cutlass.utils.hopper_helpers as sm90_utils
from cutlass import Float32, Int32, const_expr
from cutlass.cute.nvgpu import cpasync, warpgroup

from cutefi.cute import args as kernel_args
from cutefi.cute import block_scale, cluster_split_k, split_k, staged_scales
from cutefi.cute.args import KernelArgs
from cutefi.cute.dtypes import cute_dtype
from cutefi.cute.pdl import wait_for_inputs
from cutefi.cute.tile_scheduler import GroupedRaster
from cutefi.gemm import launch
from cutefi.gemm.sm90_segments import Sm90Segments
from cutefi.gemm.sm90_stores import CONSUMER_THREADS, Sm90Stores, row_major

PRODUCER_REGS = 40
CONSUMER_REGS = 232
EPILOGUE_BARRIER = 1  # named barrier of the two consumer warpgroups (0 is __syncthreads)


class GemmSm90(Sm90Stores, Sm90Segments):
    # ------------------------------------------------------------------ #
    # 1. specialisation
    # ------------------------------------------------------------------ #
    def __init__(self, dtype: str, out_dtype: str, b_major: str, tile_m: int, tile_n: int, cluster_m: int,
                 swap: bool = False, cluster_k: int = 1, block_scaled: bool = False, grouped: bool = False,
                 cluster_n: int = 1, b_dtype: str | None = None) -> None:
        fp8 = dtype in launch.FP8_DTYPES
        outs = launch.DENSE_OUT_DTYPES if dtype in launch.DTYPES and not grouped else launch.OUT_DTYPES
        if (dtype not in launch.DTYPES and not fp8) or out_dtype not in outs \
                or b_major not in launch.B_MAJORS or (fp8 and b_major != "k") \
                or (b_dtype is not None and (not fp8 or b_dtype not in launch.FP8_DTYPES)):
            raise ValueError(f"unsupported sm90 GEMM build: {dtype} x {b_dtype or dtype} -> {out_dtype}, "
                             f"B {b_major}-major")
        # (out = scale_a * scale_b * A @ B, applied to the fp32 sums at the store; the sums are
        # the FP8 wgmmas' own, like cuBLAS's fast-accumulation mode: no promotion into a second
        # fp32 set yet, so the error grows with K: 3.3e-3 relative at K = 14336 against cuBLAS's
        # promoted 1.7e-3)
        # block_scaled: the scales of each 128-element K block multiply that block's sums as
        # they are promoted into the fp32 accumulators (block_scale.promote)
        self.block_scaled = block_scaled
        # (builds whose consumers load the block scales run their loop two K steps an iteration
        # where the tile is one slice, block_scale.main_loop; the others read them from the ring,
        # staged_scales)
        self.paired_steps = block_scaled and block_scale.slice_width(tile_n) == tile_n and not swap
        self.scaled = fp8 and not block_scaled
        self.contract = launch.sm90_contract(dtype, out_dtype, b_major, tile_m, tile_n, cluster_m, swap, cluster_k,
                                             block_scaled, grouped, cluster_n, b_dtype)
        # grouped: row segments of A, each times its own weight (cutefi.cute.segments); a tile
        # that crosses its segment's end is stored from registers (it must not write the next
        # segment's rows), the others through the staged TMA-store epilogue
        self.grouped = grouped
        self.staged_out = not swap
        config = launch.Sm90Config(tile_m, tile_n, cluster_m, swap, cluster_k, cluster_n)
        self.cluster_k = cluster_k
        self.exchange_elems = max(config.exchange_elems, 4)
        # swap: A is the weight, B the tokens, and the tile is stored transposed (``launch``)
        self.swap = swap
        # (streaming a weight: its loads take args.weight_policy, the K steps args.k_rotation)
        self.streams_weight = launch.streams_weight(config, block_scaled, grouped)
        self.dtype = cute_dtype(dtype)
        # B's element type: A's, or the other FP8 format (mixed e4m3 x e5m2: the same bytes)
        self.b_dtype = cute_dtype(b_dtype) if b_dtype else self.dtype
        self.out_dtype = cute_dtype(out_dtype)
        self.b_k_major = b_major == "k"
        self.tile_mnk = (tile_m, tile_n, launch.tile_k(dtype))
        self.cluster_m = cluster_m
        self.cluster_n = cluster_n
        self.multicast = cluster_m * cluster_n  # CTAs that share a tile's A or B loads
        # (the block-scaled builds Sm90Config.scale_slot gives a slot: each ring stage also
        # carries its K step's scales, staged by the producer)
        self.scale_slot = config.scale_slot(block_scaled, grouped, out_dtype)
        self.staged_scales = self.scale_slot > 0
        self.stages = config.stages(dtype, out_dtype, grouped, block_scaled)
        self.pair = config.k_tiles_a_stage(dtype, block_scaled, grouped)  # (K tiles a ring stage)
        self.epi_tile = (tile_m, launch.epi_tile_n(out_dtype))

    def _tiled_mma(self, width: int | None = None):
        """The wgmma of the tile (``width``: of a column slice of it): the two consumer
        warpgroups take 64 rows each, or, in a 64-row tile, half the columns each."""
        b_mode = cute.nvgpu.OperandMajorMode.K if self.b_k_major else cute.nvgpu.OperandMajorMode.MN
        width = width or self.tile_mnk[1]
        atoms, tiler = ((2, 1, 1), (64, width)) if self.tile_mnk[0] == 128 else ((1, 2, 1), (64, width // 2))
        return sm90_utils.make_trivial_tiled_mma(
            self.dtype, self.b_dtype, cute.nvgpu.OperandMajorMode.K, b_mode, Float32, atoms, tiler_mn=tiler)

    def _block_operands(self, thread, s_a, s_b):
        """Block scales: (MMA that overwrites, MMA that adds), A's fragment, B's fragments of the
        tile's slices, and the scratch set a slice's sums land in (a 256-wide tile: two
        128-column slices, one weight block each, so the final sums and the scratch fit the
        registers; the narrower tiles one slice)."""
        tile_m, tile_n, tile_k = self.tile_mnk
        width = block_scale.slice_width(tile_n)
        mmas = (self._tiled_mma(width), self._tiled_mma(width))
        mmas[0].set(warpgroup.Field.ACCUMULATE, False)
        mmas[1].set(warpgroup.Field.ACCUMULATE, True)
        thr = mmas[0].get_slice(thread // launch.WARPGROUP * launch.WARPGROUP)
        frag_a = mmas[0].make_fragment_A(thr.partition_A(s_a))
        frag_bs = [mmas[0].make_fragment_B(thr.partition_B(
            cute.local_tile(s_b, (width, tile_k, self.stages), (part, 0, 0)))) for part in range(tile_n // width)]
        scratch = cute.make_rmem_tensor(thr.partition_shape_C((tile_m, width)), Float32)
        return mmas, frag_a, frag_bs, scratch

    def _staged(self, kind, dtype, shape, stages: int, order):
        atom = warpgroup.make_smem_layout_atom(kind, dtype)
        return cute.tile_to_shape(atom, (*shape, stages), order=order)

    def _smem_layouts(self):
        """(A, B, C) staged swizzled layouts: A (tile_m, 64, slots) K-major; B (tile_n, 64,
        slots) K- or N-major (``pair`` K-tile slots a ring stage); C (epi rows, 64 bytes of
        columns, EPI_STAGES) N-major."""
        tile_m, tile_n, tile_k = self.tile_mnk
        slots = self.stages * self.pair  # (a stage's K tiles are slots pair * stage + j)
        a = self._staged(warpgroup.SmemLayoutAtomKind.K_SW128, self.dtype, (tile_m, tile_k), slots, (0, 1, 2))
        if const_expr(self.b_k_major):
            b = self._staged(warpgroup.SmemLayoutAtomKind.K_SW128, self.b_dtype, (tile_n, tile_k), slots,
                             (0, 1, 2))
        else:
            b = self._staged(warpgroup.SmemLayoutAtomKind.MN_SW128, self.dtype, (tile_n, tile_k), slots,
                             (1, 0, 2))
        if const_expr(not self.staged_out):
            return a, b, None
        c_kind = sm90_utils.get_smem_layout_atom(row_major(), self.out_dtype, self.epi_tile[1])
        c = self._staged(c_kind, self.out_dtype, self.epi_tile, launch.EPI_STAGES, (0, 1, 2))
        return a, b, c

    # ------------------------------------------------------------------ #
    # 2. host side: TMA atoms over the (M, K, L) / (N, K, L) / (M, N, L) views
    # ------------------------------------------------------------------ #
    @cute.jit
    def __call__(self, args: KernelArgs):
        a_smem, b_smem, c_smem = self._smem_layouts()
        tile_m, tile_n, tile_k = self.tile_mnk
        a = _mode_order(args.a, (1, 2, 0))                      # [L, M, K] -> (M, K, L)
        b = _mode_order(args.b, (1, 2, 0) if const_expr(self.b_k_major) else (2, 1, 0))  # -> (N, K, L)
        a_op = cpasync.CopyBulkTensorTileG2SMulticastOp() if const_expr(self.cluster_n > 1) \
            else cpasync.CopyBulkTensorTileG2SOp()
        atom_a, tma_a = cpasync.make_tiled_tma_atom(
            a_op, a, cute.slice_(a_smem, (None, None, 0)), (tile_m, tile_k), num_multicast=self.cluster_n)
        b_op = cpasync.CopyBulkTensorTileG2SMulticastOp() if const_expr(self.cluster_m > 1) \
            else cpasync.CopyBulkTensorTileG2SOp()
        atom_b, tma_b = cpasync.make_tiled_tma_atom(
            b_op, b, cute.slice_(b_smem, (None, None, 0)), (tile_n, tile_k), num_multicast=self.cluster_m)
        if const_expr(not self.staged_out):
            kernel_args.launch(self.kernel, self.contract, args, args.replace(a=(atom_a, tma_a), b=(atom_b, tma_b)))
        else:
            c = _mode_order(args.c, (1, 2, 0))                      # [L, M, N] -> (M, N, L)
            atom_c, tma_c = cpasync.make_tiled_tma_atom(
                cpasync.CopyBulkTensorTileS2GOp(), c, cute.slice_(c_smem, (None, None, 0)), self.epi_tile)
            kernel_args.launch(self.kernel, self.contract, args,
                               args.replace(a=(atom_a, tma_a), b=(atom_b, tma_b), c=(atom_c, tma_c)))

    # ------------------------------------------------------------------ #
    # 3. the kernel: setup, then the producer or a consumer
    # ------------------------------------------------------------------ #
    @cute.kernel
    def kernel(self, args: KernelArgs):
        atom_a, tma_a = args.a
        atom_b, tma_b = args.b
        a_smem, b_smem, c_smem = self._smem_layouts()
        atom_c = tma_c = None
        if const_expr(self.staged_out):
            atom_c, tma_c = args.c
        tile_m, tile_n, tile_k = self.tile_mnk
        tidx, _, _ = cute.arch.thread_idx()
        warp_idx = cute.arch.make_warp_uniform(cute.arch.warp_idx())
        if warp_idx == 0:
            cpasync.prefetch_descriptor(atom_a)
            cpasync.prefetch_descriptor(atom_b)
            if const_expr(self.staged_out):
                cpasync.prefetch_descriptor(atom_c)
        c_elems = cute.cosize(c_smem) if const_expr(self.staged_out) else 8  # (swap: none staged)

        @cute.struct
        class SharedStorage:
            ring_barriers: cute.struct.MemRange[cutlass.Int64, self.stages * 2]
            exchange_full: cute.struct.MemRange[cutlass.Int64, 1]  # cluster split-K: peers' partials landed
            last_split: cute.struct.MemRange[Int32, 1]  # split-K: "this CTA sums the tile"
            prefix: cute.struct.MemRange[Int32, launch.MAX_GROUPS + 1 if self.grouped else 1]  # grouped: units
            exchange: cute.struct.Align[cute.struct.MemRange[Float32, self.exchange_elems], 16]
            # (before the tiles, which start on the next 1 KiB boundary: the contract counts
            # this head per stage count, launch.Sm90Config.head_bytes)
            scales: cute.struct.Align[cute.struct.MemRange[Float32, max(1, self.stages * self.scale_slot)], 16]
            s_a: cute.struct.Align[cute.struct.MemRange[self.dtype, cute.cosize(a_smem)], 1024]
            s_b: cute.struct.Align[cute.struct.MemRange[self.b_dtype, cute.cosize(b_smem)], 1024]
            s_c: cute.struct.Align[cute.struct.MemRange[self.out_dtype, c_elems], 1024]

        storage = cutlass.memory.SmemAllocator().allocate(SharedStorage)
        s_a = storage.s_a.get_tensor(a_smem.outer, swizzle=a_smem.inner)
        s_b = storage.s_b.get_tensor(b_smem.outer, swizzle=b_smem.inner)
        s_c = storage.s_c.get_tensor(c_smem.outer, swizzle=c_smem.inner) if const_expr(self.staged_out) else None
        staged_prefix = storage.prefix.get_tensor(cute.make_layout(launch.MAX_GROUPS + 1 if self.grouped else 1))
        slots = storage.scales.get_tensor(cute.make_layout((self.scale_slot, self.stages))) \
            if const_expr(self.staged_scales) else None

        # ---- the ring: full barriers (TMA bytes landed), empty barriers (consumers done) ----
        cluster_layout = cute.make_layout((self.cluster_m, self.cluster_n, 1))
        rank = cute.arch.make_warp_uniform(cute.arch.block_idx_in_cluster())
        # (cluster_k: the cluster's CTAs are the K splits of one tile; rank is the split)
        cluster_coord = cluster_layout.get_flat_coord(rank % self.multicast)
        exchange_full = storage.exchange_full.data_ptr()
        if const_expr(self.cluster_k > 1):
            if tidx == 0:
                cute.arch.mbarrier_init(exchange_full, 1)
        stage_bytes = (cute.size_in_bytes(self.dtype, cute.slice_(a_smem, (None, None, 0)))
                       + cute.size_in_bytes(self.b_dtype, cute.slice_(b_smem, (None, None, 0)))) * self.pair
        # every consumer warp of each CTA that reads a slot releases it in every CTA that
        # wrote into it (the multicast peers)
        ring = pipeline.PipelineTmaAsync.create(
            barrier_storage=storage.ring_barriers.data_ptr(), num_stages=self.stages,
            producer_group=pipeline.CooperativeGroup(
                pipeline.Agent.Thread, staged_scales.PRODUCER_ARRIVALS if const_expr(self.staged_scales) else 1),
            consumer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread,
                                                     self.multicast * CONSUMER_THREADS // 32),
            tx_count=stage_bytes, cta_layout_vmnk=cute.make_layout((1, self.cluster_m, self.cluster_n, 1)),
            defer_sync=True)
        # (the whole cluster: cluster_k peers write into each other's exchange buffers)
        pipeline.pipeline_init_arrive(cluster_shape_mn=(self.multicast * self.cluster_k, 1), is_relaxed=True)

        # ---- this CTA's view of the tiles (A's: per tile, from its first row) ----------------
        g_b = cute.local_tile(tma_b, (tile_n, tile_k), (None, None, None))   # (bN, bK, tiles N, K, L)
        t_sb, t_gb = cpasync.tma_partition(atom_b, cluster_coord[0], cute.make_layout(self.cluster_m),
                                           cute.group_modes(s_b, 0, 2), cute.group_modes(g_b, 0, 2))

        raster = GroupedRaster(launch_tiles(args.m, tile_m, self.cluster_m),
                               launch_tiles(args.n, tile_n, self.cluster_n),
                               args.batch, args.group_m, args.splits, (args.k + tile_k - 1) // tile_k)
        first = cute.arch.block_idx()[0] // self.multicast
        stride = cute.arch.grid_dim()[0] // self.multicast

        pipeline.pipeline_init_wait(cluster_shape_mn=(self.multicast * self.cluster_k, 1))
        wait_for_inputs()
        if const_expr(self.grouped):  # (after the wait: the bounds are the last kernel's output)
            self._count_units(args, staged_prefix, tidx, launch.SM90_THREADS)
            cute.arch.sync_threads()
        # grouped: what a unit's A tiles and segment come from
        groups = (staged_prefix, tma_a, atom_a, s_a, tma_c) if const_expr(self.grouped) else None
        warpgroup_idx = cute.arch.make_warp_uniform(tidx // launch.WARPGROUP)
        exchange = (storage.exchange.data_ptr(), exchange_full, rank)
        if warpgroup_idx == 0:
            cute.arch.setmaxregister_decrease(PRODUCER_REGS)
            if warp_idx == 0:
                if const_expr(self.grouped and self.swap):
                    self._produce_segments_swapped(args, ring, staged_prefix, first, stride, atom_a, tma_a, s_a,
                                                   atom_b, tma_b, s_b, slots)
                elif const_expr(self.grouped):
                    self._produce_segments(args, ring, groups, first, stride, atom_b, t_sb, t_gb)
                else:
                    self._produce(args, ring, raster, first, stride, cluster_coord, atom_a, tma_a, s_a, atom_b,
                                  tma_b, s_b, slots)
        else:
            cute.arch.setmaxregister_increase(CONSUMER_REGS)
            self._consume(args, ring, raster, first, stride, cluster_coord, tidx - launch.WARPGROUP,
                          warp_idx, s_a, s_b, s_c, tma_c, atom_c, storage.last_split.get_tensor(cute.make_layout(1)),
                          exchange, groups, slots)

    # ------------------------------------------------------------------ #
    # 4. producer: TMA loads into the ring
    # ------------------------------------------------------------------ #
    @cute.jit
    def _produce(self, args, ring, raster, first, stride, cluster_coord, atom_a, tma_a, s_a, atom_b, tma_b, s_b,
                 slots):
        a_mask = b_mask = 0
        cluster_layout = cute.make_layout((self.cluster_m, self.cluster_n, 1))
        if const_expr(self.cluster_m > 1):  # (B to the CTAs of the same N tile)
            b_mask = cute.make_layout_image_mask(cluster_layout, cluster_coord, mode=0)
        if const_expr(self.cluster_n > 1):  # (A to the CTAs of the same M tile)
            a_mask = cute.make_layout_image_mask(cluster_layout, cluster_coord, mode=1)
        state = pipeline.make_pipeline_state(pipeline.PipelineUserType.Producer, self.stages)
        linear = first
        while linear < raster.units:
            m_tile, n_tile, batch, _, _, k_begin, k_count = raster.unit(linear)
            m_tile = m_tile * self.cluster_m + cluster_coord[0]
            n_tile = n_tile * self.cluster_n + cluster_coord[1]
            first_row, first_col = self._first_row(args, m_tile), self._first_col(args, n_tile)
            t_sa, src_a = self._a_tile(atom_a, tma_a, s_a, first_row, cluster_coord)
            src_a = src_a[(None, 0, None, batch)]
            t_sb, src_b = self._b_tile(atom_b, tma_b, s_b, first_col, cluster_coord)
            src_b = src_b[(None, 0, None, batch)]
            stage_count = (k_count + self.pair - 1) // self.pair
            first_stage = self._first_stage(args, m_tile, stage_count)
            past_k = (args.k + self.tile_mnk[2] - 1) // self.tile_mnk[2] - k_begin  # (the first tile past K)
            for s_iter in cutlass.range(stage_count, unroll=4):  # (as the consumers' loop)
                s_step = self._rotated(s_iter, first_stage, stage_count)
                ring.producer_acquire(state)
                full = ring.producer_get_barrier(state)
                for j in cutlass.range_constexpr(self.pair):
                    k_step = s_step * self.pair + j
                    if const_expr(j > 0):
                        # (an odd count's last stage: its second tile from past K's end, which
                        # TMA fills with zeros, so the consumers' wgmmas add nothing)
                        if k_step >= k_count:
                            k_step = past_k
                    slot = state.index * self.pair + j
                    if const_expr(self.staged_scales):  # (the stage's full barrier waits for both)
                        staged_scales.stage(args, slots, state.index, full, first_row, first_col,
                                            self.tile_mnk[:2], k_begin + k_step, cute.arch.lane_idx(), self.swap)
                    if const_expr(self.streams_weight):
                        cute.copy(atom_a, src_a[(None, k_begin + k_step)], t_sa[(None, slot)], tma_bar_ptr=full,
                                  mcast_mask=a_mask, cache_policy=args.weight_policy)
                    else:
                        cute.copy(atom_a, src_a[(None, k_begin + k_step)], t_sa[(None, slot)], tma_bar_ptr=full,
                                  mcast_mask=a_mask)
                    cute.copy(atom_b, src_b[(None, k_begin + k_step)], t_sb[(None, slot)], tma_bar_ptr=full,
                              mcast_mask=b_mask)
                ring.producer_commit(state)
                state.advance()
            linear += stride
        ring.producer_tail(state)

    @cute.jit
    def _first_stage(self, args, m_tile, stage_count) -> Int32:
        """The ring stage a weight tile starts from: (tile * k_rotation) mod stages where the
        build streams a weight (in lockstep, the CTAs' loads fall on addresses a multiple of
        the tile's rows apart; the cluster_n CTAs share m_tile: the same steps), else 0."""
        first = Int32(0)
        if const_expr(self.streams_weight):
            first = (m_tile * args.k_rotation) % cutlass.max(stage_count, 1)
        return first

    @cute.jit
    def _rotated(self, s_iter, first_stage, stage_count) -> Int32:
        """The stage of K tiles that iteration ``s_iter`` of a tile's loop holds."""
        s_step = s_iter
        if const_expr(self.streams_weight):
            s_step = s_iter + first_stage
            if s_step >= stage_count:
                s_step = s_step - stage_count
        return s_step

    @cute.jit
    def _first_row(self, args, m_tile) -> Int32:
        """First row of M tile ``m_tile``; the last tile, when M is not a multiple of the tile,
        moves back to end on row M (from one tile of rows on): a TMA box that crosses the
        tensor's end loads slowly (its zero fill: 128 x 128 tiles at 160 x 8192 x 8192 took 81
        against 55 µs with the rows padded to 256 on an H100, 51 moved back). The rows it shares
        with the tile before are computed twice, from the same inputs in the same order, and
        stored twice with the same bits."""
        first_row = m_tile * self.tile_mnk[0]
        if args.m > self.tile_mnk[0]:
            first_row = cutlass.min(first_row, args.m - self.tile_mnk[0])
        return first_row

    @cute.jit
    def _first_col(self, args, n_tile) -> Int32:
        """First column of N tile ``n_tile``, the last tile moved back to end on column N as
        ``_first_row`` does for rows (not in block-scaled builds: a tile's columns stay inside
        one 128-column weight block)."""
        first_col = n_tile * self.tile_mnk[1]
        if const_expr(not self.block_scaled):
            if args.n > self.tile_mnk[1]:
                first_col = cutlass.min(first_col, args.n - self.tile_mnk[1])
        return first_col

    def _b_tile(self, atom_b, tma_b, s_b, first_col, cluster_coord):
        """(shared-memory ring, global K tiles) of the B tile from ``first_col`` (this CTA's share
        of it in a ``cluster_m`` multicast)."""
        _, tile_n, tile_k = self.tile_mnk
        g_b = cute.local_tile(cute.domain_offset((first_col, 0, 0), tma_b), (tile_n, tile_k), (None, None, None))
        return cpasync.tma_partition(atom_b, cluster_coord[0], cute.make_layout(self.cluster_m),
                                     cute.group_modes(s_b, 0, 2), cute.group_modes(g_b, 0, 2))

    def _a_tile(self, atom_a, tma_a, s_a, first_row, cluster_coord):
        """(shared-memory ring, global K tiles) of the A tile from ``first_row`` (this CTA's share
        of it in a ``cluster_n`` multicast)."""
        tile_m, _, tile_k = self.tile_mnk
        g_a = cute.local_tile(cute.domain_offset((first_row, 0, 0), tma_a), (tile_m, tile_k), (None, None, None))
        return cpasync.tma_partition(atom_a, cluster_coord[1], cute.make_layout(self.cluster_n),
                                     cute.group_modes(s_a, 0, 2), cute.group_modes(g_a, 0, 2))

    # ------------------------------------------------------------------ #
    # 5. consumers: wgmma over the ring, then the epilogue
    # ------------------------------------------------------------------ #
    @cute.jit
    def _consume(self, args, ring, raster, first, stride, cluster_coord, thread, warp_idx, s_a, s_b, s_c,
                 tma_c, atom_c, last_split, exchange, groups, slots):
        tile_m, tile_n, _ = self.tile_mnk
        tiled_mma = self._tiled_mma()
        thr_mma = tiled_mma.get_slice(thread // launch.WARPGROUP * launch.WARPGROUP)
        frag_a = tiled_mma.make_fragment_A(thr_mma.partition_A(s_a))
        frag_b = tiled_mma.make_fragment_B(thr_mma.partition_B(s_b))
        # one accumulator set: a K step's wgmmas chain into it inside the tensor pipe (several
        # sets, one per wgmma, made ptxas wait for each wgmma before issuing the next)
        acc = cute.make_rmem_tensor(thr_mma.partition_shape_C((tile_m, tile_n)), Float32)
        # (the wgmma operands are partitioned per warpgroup; the accumulators per thread)
        coord_c = tiled_mma.get_slice(thread).partition_C(cute.make_identity_tensor((tile_m, tile_n)))
        # (swap: the bias runs along the weight's rows, A's)
        bias = cute.make_tensor(args.bias, cute.make_layout(cutlass.max(args.m if const_expr(self.swap) else args.n, 1)))
        epi_barrier = pipeline.NamedBarrier(barrier_id=EPILOGUE_BARRIER, num_threads=CONSUMER_THREADS)
        block = self._block_operands(thread, s_a, s_b) if const_expr(self.block_scaled) else None
        if const_expr(not self.staged_out):
            self._consume_tiles(args, ring, raster, first, stride, cluster_coord, thread, tiled_mma, frag_a, frag_b,
                                acc, coord_c, bias, epi_barrier, last_split, exchange, None, block, groups, slots)
        else:
            self._consume_tiles(args, ring, raster, first, stride, cluster_coord, thread, tiled_mma, frag_a, frag_b,
                                acc, coord_c, bias, epi_barrier, last_split, exchange,
                                self._store_ring(thread, tiled_mma, warp_idx, s_c, tma_c, atom_c, acc), block, groups,
                                slots)

    @cute.jit
    def _consume_tiles(self, args, ring, raster, first, stride, cluster_coord, thread, tiled_mma, frag_a, frag_b,
                       acc, coord_c, bias, epi_barrier, last_split, exchange, store_ring, block, groups, slots):
        tile_m, tile_n, tile_k = self.tile_mnk
        # (cluster_k: the accumulators in the order the store takes them, cut into cluster_k shares)
        shares = store_ring[4] if const_expr(self.staged_out) else acc
        exchanges = Int32(0)
        k_blocks = cute.size(frag_a, mode=[2])
        read = pipeline.make_pipeline_state(pipeline.PipelineUserType.Consumer, self.stages)
        release = pipeline.make_pipeline_state(pipeline.PipelineUserType.Consumer, self.stages)
        pieces_done = Int32(0)
        units = groups[0][args.groups] if const_expr(self.grouped) else raster.units
        linear = first
        while linear < units:
            if const_expr(self.grouped):  # (swapped: end_row bounds the tokens, first_col the first)
                first_row, first_col, batch, end_row, n_tile = self._segment_unit(args, groups[0], linear)
                # (bounds past out's rows are not written)
                end_row = cutlass.min(end_row, args.n if const_expr(self.swap) else args.m)
                tile, split, k_begin, k_count = linear, Int32(0), Int32(0), (args.k + tile_k - 1) // tile_k
            else:
                m_tile, n_tile, batch, tile, split, k_begin, k_count = raster.unit(linear)
                end_row = args.n if const_expr(self.swap) else args.m
                m_tile = m_tile * self.cluster_m + cluster_coord[0]
                n_tile = n_tile * self.cluster_n + cluster_coord[1]
                first_row = self._first_row(args, m_tile)
                first_col = self._first_col(args, n_tile)

            if const_expr(self.block_scaled):
                # ---- main loop, block scales (block_scale.main_loop): a K step's sums into a
                # scratch set, then promoted into acc times their scales
                # (a K step's first wgmma overwrites the scratch set, the others add: two MMA
                # objects set once, not one flipped inside the loops, and no zero-fill whose
                # moves the compiler could sink past the wgmma fence and so serialise every wgmma)
                if const_expr(self.staged_scales and self.swap):  # (per-column token scales, per-row weight scales)
                    read, release = staged_scales.main_loop(ring, read, release, block, acc, slots,
                                                            staged_scales.offsets(args, first_row, coord_c), k_count,
                                                            tile_n)
                elif const_expr(self.staged_scales):  # (per-row token scales, per-column-block weight scales)
                    read, release = staged_scales.rows_main_loop(ring, read, release, block, acc, slots,
                                                                 staged_scales.row_slots(coord_c), k_count, first_col)
                else:  # (192/128/64-wide and grouped tiles: the scales loaded by the consumers)
                    offsets = block_scale.tile_offsets(args, first_row, first_col, coord_c,
                                                       batch if const_expr(self.grouped) else None)
                    read, release = block_scale.main_loop(args, ring, read, release, block, acc, offsets, k_begin,
                                                          k_count, self.paired_steps, first_col)
            else:
                # ---- main loop: one K step of wgmmas in flight ----------------------------
                acc.fill(0.0)
                tiled_mma.set(warpgroup.Field.ACCUMULATE, True)
                warpgroup.fence()
                # (unrolled 4: the ring's bookkeeping between a step's wgmmas is most of a
                # narrow tile's step; a few tokens on an L2-held weight gain 2-5%, H200)
                for k_step in cutlass.range((k_count + self.pair - 1) // self.pair, unroll=4):
                    ring.consumer_wait(read)
                    for j in cutlass.range_constexpr(self.pair):
                        for k_block in cutlass.range_constexpr(k_blocks):
                            slot = (None, None, k_block, read.index * self.pair + j)
                            cute.gemm(tiled_mma, acc, frag_a[slot], frag_b[slot], acc)
                    warpgroup.commit_group()
                    warpgroup.wait_group(1)
                    if k_step > 0:
                        ring.consumer_release(release)
                        release.advance()
                    read.advance()
                warpgroup.wait_group(0)
                if k_count > 0:
                    ring.consumer_release(release)
                    release.advance()

            # ---- split-K: the last split of a tile to finish sums the others' partials ----
            # (cluster_k: every CTA of the cluster sums and stores its share of the tile)
            store = cutlass.Boolean(True)
            share = Int32(0)
            if const_expr(self.cluster_k > 1):
                share = exchange[2]
                cluster_split_k.meet(shares, thread, exchange, self.cluster_k, CONSUMER_THREADS, exchanges)
                exchanges += 1
                if args.splits > self.cluster_k:  # (several clusters a tile: their shares meet in the workspace)
                    store = cluster_split_k.meet_groups(
                        shares, thread, share, self.cluster_k, CONSUMER_THREADS, args.workspace, args.counters, tile,
                        args.splits // self.cluster_k, split // self.cluster_k, last_split, epi_barrier)
            elif args.splits > 1:
                store = self._meet_splits(args, acc, thread, epi_barrier, last_split, tile, split)
            if store:
                if const_expr(self.scaled):  # (FP8: the per-tensor scales, on the fp32 sums)
                    scale_a = cute.make_tensor(args.scale_a, cute.make_layout(1))
                    scale_b = cute.make_tensor(args.scale_b, cute.make_layout(1))
                    acc.store(acc.load() * (scale_a[0] * scale_b[0]))
                if const_expr(self.swap):
                    self._store_transposed(args, acc, coord_c, bias, first_row, first_col, share, end_row)
                elif const_expr(self.grouped):
                    if first_row + tile_m > end_row:  # (crosses its segment's end: row by row)
                        self._store_rows(args, acc, coord_c, first_row, end_row, n_tile * tile_n)
                    else:  # (a whole tile inside its segment, from its first row)
                        g_tile = cute.local_tile(cute.domain_offset((first_row, 0, 0), groups[4]), (tile_m, tile_n),
                                                 (None, None, None))[(None, None, 0, n_tile, 0)]
                        pieces_done = self._epilogue(args, acc, coord_c, bias, n_tile * tile_n, g_tile, store_ring,
                                                     epi_barrier, pieces_done, share)
                else:
                    g_tile = cute.local_tile(cute.domain_offset((first_row, first_col, 0), store_ring[0]),
                                             (tile_m, tile_n), (None, None, None))[(None, None, 0, 0, batch)]
                    pieces_done = self._epilogue(args, acc, coord_c, bias, first_col, g_tile, store_ring,
                                                 epi_barrier, pieces_done, share)
            linear += stride
        if const_expr(self.staged_out):
            store_ring[8].producer_tail()

    @cute.jit
    def _meet_splits(self, args, acc, thread, epi_barrier, last_split, tile, split) -> cutlass.Boolean:
        """Write this split's partial tile to the workspace, count it in the tile's counter; the
        split that counts last sums all the partials into its accumulators (in split order, its
        own too: the result does not depend on which split arrives last), resets the counter
        and returns True (it stores the tile).

        Partials move as 16-byte vectors, consecutive threads 16 bytes apart, every row (a row
        predicate would split the vectors): scalar per-element loads kept only a few in flight
        and cost several µs a split."""
        vecs = cute.size(acc) // 4
        mine = self._partial(args, tile, split, vecs)
        acc_v = cute.make_tensor(acc.iterator, cute.make_layout((4, vecs)))
        for v in cutlass.range_constexpr(vecs):
            cute.autovec_copy(acc_v[None, v], mine[None, v, thread])
        last = split_k.arrive_last(args.counters + tile, args.splits, last_split, thread == 0, epi_barrier)
        if last:
            acc.fill(0.0)
            staged = cute.make_rmem_tensor(cute.make_layout((4, vecs)), Float32)
            for which in cutlass.range(args.splits, unroll=1):
                theirs = self._partial(args, tile, which, vecs)
                for v in cutlass.range_constexpr(vecs):
                    cute.autovec_copy(theirs[None, v, thread], staged[None, v])
                acc.store(acc.load() + staged.load().reshape(acc.shape))
            if thread == 0:
                split_k.reset_counter(args.counters + tile)
        # (thread 0 rewrites the flag only after the next unit's first barrier: no barrier here)
        return last

    @staticmethod
    def _partial(args, tile, split, vecs: int) -> cute.Tensor:
        """The workspace slot of one split of one tile: fp32 (4, vector, consumer thread)."""
        elems = 4 * vecs * CONSUMER_THREADS
        offset = cute.assume((cutlass.Int64(tile) * args.splits + split) * elems, divby=4 * CONSUMER_THREADS)
        return cute.make_tensor(args.workspace + offset,
                                cute.make_layout((4, vecs, CONSUMER_THREADS), stride=(1, 4 * CONSUMER_THREADS, 4)))


def launch_tiles(size, tile: int, cluster: int):
    """Tiles of ``tile`` covering ``size`` (traced), in units of ``cluster`` tiles."""
    return (size + tile * cluster - 1) // (tile * cluster)


def _mode_order(tensor: cute.Tensor, order: tuple[int, int, int]) -> cute.Tensor:
    """The same memory with its modes permuted (``order[i]`` is the old mode of new mode i)."""
    return cute.make_tensor(tensor.iterator, cute.select(tensor.layout, mode=list(order)))
