"""Batch decode attention over a paged KV cache on tensor cores (mma.sync m16n8k16), in CuTe
DSL. Mapping, ABI and launch: ``launch.py`` (``mma_decode_contract``); work items:
``decode_plan.py``.

The q heads of one kv head (up to 16, zero-padded) are the M rows of the MMAs, so a KV byte
costs the same few instructions whatever the GQA group. Stages of a CTA:
  0. the work item, this warp's share of its 16-token tiles;
  1. the Q tile into shared memory (heads past the group as zero rows);
  2. per warp, a private ring of K/V tiles filled by cp.async through the page table: lane j
     keeps the page of the tile's row j (loaded a step ahead) and shuffles the row's address
     to the lanes that read it, so each instruction reads whole rows (full DRAM bursts: 1.5x
     faster than lanes reading 32-byte slices of 16 rows); rows are padded by 16 bytes in
     shared memory so ldmatrix reads 8 rows from 8 bank groups; tokens past the range (or on
     a page id outside the cache) are zero-filled;
  3. per tile: S = Q·K^T (ldmatrix, mma), scale, soft cap and range mask, online softmax
     on the accumulator rows, O += P·V (P from the S registers, V by ldmatrix.trans);
  4. the four warps' states merged through shared memory; the output (or the partial state
     of a split request) and its base-2 log-sum-exp written.
"""

from __future__ import annotations

import cutlass
import cutlass.cute as cute
from cutlass import Float32, Int32, Int64, const_expr
from cutlass.cute.nvgpu import cpasync, warp

from cutefi.attention import launch
from cutefi.cute import args as kernel_args
from cutefi.cute.args import KernelArgs
from cutefi.cute.attention_state import NEG_INF
from cutefi.cute.dtypes import cute_dtype
from cutefi.cute.pdl import wait_for_inputs

VEC = launch.VEC  # 16-bit elements of a 16-byte piece
ROWS = launch.MMA_DECODE_ROWS
LOG2E = 1.4426950408889634
TILE = launch.MMA_DECODE_TILE
WARPS = launch.MMA_DECODE_WARPS


