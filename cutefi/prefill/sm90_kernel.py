"""Hopper (sm_90a) prefill attention: TMA loads, wgmma for S = Q K^T and O += P V, online
softmax in registers, warp-specialised and persistent, in CuTe DSL.

ABI, tiles and launch: ``launch.py`` (``sm90_contract``). A CTA has three warpgroups:

  0. producer: one warp takes this CTA's work units (its first by index, the others from the
     launch's counter) and, per unit, writes the unit's index to shared memory and TMA-loads
     its Q tile into the Q ring (``launch.Q_STAGES`` slots; the index travels with it), then
     the unit's K and V tiles, last tile first, into two rings (``launch.RINGS``: K and V
     have their own barriers, so S = Q K^T starts before V has landed, and V's ring is
     deeper); a unit index of -1 (with any Q tile) ends the consumers' loop;
  1-2. consumers: each owns 64 of the tile's 128 q rows and, per KV tile: S = Q K^T (both
     operands in shared memory, fp32 accumulators), the mask where the tile needs one, the
     online softmax (base 2; O rescaled by the change of each row's maximum, or, with
     ``launch.LAZY_RESCALE``, only when it outgrows the reference the exponentials take by
     2^8), P packed into 16-bit pairs in registers, where it already sits as the A operand of O += P V (V's tile
     seen transposed: MN-major B). S of tile j is issued together with P V of tile j - 1 and
     the softmax of j runs while that P V does (intra-warpgroup overlap); with
     ``launch.PINGPONG`` the two consumers take turns to issue (named barriers), so one's
     softmax runs under the other's GEMMs. At a unit's end one turn issues its last P V
     together with the next unit's first S (on a landed Q tile: ``launch.Q_STAGES``), so the
     epilogue (O / rowsum times ``out_scale``, FlashInfer's v_scale, and the base-2 lse,
     stored from registers; rows past the request's end are never written) runs under the
     next unit's first GEMM instead of between two units.

KV tiles are taken from the last one down: the tiles that need a mask (the request's end,
the causal diagonal) come first.
"""

from __future__ import annotations

import cutlass
import cutlass.cute as cute
import cutlass.pipeline as pipeline
import cutlass.utils.hopper_helpers as sm90_utils
from cutlass import Float32, Int32, Int64, const_expr
from cutlass.cute.nvgpu import OperandMajorMode, cpasync, warpgroup

from cutefi.cute import args as kernel_args
from cutefi.cute.args import KernelArgs
from cutefi.cute.dtypes import cute_dtype
from cutefi.cute.mma_frag import kv_tile_range
from cutefi.cute.pack16 import convert_pairs
from cutefi.cute.pdl import wait_for_inputs
from cutefi.cute.wgmma_frag import acc_as_a, rows_view, transposed
from cutefi.prefill import launch
from cutefi.prefill.sm90_rows import NEG_INF, RowStages, scale_rows

PRODUCER_REGS = 24
CONSUMER_REGS = 240
CONSUMER_THREADS = 2 * launch.WARPGROUP
ROWS = 64  # q rows of a consumer warpgroup (the wgmma's M)
# slots of the shared ring of unit indices: the producer writes unit u's index before it waits
# for Q slot u (the write must come before that slot's arrival), possibly while the consumers
# have yet to read units u - q_stages .. u - 1; more than q_stages + 1 slots keep them apart
UNIT_SLOTS = 4
TURN_BARRIER = 2  # named barriers 2, 3: the consumers' turns to issue wgmmas (0 is __syncthreads)


class PrefillSm90(RowStages):
    # ------------------------------------------------------------------ #
    # 1. specialisation
    # ------------------------------------------------------------------ #
    def __init__(self, dtype: str, head_dim: int, page_size: int = 0, head_dim_vo: int | None = None) -> None:
        self.contract = launch.sm90_contract(dtype, head_dim, page_size, head_dim_vo)
        self.dtype = cute_dtype(dtype)
        self.head_dim = head_dim  # (q's and k's)
        self.head_dim_vo = head_dim_vo or head_dim  # (v's and the output's: MLA's 128 under 192)
        # paged: K and V tiles gathered a page (and BOX_COLS columns) a TMA box
        self.page_size = page_size
        self.tile_n = launch.tile_n(head_dim, page_size)
        self.k_stages, self.v_stages = launch.stages(head_dim)
        self.q_stages = launch.Q_STAGES[head_dim]
        self.pingpong = launch.PINGPONG[head_dim]
        self.lazy_rescale = launch.LAZY_RESCALE[head_dim]

    def _tiled_mma(self, width: int, b_major, a_source):
        """One 64-row wgmma atom per consumer warpgroup (the two split the tile's rows)."""
        return sm90_utils.make_trivial_tiled_mma(self.dtype, self.dtype, OperandMajorMode.K, b_major, Float32,
                                                 (launch.TILE_M // ROWS, 1, 1), (ROWS, width), a_source)

    def _smem_layouts(self):
        """(Q (128, d, q_stages), K (tile_n, d, k_stages), V (tile_n, d_vo, v_stages)): row-major tiles as
        TMA writes them, 128-byte swizzled, K-major for S = Q K^T (V is read through a
        transposed view)."""
        atom = warpgroup.make_smem_layout_atom(warpgroup.SmemLayoutAtomKind.K_SW128, self.dtype)
        q = cute.tile_to_shape(atom, (launch.TILE_M, self.head_dim, self.q_stages), order=(0, 1, 2))
        k = cute.tile_to_shape(atom, (self.tile_n, self.head_dim, self.k_stages), order=(0, 1, 2))
        v = cute.tile_to_shape(atom, (self.tile_n, self.head_dim_vo, self.v_stages), order=(0, 1, 2))
        return q, k, v

    # ------------------------------------------------------------------ #
    # 2. host side: TMA atoms over the (tokens, head_dim, heads) views
    # ------------------------------------------------------------------ #
    @cute.jit
    def __call__(self, args: KernelArgs):
        q_smem, k_smem, v_smem = self._smem_layouts()
        load = cpasync.CopyBulkTensorTileG2SOp()
        atom_q, tma_q = cpasync.make_tiled_tma_atom(load, _tokens_dim_heads(args.q), cute.slice_(q_smem, (None, None, 0)),
                                                    (launch.TILE_M, self.head_dim))
        if const_expr(self.page_size):  # [pages, kv_heads, page_size, d] -> (page_size, d, kv_heads, pages)
            atom = warpgroup.make_smem_layout_atom(warpgroup.SmemLayoutAtomKind.K_SW128, self.dtype)
            box = cute.tile_to_shape(atom, (self.page_size, launch.BOX_COLS), order=(0, 1))
            atom_k, tma_k = cpasync.make_tiled_tma_atom(load, _page_rows_dim_heads_pages(args.k), box,
                                                        (self.page_size, launch.BOX_COLS))
            atom_v, tma_v = cpasync.make_tiled_tma_atom(load, _page_rows_dim_heads_pages(args.v), box,
                                                        (self.page_size, launch.BOX_COLS))
        else:
            atom_k, tma_k = cpasync.make_tiled_tma_atom(load, _tokens_dim_heads(args.k),
                                                        cute.slice_(k_smem, (None, None, 0)), (self.tile_n, self.head_dim))
            atom_v, tma_v = cpasync.make_tiled_tma_atom(load, _tokens_dim_heads(args.v),
                                                        cute.slice_(v_smem, (None, None, 0)),
                                                        (self.tile_n, self.head_dim_vo))
        kernel_args.launch(self.kernel, self.contract, args,
                           args.replace(q=(atom_q, tma_q), k=(atom_k, tma_k), v=(atom_v, tma_v)))

    # ------------------------------------------------------------------ #
    # 3. the kernel: setup, then the producer or a consumer
    # ------------------------------------------------------------------ #
    @cute.kernel
    def kernel(self, args: KernelArgs):
        atom_q, tma_q = args.q
        atom_k, tma_k = args.k
        atom_v, tma_v = args.v
        q_smem, k_smem, v_smem = self._smem_layouts()
        tidx, _, _ = cute.arch.thread_idx()
        warp_idx = cute.arch.make_warp_uniform(cute.arch.warp_idx())
        if warp_idx == 0:
            cpasync.prefetch_descriptor(atom_q)
            cpasync.prefetch_descriptor(atom_k)
            cpasync.prefetch_descriptor(atom_v)

        @cute.struct
        class SharedStorage:
            q_barriers: cute.struct.MemRange[cutlass.Int64, self.q_stages * 2]
            unit_slots: cute.struct.MemRange[Int32, UNIT_SLOTS]  # the units of the Q tiles in flight
            k_barriers: cute.struct.MemRange[cutlass.Int64, self.k_stages * 2]
            v_barriers: cute.struct.MemRange[cutlass.Int64, self.v_stages * 2]
            s_q: cute.struct.Align[cute.struct.MemRange[self.dtype, cute.cosize(q_smem)], 1024]
            s_k: cute.struct.Align[cute.struct.MemRange[self.dtype, cute.cosize(k_smem)], 1024]
            s_v: cute.struct.Align[cute.struct.MemRange[self.dtype, cute.cosize(v_smem)], 1024]

        storage = cutlass.memory.SmemAllocator().allocate(SharedStorage)
        s_q = storage.s_q.get_tensor(q_smem.outer, swizzle=q_smem.inner)
        s_k = storage.s_k.get_tensor(k_smem.outer, swizzle=k_smem.inner)
        s_v = storage.s_v.get_tensor(v_smem.outer, swizzle=v_smem.inner)
        unit_slots = storage.unit_slots.get_tensor(cute.make_layout(UNIT_SLOTS))
        stage_bytes = lambda layout: cute.size_in_bytes(self.dtype, cute.slice_(layout, (None, None, 0)))
        q_ring = self._ring(storage.q_barriers, self.q_stages, stage_bytes(q_smem))
        k_ring = self._ring(storage.k_barriers, self.k_stages, stage_bytes(k_smem))
        v_ring = self._ring(storage.v_barriers, self.v_stages, stage_bytes(v_smem))
        pipeline.pipeline_init_arrive(cluster_shape_mn=(1, 1), is_relaxed=True)
        pipeline.pipeline_init_wait(cluster_shape_mn=(1, 1))
        wait_for_inputs()
        warpgroup_idx = cute.arch.make_warp_uniform(tidx // launch.WARPGROUP)
        if warpgroup_idx == 0:
            cute.arch.setmaxregister_decrease(PRODUCER_REGS)
            if warp_idx == 0:
                self._produce(args, (q_ring, k_ring, v_ring), (atom_q, tma_q, s_q), (atom_k, tma_k, s_k),
                              (atom_v, tma_v, s_v), unit_slots)
        else:
            cute.arch.setmaxregister_increase(CONSUMER_REGS)
            self._consume(args, (q_ring, k_ring, v_ring), s_q, s_k, s_v, tidx - launch.WARPGROUP, unit_slots)

    def _ring(self, barriers, stages: int, tx_bytes):
        """A TMA ring: full barriers (bytes landed), empty ones (every consumer warp done)."""
        return pipeline.PipelineTmaAsync.create(
            barrier_storage=barriers.data_ptr(), num_stages=stages,
            producer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread),
            consumer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread, CONSUMER_THREADS // 32),
            tx_count=tx_bytes, cta_layout_vmnk=cute.make_layout((1, 1, 1, 1)), defer_sync=True)

    @cute.jit
    def _unit(self, args, unit):
        """(q_begin, qo_len, kv_begin, kv_len, m_block, head) of work unit ``unit``: head-major,
        so the CTAs running at once read the same heads' K and V (L2 hits)."""
        pairs = args.units // args.heads
        head = unit // pairs
        pair = unit - head * pairs
        work = cute.make_tensor(args.work, cute.make_layout((launch.WORK_ROWS, pairs), stride=(pairs, 1)))
        return work[0, pair], work[1, pair], work[2, pair], work[3, pair], work[4, pair], head

    @cute.jit
    def _kv_tiles(self, args, qo_len, kv_len, m_block):
        """[first, end) KV tiles the unit's rows see (``plan.kv_tile_range``)."""
        return kv_tile_range(m_block * launch.TILE_M, launch.TILE_M, qo_len, kv_len, args.causal, args.window_left,
                             self.tile_n)

    # ------------------------------------------------------------------ #
    # 4. producer: TMA loads
    # ------------------------------------------------------------------ #
    @cute.jit
    def _produce(self, args, rings, q_parts, k_parts, v_parts, unit_slots):
        q_ring, k_ring, v_ring = rings
        atom_q, tma_q, s_q = q_parts
        d, tile_n = self.head_dim, self.tile_n
        q_state = pipeline.make_pipeline_state(pipeline.PipelineUserType.Producer, self.q_stages)
        k_state = pipeline.make_pipeline_state(pipeline.PipelineUserType.Producer, self.k_stages)
        v_state = pipeline.make_pipeline_state(pipeline.PipelineUserType.Producer, self.v_stages)
        ctas = cute.arch.grid_dim()[0]
        unit = cute.arch.block_idx()[0]
        taken = Int32(0)
        while unit < args.units:
            # (the unit's index travels with its Q tile: written before the Q slot's arrival)
            unit_slots[taken % UNIT_SLOTS] = unit
            cute.arch.sync_warp()
            q_begin, qo_len, kv_begin, kv_len, m_block, head = self._unit(args, unit)
            kv_head = head // args.group
            first, end = self._kv_tiles(args, qo_len, kv_len, m_block)
            # (the request's rows from its first: a tile past its end reads the next request's
            # rows or TMA's zeros, which the consumers mask or do not store)
            t_sq, t_gq = _tma_view(atom_q, s_q, cute.domain_offset((q_begin, 0, 0), tma_q), (launch.TILE_M, d))
            q_ring.producer_acquire(q_state)
            cute.copy(atom_q, t_gq[(None, m_block, 0, head)], t_sq[(None, q_state.index)],
                      tma_bar_ptr=q_ring.producer_get_barrier(q_state))
            q_ring.producer_commit(q_state)
            q_state.advance()
            k_atom, tma_k, s_k = k_parts
            v_atom, tma_v, s_v = v_parts
            t_sk = t_gk = t_sv = t_gv = None
            if const_expr(not self.page_size):
                t_sk, t_gk = _tma_view(k_atom, s_k, cute.domain_offset((kv_begin, 0, 0), tma_k), (tile_n, d))
                t_sv, t_gv = _tma_view(v_atom, s_v, cute.domain_offset((kv_begin, 0, 0), tma_v),
                                       (tile_n, self.head_dim_vo))
            for i in cutlass.range(end - first, unroll=1):
                n = end - 1 - i
                pages = Int32(0)
                if const_expr(self.page_size):  # (issued before the wait on K's slot, which hides it)
                    pages = self._tile_pages(args, n, kv_begin, kv_len)
                k_ring.producer_acquire(k_state)
                if const_expr(self.page_size):
                    self._load_pages(k_atom, tma_k, s_k, k_ring, k_state, pages, kv_head)
                else:
                    cute.copy(k_atom, t_gk[(None, n, 0, kv_head)], t_sk[(None, k_state.index)],
                              tma_bar_ptr=k_ring.producer_get_barrier(k_state))
                k_ring.producer_commit(k_state)
                k_state.advance()
                v_ring.producer_acquire(v_state)
                if const_expr(self.page_size):
                    self._load_pages(v_atom, tma_v, s_v, v_ring, v_state, pages, kv_head)
                else:
                    cute.copy(v_atom, t_gv[(None, n, 0, kv_head)], t_sv[(None, v_state.index)],
                              tma_bar_ptr=v_ring.producer_get_barrier(v_state))
                v_ring.producer_commit(v_state)
                v_state.advance()
            unit = self._next_unit(args, ctas)
            taken += 1
        # the end: unit -1, with the first Q tile (any valid one) so the slot's barrier completes
        unit_slots[taken % UNIT_SLOTS] = Int32(-1)
        cute.arch.sync_warp()
        t_sq, t_gq = _tma_view(atom_q, s_q, tma_q, (launch.TILE_M, d))
        q_ring.producer_acquire(q_state)
        cute.copy(atom_q, t_gq[(None, 0, 0, 0)], t_sq[(None, q_state.index)],
                  tma_bar_ptr=q_ring.producer_get_barrier(q_state))
        q_ring.producer_commit(q_state)
        q_state.advance()
        q_ring.producer_tail(q_state)
        k_ring.producer_tail(k_state)
        v_ring.producer_tail(v_state)

    @cute.jit
    def _tile_pages(self, args, n, kv_begin, kv_len) -> Int32:
        """Tile ``n``'s page ids, lane p holding its p-th (one load for the warp, shared by the
        K and V boxes; lanes past the tile's pages hold junk that no box reads). Entries past
        the request's last page repeat it (those keys are masked)."""
        pages_per_tile = self.tile_n // self.page_size
        last_entry = (kv_len + self.page_size - 1) // self.page_size - 1
        lane = cute.arch.lane_idx()
        entry = Int64(kv_begin + cutlass.min(n * pages_per_tile + cutlass.min(lane, pages_per_tile - 1), last_entry))
        return cute.make_tensor(args.kv_indices + entry, cute.make_layout(1))[0]

    @cute.jit
    def _load_pages(self, atom, tma, smem, ring, state, pages, kv_head):
        """A tile into ring slot ``state``: its pages' rows, BOX_COLS head-dim columns a TMA
        box, page p's id in lane p of ``pages``; a page id past the cache reads zeros (TMA
        bounds), never memory."""
        page_size = self.page_size
        stage = smem[(None, None, state.index)]
        barrier = ring.producer_get_barrier(state)
        boxes = cute.local_tile(tma, (page_size, launch.BOX_COLS), (None, None, None, None))
        for p in cutlass.range(self.tile_n // page_size, unroll=1):  # (unrolled, the producer's 24 registers spilled)
            page = cute.arch.shuffle_sync(pages, p)
            for c in cutlass.range_constexpr(self.head_dim // launch.BOX_COLS):
                piece = cute.local_tile(stage, (page_size, launch.BOX_COLS), (p, c))
                t_s, t_g = cpasync.tma_partition(atom, 0, cute.make_layout(1), cute.group_modes(piece, 0, 2),
                                                 cute.group_modes(boxes[(None, None, 0, c, kv_head, page)], 0, 2))
                cute.copy(atom, t_g, t_s, tma_bar_ptr=barrier)

    @cute.jit
    def _next_unit(self, args, ctas):
        """A CTA's next work unit: its first is its index, the later ones come from the launch's
        counter in order (dynamic: the CTAs running at once hold neighbouring units, so they
        share K/V in L2, and a CTA done early takes more). The launch's ``units`` fetches take
        the values 0 .. units - 1 (each CTA's last fetch is the one past the end); the one
        that takes units - 1 zeroes the counter for the next launch."""
        fetched = Int32(0)
        if cute.arch.lane_idx() == 0:
            fetched = cute.arch.atomic_add(args.counter, Int32(1), sem="relaxed", scope="gpu")
            if fetched == args.units - 1:
                cute.make_tensor(args.counter, cute.make_layout(1))[0] = Int32(0)
        return ctas + cute.arch.shuffle_sync(fetched, 0)

    # ------------------------------------------------------------------ #
    # 5. consumers: S = Q K^T, softmax, O += P V, epilogue
    # ------------------------------------------------------------------ #
    @cute.jit
    def _consume(self, args, rings, s_q, s_k, s_v, thread, unit_slots):
        q_ring, k_ring, v_ring = rings
        tile_n = self.tile_n
        mma_qk = self._tiled_mma(tile_n, OperandMajorMode.K, warpgroup.OperandSource.SMEM)
        mma_pv = self._tiled_mma(self.head_dim_vo, OperandMajorMode.MN, warpgroup.OperandSource.RMEM)
        # wgmma operands are partitioned per warpgroup, accumulator coordinates per thread
        wg_first = thread // launch.WARPGROUP * launch.WARPGROUP
        wg_qk, wg_pv = mma_qk.get_slice(wg_first), mma_pv.get_slice(wg_first)
        frag_q = wg_qk.make_fragment_A(wg_qk.partition_A(s_q))
        frag_k = wg_qk.make_fragment_B(wg_qk.partition_B(s_k))
        frag_v = wg_pv.make_fragment_B(wg_pv.partition_B(transposed(s_v)))
        frag_p = wg_pv.make_fragment_A(wg_pv.partition_shape_A((launch.TILE_M, tile_n)))
        acc_s = cute.make_rmem_tensor(wg_qk.partition_shape_C((launch.TILE_M, tile_n)), Float32)
        acc_o = cute.make_rmem_tensor(wg_pv.partition_shape_C((launch.TILE_M, self.head_dim_vo)), Float32)
        coord_s = rows_view(mma_qk.get_slice(thread).partition_C(cute.make_identity_tensor((launch.TILE_M, tile_n))))
        coord_o = mma_pv.get_slice(thread).partition_C(cute.make_identity_tensor((launch.TILE_M, self.head_dim_vo)))
        row_max = cute.make_rmem_tensor(cute.make_layout(2), Float32)
        row_sum = cute.make_rmem_tensor(cute.make_layout(2), Float32)
        q_state = pipeline.make_pipeline_state(pipeline.PipelineUserType.Consumer, self.q_stages)
        k_state = pipeline.make_pipeline_state(pipeline.PipelineUserType.Consumer, self.k_stages)
        v_state = pipeline.make_pipeline_state(pipeline.PipelineUserType.Consumer, self.v_stages)
        rescale = cute.make_rmem_tensor(cute.make_layout(2), Float32)
        # ping-pong: the two consumers take turns to issue their wgmmas, so one's softmax runs
        # while the other's GEMMs hold the tensor cores (the first consumer starts)
        warpgroup_idx = cute.arch.make_warp_uniform(thread // launch.WARPGROUP)
        if const_expr(self.pingpong):
            if warpgroup_idx == 0:
                cute.arch.barrier_arrive(barrier_id=TURN_BARRIER, number_of_threads=CONSUMER_THREADS)
        # (scores as base-2 logits s * mult; a soft cap turns s into cap * tanh first)
        mult = args.q_mult
        if args.cap_scale != Float32(0.0):
            mult = Float32(1.0)
        # the first unit's first S = Q K^T in a turn of its own; from then on a unit's last
        # P V and the next unit's first S share a turn, and the unit's epilogue runs while
        # that S does (the tensor cores do not idle across units)
        taken = Int32(0)
        q_ring.consumer_wait(q_state)
        unit = unit_slots[0]
        q_begin, qo_len, kv_len, m_block, head, first, end = self._unit_or_end(args, unit)
        if end > first:
            k_ring.consumer_wait(k_state)
            _take_turn(warpgroup_idx, self.pingpong)
            _gemm(mma_qk, acc_s, frag_q[(None, None, None, q_state.index)], frag_k[(None, None, None, k_state.index)],
                  True, -1)
            _pass_turn(warpgroup_idx, self.pingpong)
        while unit >= 0:
            tiles = end - first
            first_row = m_block * launch.TILE_M
            q_tile = frag_q[(None, None, None, q_state.index)]
            # (every wait and commit below is unconditional: ptxas serialises every wgmma
            # where a group may stay in flight along some path it cannot rule out)
            warpgroup.wait_group(0)  # (the first tile's S, issued in the last turn, if any)
            row_max.fill(NEG_INF)
            row_sum.fill(0.0)
            acc_o.fill(0.0)
            if tiles > 0:
                k_ring.consumer_release(k_state)
                # (a unit's first softmax holds up its pipeline: all of it on the MUFU unit)
                self._softmax(args, acc_s, coord_s, row_max, row_sum, rescale, mult, first_row, (end - 1) * tile_n,
                              qo_len, kv_len, 0)
                convert_pairs(cute.make_tensor(acc_s.iterator, acc_as_a(acc_s.layout)), frag_p)
                k_state.advance()
            # intra-warpgroup overlap: S of tile j is computed while O += P V of tile j - 1
            # runs (both wgmma groups in flight); tile j's softmax overlaps that P V
            # (O takes the last softmax's rescale while S runs: the multiplies do not hold the
            # warpgroup between two tiles' GEMMs; V is waited for under S as well)
            for i in cutlass.range(1, tiles, unroll=1):
                k_ring.consumer_wait(k_state)
                _take_turn(warpgroup_idx, self.pingpong)
                _gemm(mma_qk, acc_s, q_tile, frag_k[(None, None, None, k_state.index)], True, -1)
                self._rescale_o(acc_o, rescale)
                v_ring.consumer_wait(v_state)
                _gemm(mma_pv, acc_o, frag_p, frag_v[(None, None, None, v_state.index)], False, -1)
                _pass_turn(warpgroup_idx, self.pingpong)
                warpgroup.wait_group(1)  # (S has landed; P V may still run)
                k_ring.consumer_release(k_state)
                self._softmax(args, acc_s, coord_s, row_max, row_sum, rescale, mult, first_row,
                              (end - 1 - i) * tile_n, qo_len, kv_len, launch.EXP2_ON_FMA[self.head_dim])
                warpgroup.wait_group(0)
                v_ring.consumer_release(v_state)
                convert_pairs(cute.make_tensor(acc_s.iterator, acc_as_a(acc_s.layout)), frag_p)
                k_state.advance()
                v_state.advance()
            # every S of the unit is done: its Q slot goes back to the producer for the next
            # unit's, which this boundary waits for with the next unit's first K tile
            q_ring.consumer_release(q_state)
            q_state.advance()
            taken += 1
            q_ring.consumer_wait(q_state)
            next_unit = unit_slots[taken % UNIT_SLOTS]
            next_q_begin, next_qo_len, next_kv_len, next_m_block, next_head, next_first, next_end = \
                self._unit_or_end(args, next_unit)
            if tiles > 0:
                v_ring.consumer_wait(v_state)
            if next_end > next_first:
                k_ring.consumer_wait(k_state)
            # two groups, the P V (maybe empty) then the S: the S is issued even where the next
            # unit has no tile (or is the end marker), on whatever the K slot holds, and never
            # read; ptxas serialises every wgmma of the kernel if that S is behind a branch
            _take_turn(warpgroup_idx, self.pingpong)
            if tiles > 0:
                self._rescale_o(acc_o, rescale)
                _gemm(mma_pv, acc_o, frag_p, frag_v[(None, None, None, v_state.index)], False, -1)
            else:
                warpgroup.commit_group()
            _gemm(mma_qk, acc_s, frag_q[(None, None, None, q_state.index)], frag_k[(None, None, None, k_state.index)],
                  True, -1)
            _pass_turn(warpgroup_idx, self.pingpong)
            warpgroup.wait_group(1)  # (the last P V; the next S may still run)
            if tiles > 0:
                v_ring.consumer_release(v_state)
                v_state.advance()
            self._epilogue(args, acc_o, coord_o, row_max, row_sum, mult, q_begin, qo_len, first_row, head)
            unit, q_begin, qo_len, kv_len, m_block, head, first, end = (
                next_unit, next_q_begin, next_qo_len, next_kv_len, next_m_block, next_head, next_first, next_end)
        warpgroup.wait_group(0)  # (nothing is in flight here; said for ptxas)
        q_ring.consumer_release(q_state)  # (the end marker's Q tile)
        if const_expr(self.pingpong):
            # the turns leave one arrival of the second consumer on the first's barrier: take
            # it, so no named barrier is left half-arrived when the CTA exits
            if warpgroup_idx == 0:
                cute.arch.barrier(barrier_id=TURN_BARRIER, number_of_threads=CONSUMER_THREADS)

    @cute.jit
    def _rescale_o(self, acc_o, rescale):
        """O's rows times the last softmax's factors (lazy rescale: only where one moved)."""
        if const_expr(self.lazy_rescale):
            if rescale[0] != Float32(1.0) or rescale[1] != Float32(1.0):  # (rare after the first tiles)
                scale_rows(acc_o, rescale)
        else:
            scale_rows(acc_o, rescale)

    @cute.jit
    def _unit_or_end(self, args, unit):
        """(q_begin, qo_len, kv_len, m_block, head, first, end) of work unit ``unit`` with its KV
        tiles [first, end); zeros for the end marker (-1), whose fields are never read."""
        q_begin, qo_len, kv_len, m_block, head = Int32(0), Int32(0), Int32(0), Int32(0), Int32(0)
        first, end = Int32(0), Int32(0)
        if unit >= 0:
            q_begin, qo_len, _, kv_len, m_block, head = self._unit(args, unit)
            first, end = self._kv_tiles(args, qo_len, kv_len, m_block)
        return q_begin, qo_len, kv_len, m_block, head, first, end


@cute.jit
def _gemm(tiled_mma, acc, frag_a, frag_b, zero_init: cutlass.Constexpr, wait: cutlass.Constexpr):
    """acc (+)= A B over the fragments' K blocks on one warpgroup, committed as one group;
    ``wait`` >= 0: then wait until at most that many groups are in flight. A fresh atom
    per call: its accumulate flag is set here, in this scope (a flag flipped on a shared
    object inside the dynamic loops leaves an SSA value out of its scope)."""
    warpgroup.fence()
    atom = cute.make_mma_atom(tiled_mma.op)
    atom.set(warpgroup.Field.ACCUMULATE, not zero_init)
    for k in cutlass.range_constexpr(cute.size(frag_a.shape[2])):
        cute.gemm(atom, acc, frag_a[(None, None, k)], frag_b[(None, None, k)], acc)
        atom.set(warpgroup.Field.ACCUMULATE, True)
    warpgroup.commit_group()
    if const_expr(wait >= 0):
        warpgroup.wait_group(wait)


@cute.jit
def _take_turn(warpgroup_idx, pingpong: cutlass.Constexpr):
    """Wait until it is this consumer warpgroup's turn to issue wgmmas."""
    if const_expr(pingpong):
        cute.arch.barrier(barrier_id=TURN_BARRIER + warpgroup_idx, number_of_threads=CONSUMER_THREADS)


@cute.jit
def _pass_turn(warpgroup_idx, pingpong: cutlass.Constexpr):
    """Give the other consumer warpgroup its turn."""
    if const_expr(pingpong):
        cute.arch.barrier_arrive(barrier_id=TURN_BARRIER + 1 - warpgroup_idx, number_of_threads=CONSUMER_THREADS)


def _tma_view(atom, smem, coords, tile):
    """(smem, gmem) TMA partitions of ``coords`` tiled by ``tile``: gmem (TMA, tiles along
    tokens, 1, heads), smem (TMA, stage)."""
    tiles = cute.local_tile(coords, tile, (None, None, None))
    return cpasync.tma_partition(atom, 0, cute.make_layout(1), cute.group_modes(smem, 0, 2),
                                 cute.group_modes(tiles, 0, 2))


def _tokens_dim_heads(tensor: cute.Tensor) -> cute.Tensor:
    """[heads, tokens, head_dim] -> (tokens, head_dim, heads): the same memory."""
    return cute.make_tensor(tensor.iterator, cute.select(tensor.layout, mode=[1, 2, 0]))


def _page_rows_dim_heads_pages(tensor: cute.Tensor) -> cute.Tensor:
    """[pages, kv_heads, page_size, head_dim] -> (page_size, head_dim, kv_heads, pages)."""
    return cute.make_tensor(tensor.iterator, cute.select(tensor.layout, mode=[2, 3, 1, 0]))