class BatchDecodeMmaKernel:
    # ------------------------------------------------------------------ #
    # 1. specialisation
    # ------------------------------------------------------------------ #
    def __init__(self, dtype: str, head_dim: int, stages: int):
        if dtype not in launch.DTYPES or head_dim not in launch.DECODE_HEAD_DIMS \
                or stages not in launch.MMA_DECODE_STAGES[head_dim]:
            raise ValueError(f"unsupported tensor-core decode build {dtype!r}, head_dim={head_dim}, stages={stages}")
        self.contract = launch.mma_decode_contract(dtype, head_dim, stages)
        self.dtype = cute_dtype(dtype)
        self.head_dim = head_dim
        self.stages = stages
        self.chunks = head_dim // VEC  # 16-byte pieces of a row
        # rows padded by one 16-byte piece: 8 rows at one column fall in 8 distinct bank groups
        self.row_stride = head_dim + VEC
        self.tile_elems = TILE * self.row_stride
        self.q_in_registers = head_dim <= 128

    # ------------------------------------------------------------------ #
    # 2. host wrapper
    # ------------------------------------------------------------------ #
    @cute.jit
    def __call__(self, args: KernelArgs):
        kernel_args.launch(self.kernel, self.contract, args)

    # ------------------------------------------------------------------ #
    # 3. device kernel
    # ------------------------------------------------------------------ #
    @cute.kernel
    def kernel(self, args: KernelArgs):
        a = args
        tidx, _, _ = cute.arch.thread_idx()
        cta, _, _ = cute.arch.block_idx()
        item = cta // (a.kv_heads * a.row_blocks)
        kv_head = cta - item * (a.kv_heads * a.row_blocks)
        row_block = kv_head % a.row_blocks
        kv_head = kv_head // a.row_blocks
        warp_id = tidx // 32
        lane = tidx % 32

        # ---- stage 0: the work item ----------------------------------------------
        wait_for_inputs()
        work = cute.make_tensor(a.work, cute.make_layout((5, a.items), stride=(a.items, 1)))
        live = work[0, item] >= 0  # an idle item pads a CUDA-graph plan's fixed grid
        request = cutlass.max(work[0, item], 0)
        kv_start = work[1, item]
        kv_end = work[2, item]
        partial_row = work[3, item]
        # the request's attention sink (a logit in every head's denominator) rides on one item
        with_sink = a.has_sinks != 0 and work[4, item] != 0
        page_base = cute.make_tensor(a.kv_indptr, cute.make_layout(request + 1))[request]
        tiles = cutlass.select_(live, cute.ceil_div(cutlass.max(kv_end - kv_start, 0), TILE), 0)
        my_tiles = cutlass.max(tiles - warp_id + WARPS - 1, 0) // WARPS  # tiles warp_id, +4, +8, ...
        first_head = kv_head * a.group + row_block * ROWS
        heads_here = cutlass.min(a.group - row_block * ROWS, ROWS)

        # ---- shared memory: per-warp K/V rings, then the Q tile ------------------
        smem = cute.arch.get_dyn_smem(self.dtype, alignment=128)
        ring_elems = self.stages * 2 * self.tile_elems
        ring = smem + cute.assume(warp_id * ring_elems, divby=128)
        q_smem = smem + WARPS * ring_elems

        # ---- stage 1: Q tile (zero rows past the group) ---------------------------
        for task in cutlass.range_constexpr(ROWS * self.chunks // (WARPS * 32)):
            piece = task * WARPS * 32 + tidx
            row = piece // self.chunks
            chunk = piece % self.chunks
            dst = cute.make_tensor(q_smem + self._padded(row, chunk), cute.make_layout(VEC))
            if row < heads_here and live:
                offset = (Int64(request) * a.q_stride_batch + Int64(first_head + row) * a.q_stride_head
                          + chunk * VEC)
                src = cute.make_tensor(a.q + cute.assume(offset, divby=VEC), cute.make_layout(VEC))
                dst.store(src.load())
            else:
                dst.fill(0)
        cute.arch.barrier()

        # ---- MMA partitions --------------------------------------------------------
        # N tiled to 16: one ldmatrix.x4 fills a 16 x 16 B block
        tiled_mma = cute.make_tiled_mma(warp.MmaF16BF16Op(self.dtype, Float32, (16, 8, 16)),
                                        permutation_mnk=(ROWS, 16, 16))
        thr_mma = tiled_mma.get_slice(lane)
        s_q = cute.make_tensor(q_smem, self._smem_layout(ROWS))
        load_a = cute.make_tiled_copy_A(cute.make_copy_atom(warp.LdMatrix8x8x16bOp(False, 4), self.dtype), tiled_mma)
        load_b = cute.make_tiled_copy_B(cute.make_copy_atom(warp.LdMatrix8x8x16bOp(False, 4), self.dtype), tiled_mma)
        load_bt = cute.make_tiled_copy_B(cute.make_copy_atom(warp.LdMatrix8x8x16bOp(True, 4), self.dtype), tiled_mma)
        r_q = thr_mma.make_fragment_A(thr_mma.partition_A(s_q))
        q_from = load_a.get_slice(lane).partition_S(s_q)
        q_to = load_a.get_slice(lane).retile(r_q)

        acc_o = cute.make_rmem_tensor(thr_mma.partition_shape_C((ROWS, self.head_dim)), Float32)
        acc_o.fill(0.0)
        o_rows = self._rows_view(acc_o)
        row_max = cute.make_rmem_tensor(cute.make_layout(2), Float32)
        row_sum = cute.make_rmem_tensor(cute.make_layout(2), Float32)  # this thread's columns only
        row_max.fill(NEG_INF)
        row_sum.fill(0.0)
        # this thread's accumulator places (the m16n8 C layout): rows lane/4 and lane/4 + 8,
        # columns 8n + 2 (lane % 4) + {0, 1} of n-tile n
        quad_col = 2 * (lane % 4)

        # ---- stage 2: the pipeline; lane j keeps the page of row j % 16 of each tile --------
        head_offset = Int64(kv_head) * a.cache_stride_head
        first_token = kv_start + warp_id * TILE + lane % TILE
        page_slot = cute.make_rmem_tensor(cute.make_layout(1), Int32)
        entry = cute.make_rmem_tensor(cute.make_layout(1), Int32)
        page = cute.make_rmem_tensor(cute.make_layout(1), Int32)
        page_slot[0] = first_token // a.page_size
        entry[0] = first_token - page_slot[0] * a.page_size
        indices = cute.make_tensor(a.kv_indices, cute.make_layout(1 << 30))
        page[0] = Int32(-1)
        if first_token < kv_end:
            page[0] = indices[page_base + page_slot[0]]
        for step in cutlass.range_constexpr(self.stages - 1):
            self._issue(a, step, my_tiles, ring, first_token, kv_end, page_slot, entry, page, page_base,
                        head_offset, lane, indices)

        # Q stays in registers for the whole item (head_dim 256: reloaded per tile, for registers)
        if const_expr(self.q_in_registers):
            for k in cutlass.range_constexpr(cute.size(r_q, mode=[2])):
                cute.copy(load_a, q_from[None, None, k], q_to[None, None, k])
        k_steps = cute.size(r_q, mode=[2])
        for step in cutlass.range(my_tiles, unroll=1):
            # refill the stage the previous step used before waiting: stages - 1 tiles stay in
            # flight during the wait too (the warp barrier orders every lane's ldmatrix reads of
            # it before the new writes)
            cute.arch.sync_warp()
            self._issue(a, step + self.stages - 1, my_tiles, ring, first_token, kv_end, page_slot, entry, page,
                        page_base, head_offset, lane, indices)
            cute.arch.cp_async_wait_group(self.stages - 1)
            cute.arch.sync_warp()  # every lane's pieces of this tile have landed
            stage_base = ring + cute.assume((step % self.stages) * 2 * self.tile_elems, divby=128)
            tile_start = kv_start + (step * WARPS + warp_id) * TILE
            # ---- stage 3: one tile ---------------------------------------------------
            s_k = cute.make_tensor(stage_base, self._smem_layout(TILE))
            s_v = cute.make_tensor(stage_base + self.tile_elems, self._smem_layout(TILE))
            r_k = thr_mma.make_fragment_B(thr_mma.partition_B(s_k))
            k_from = load_b.get_slice(lane).partition_S(s_k)
            k_to = load_b.get_slice(lane).retile(r_k)
            # S = Q·K^T in two accumulators (even and odd k-blocks): half-length MMA chains
            acc_s = cute.make_rmem_tensor(thr_mma.partition_shape_C((ROWS, TILE)), Float32)
            acc_odd = cute.make_rmem_tensor(thr_mma.partition_shape_C((ROWS, TILE)), Float32)
            acc_s.fill(0.0)
            acc_odd.fill(0.0)
            for k in cutlass.range_constexpr(k_steps):
                if const_expr(not self.q_in_registers):
                    cute.copy(load_a, q_from[None, None, k], q_to[None, None, k])
                cute.copy(load_b, k_from[None, None, k], k_to[None, None, k])
                cute.gemm(tiled_mma, acc_s if k % 2 == 0 else acc_odd, r_q[None, None, k], r_k[None, None, k],
                          acc_s if k % 2 == 0 else acc_odd)
            acc_s.store(acc_s.load() + acc_odd.load())
            self._softmax_step(a, acc_s, quad_col, o_rows, row_max, row_sum, tile_start, kv_end)
            r_p = cute.make_fragment_like(acc_s, self.dtype)
            r_p.store(acc_s.load().to(self.dtype))
            # the S accumulators of two 8-token MMAs are the A operand of one 16-token MMA
            p_as_a = cute.make_tensor(r_p.iterator, self._acc_as_a(r_p.layout))
            s_vt = cute.composition(s_v, cute.make_layout((self.head_dim, TILE), stride=(TILE, 1)))
            r_v = thr_mma.make_fragment_B(thr_mma.partition_B(s_vt))
            cute.copy(load_bt, load_bt.get_slice(lane).partition_S(s_vt), load_bt.get_slice(lane).retile(r_v))
            cute.gemm(tiled_mma, acc_o, p_as_a, r_v, acc_o)
        cute.arch.cp_async_wait_group(0)
        cute.arch.barrier()  # every warp is done with its ring: the merge may reuse it

        # ---- stage 4: merge the warps, write ------------------------------------------
        if live:
            self._finish(a, smem, acc_o, row_max, row_sum, thr_mma, tidx, warp_id, lane, request, partial_row, with_sink,
                         first_head, heads_here)

    # ------------------------------------------------------------------ #
    # 4. stages
    # ------------------------------------------------------------------ #
    def _padded(self, row, chunk):
        """Element offset of 16-byte piece ``chunk`` of ``row`` in a padded tile."""
        return cute.assume(row * self.row_stride + chunk * VEC, divby=VEC)

    def _smem_layout(self, rows: int):
        """(rows, head_dim) with padded rows, as ldmatrix partitions see it."""
        return cute.make_layout((rows, self.head_dim), stride=(self.row_stride, 1))

    @cute.jit
    def _issue(self, a, step, my_tiles, ring, first_token, kv_end, page_slot, entry, page, page_base, head_offset,
               lane, indices):
        """Start this lane's loads of the warp's tile ``step`` into its stage, move its token
        a step on (4 tiles) and load that token's page id; commit a group either way."""
        if step < my_tiles:
            stage_base = ring + cute.assume((step % self.stages) * 2 * self.tile_elems, divby=128)
            token = first_token + step * launch.mma_decode_step()
            atom = cute.make_copy_atom(cpasync.CopyG2SOp(cache_mode=cpasync.LoadCacheMode.GLOBAL), self.dtype,
                                       num_bits_per_copy=128)
            valid = token < kv_end and page[0] >= 0 and page[0] < a.num_pages
            self._load_rows(a, atom, stage_base, valid, head_offset, lane, page[0], entry[0])
            entry[0] = entry[0] + a.tile_rem
            page_slot[0] = page_slot[0] + a.tile_pages
            if entry[0] >= a.page_size:
                entry[0] = entry[0] - a.page_size
                page_slot[0] = page_slot[0] + 1
            if token + launch.mma_decode_step() < kv_end:
                page[0] = indices[page_base + page_slot[0]]
        cute.arch.cp_async_commit_group()

    @cute.jit
    def _load_rows(self, a, atom, stage_base, valid, head_offset, lane, page, entry):
        """Whole rows per instruction: lane j < 16 has row j's address (-1: zeros), shuffled to
        the ``chunks`` lanes that read that row's consecutive 16-byte pieces."""
        offset = cutlass.select_(valid, Int64(page) * a.cache_stride_page + Int64(entry) * a.cache_stride_entry
                                 + head_offset, Int64(-1))
        rows_per_load = 32 // self.chunks
        column = (lane % self.chunks) * VEC
        sub = lane // self.chunks
        piece = cute.make_layout(VEC)
        for i in cutlass.range_constexpr(TILE // rows_per_load):
            row = i * rows_per_load + sub
            row_offset = cute.arch.shuffle_sync(offset, row)
            dst = stage_base + self._padded(row, lane % self.chunks)
            k_dst = cute.make_tensor(dst, piece)
            v_dst = cute.make_tensor(dst + self.tile_elems, piece)
            if row_offset >= 0:
                src = cute.assume(row_offset + column, divby=VEC)
                cute.copy(atom, cute.make_tensor(a.k_cache + src, piece), k_dst)
                cute.copy(atom, cute.make_tensor(a.v_cache + src, piece), v_dst)
            else:
                k_dst.fill(0)
                v_dst.fill(0)

    @cute.jit
    def _softmax_step(self, a, acc_s, quad_col, o_rows, row_max, row_sum, tile_start, kv_end):
        """The online softmax of one tile on this thread's two rows. Scores become base-2
        logits ``t * mult``: t the raw score and mult = q_scale, or with a soft cap t =
        cap_scale * tanh(score * q_scale) and mult = 1 (so the scale rides in the exp2's FFMA).
        Tokens past the range (last tile only) are masked; O is rescaled only when some row
        of the warp has a new maximum."""
        s_rows = self._rows_view(acc_s)
        columns = cute.size(s_rows, mode=[1])
        mult = a.q_scale
        if a.cap_scale != Float32(0.0):
            mult = Float32(1.0)
            for r in cutlass.range_constexpr(2):
                for c in cutlass.range_constexpr(columns):
                    s_rows[r, c] = a.cap_scale * cute.math.tanh(s_rows[r, c] * a.q_scale, fastmath=True)
        if tile_start + TILE > kv_end:
            for r in cutlass.range_constexpr(2):
                for c in cutlass.range_constexpr(columns):
                    valid = tile_start + (c // 2) * 8 + (c % 2) + quad_col < kv_end
                    s_rows[r, c] = cutlass.select_(valid, s_rows[r, c], Float32(NEG_INF))
        rescale = cute.make_rmem_tensor(cute.make_layout(2), Float32)
        changed = False
        for r in cutlass.range_constexpr(2):
            tile_max = s_rows[r, 0]
            for c in cutlass.range_constexpr(1, columns):
                tile_max = cute.arch.fmax(tile_max, s_rows[r, c])
            tile_max = cute.arch.fmax(tile_max, cute.arch.shuffle_sync_bfly(tile_max, offset=1))
            tile_max = cute.arch.fmax(tile_max, cute.arch.shuffle_sync_bfly(tile_max, offset=2))
            scaled_max = cutlass.select_(tile_max == Float32(NEG_INF), Float32(NEG_INF), tile_max * mult)
            new_max = cute.arch.fmax(row_max[r], scaled_max)
            changed = changed or new_max != row_max[r]
            # 0 while every score so far is masked: 2^(-inf - 0) = 0, never NaN
            ref = cutlass.select_(new_max == Float32(NEG_INF), Float32(0.0), new_max)
            rescale[r] = cute.math.exp2(row_max[r] - ref, fastmath=True)
            total = row_sum[r] * rescale[r]
            for c in cutlass.range_constexpr(columns):
                p = cute.math.exp2(s_rows[r, c] * mult - ref, fastmath=True)
                s_rows[r, c] = p
                total = total + p
            row_sum[r] = total
            row_max[r] = new_max
        if cute.arch.vote_any_sync(changed):
            for r in cutlass.range_constexpr(2):
                for c in cutlass.range_constexpr(cute.size(o_rows, mode=[1])):
                    o_rows[r, c] = o_rows[r, c] * rescale[r]

    @staticmethod
    def _rows_view(acc: cute.Tensor) -> cute.Tensor:
        """An accumulator fragment ((2, 2), 1, N) seen as (2 rows, 2 * N columns) of this thread."""
        layout = cute.make_layout(acc.layout.shape)
        return cute.make_tensor(acc.iterator, cute.make_layout(
            ((layout.shape[0][1], layout.shape[1]), (layout.shape[0][0], layout.shape[2])),
            stride=((layout.stride[0][1], layout.stride[1]), (layout.stride[0][0], layout.stride[2]))))

    @staticmethod
    def _acc_as_a(layout):
        """((2, 2), 1, N) accumulators -> ((2, 2, 2), 1, N / 2) A-operand values (pairs of n-tiles)."""
        divided = cute.logical_divide(layout, (None, None, 2))
        return cute.make_layout(
            ((divided.shape[0], divided.shape[2][0]), divided.shape[1], divided.shape[2][1]),
            stride=((divided.stride[0], divided.stride[2][0]), divided.stride[1], divided.stride[2][1]))

    @cute.jit
    def _finish(self, a, smem, acc_o, row_max, row_sum, thr_mma, tidx, warp_id, lane, request, partial_row, with_sink,
                first_head, heads_here):
        """Each warp's (O, max, sum) into shared memory, then every thread merges the four (and
        the head's sink: a logit with no value) for its 16-byte pieces of the output rows and
        writes them (and the rows' lse)."""
        d = self.head_dim
        f32 = cute.recast_ptr(smem, dtype=Float32)
        o_all = cute.make_tensor(f32, cute.make_layout((WARPS, ROWS, d), stride=(ROWS * d, d, 1)))
        stats = cute.make_tensor(f32 + WARPS * ROWS * d, cute.make_layout((2, WARPS, ROWS), stride=(WARPS * ROWS, ROWS, 1)))
        cute.autovec_copy(acc_o, thr_mma.partition_C(o_all[warp_id, None, None]))
        for r in cutlass.range_constexpr(2):
            total = row_sum[r]
            total = total + cute.arch.shuffle_sync_bfly(total, offset=1)
            total = total + cute.arch.shuffle_sync_bfly(total, offset=2)
            if lane % 4 == 0:
                row = lane // 4 + 8 * r
                stats[0, warp_id, row] = row_max[r]
                stats[1, warp_id, row] = total
        cute.arch.barrier()
        for task in cutlass.range_constexpr(ROWS * self.chunks // (WARPS * 32)):
            piece = task * WARPS * 32 + tidx
            row = piece // self.chunks
            col = (piece % self.chunks) * VEC
            if row < heads_here:
                head = first_head + row
                sink = Float32(NEG_INF)
                if with_sink:
                    sink = cute.make_tensor(a.sinks, cute.make_layout(a.num_qo_heads))[head] * Float32(LOG2E)
                m = cute.arch.fmax(stats[0, 0, row], sink)
                for w in cutlass.range_constexpr(1, WARPS):
                    m = cute.arch.fmax(m, stats[0, w, row])
                ref = cutlass.select_(m == Float32(NEG_INF), Float32(0.0), m)
                acc = cute.make_rmem_tensor(cute.make_layout(VEC), Float32)
                acc.fill(0.0)
                total = cute.math.exp2(sink - ref, fastmath=True)
                for w in cutlass.range_constexpr(WARPS):
                    weight = cute.math.exp2(stats[0, w, row] - ref, fastmath=True)
                    total = total + stats[1, w, row] * weight
                    part = cute.make_tensor(o_all[w, row, None].iterator + col, cute.make_layout(VEC))
                    acc.store(acc.load() + part.load() * weight)
                nonempty = total > Float32(0.0)
                inv = cutlass.select_(nonempty, cute.arch.rcp_approx(total), Float32(0.0))
                lse = cutlass.select_(nonempty, m + cute.math.log2(total, fastmath=True), Float32(NEG_INF))
                result = cute.make_rmem_tensor(cute.make_layout(VEC), self.dtype)
                result.store((acc.load() * (inv * a.out_scale)).to(self.dtype))
                if partial_row < 0:
                    offset = Int64(request) * a.out_stride_batch + Int64(head) * a.out_stride_head + col
                    cute.make_tensor(a.out + cute.assume(offset, divby=VEC), cute.make_layout(VEC)).store(result.load())
                    if a.write_lse != 0 and col == 0:
                        cute.make_tensor(a.lse + Int64(request) * a.lse_stride_batch + Int64(head),
                                         cute.make_layout(1))[0] = lse
                else:
                    tmp_row = Int64(partial_row) * a.num_qo_heads + Int64(head)
                    offset = tmp_row * d + col
                    cute.make_tensor(a.tmp_v + cute.assume(offset, divby=VEC), cute.make_layout(VEC)).store(result.load())
                    if col == 0:
                        cute.make_tensor(a.tmp_s + tmp_row, cute.make_layout(1))[0] = lse
