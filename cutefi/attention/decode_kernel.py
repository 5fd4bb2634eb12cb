"""Batch decode attention over a paged KV cache in CuTe DSL (FlashInfer's BatchDecode): one
query token per request attends to that request's KV pages. Mapping, ABI and launch:
``launch.py`` (``decode_contract``, ``decode_geometry``); work items: ``decode_plan.py``.

Stages of a CTA (one work item, ``heads`` q heads of one kv head):
  0. the item (request, token range, partial row) and this thread's place;
  1. q heads into registers, pre-scaled so that scores are base-2 logits;
  2. a cp.async pipeline of ``stages`` K/V tiles, every 16-byte piece addressed through the
     page table (page ids loaded a tile ahead), tokens past the range zero-filled;
  3. per tile: scores (8-element partial dots, a butterfly over the row's lanes), soft cap,
     range mask, online softmax, P·V, all in fp32;
  4. the token slots' states merged through shared memory; the output (or a partial state
     for the split-KV merge) and its base-2 log-sum-exp written.
"""

from __future__ import annotations

import operator

import cutlass
import cutlass.cute as cute
from cutlass import Float32, Int32, Int64, const_expr

from cutefi.attention import launch
from cutefi.cute import args as kernel_args
from cutefi.cute.args import KernelArgs
from cutefi.cute.attention_state import NEG_INF
from cutefi.cute.dtypes import cute_dtype
from cutefi.cute.pdl import wait_for_inputs
from cutefi.cute.reduce import warp_reduce

VEC = launch.VEC


class BatchDecodeKernel:
    # ------------------------------------------------------------------ #
    # 1. specialisation
    # ------------------------------------------------------------------ #
    def __init__(self, dtype: str, kv_dtype: str, head_dim: int, heads: int):
        if dtype not in launch.DTYPES or kv_dtype not in launch.DECODE_KV_DTYPES \
                or head_dim not in launch.DECODE_HEAD_DIMS or heads not in launch.DECODE_HEADS:
            raise ValueError(f"unsupported decode build {dtype!r}, kv {kv_dtype!r}, head_dim={head_dim}, "
                             f"heads={heads}")
        self.contract = launch.decode_contract(dtype, kv_dtype, head_dim, heads)
        self.dtype = cute_dtype(dtype)
        self.kv_dtype = cute_dtype(dtype if kv_dtype == "same" else kv_dtype)
        self.head_dim = head_dim
        self.heads = heads
        geo = launch.decode_geometry(head_dim, heads)
        self.lanes, self.heads_per_thread, self.head_groups = geo.lanes, geo.heads_per_thread, geo.head_groups
        self.slots, self.tile, self.stages = geo.slots, geo.tile, geo.stages
        self.tokens_per_slot = self.tile // self.slots  # tokens a row scores per tile
        self.kv_bytes = self.kv_dtype.width // 8
        self.piece = 16 // self.kv_bytes  # elements of one 16-byte cp.async piece
        self.pieces_per_row = head_dim // self.piece
        self.passes = self.tile * self.pieces_per_row // launch.DECODE_THREADS

    # ------------------------------------------------------------------ #
    # 2. host wrapper: the contract's launch
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
        item, sub, kv_head = cute.arch.block_idx()
        hpt = self.heads_per_thread

        # ---- stage 0: the work item and this thread's place --------------------
        lane = tidx % self.lanes
        row = tidx // self.lanes
        head_group = row // self.slots
        slot = row - head_group * self.slots
        first_head = kv_head * a.group + sub * self.heads + head_group * hpt
        wait_for_inputs()
        work = cute.make_tensor(a.work, cute.make_layout((4, a.items), stride=(a.items, 1)))
        # request < 0: an idle item (a CUDA-graph plan pads its fixed grid with them)
        live = work[0, item] >= 0
        request = cutlass.max(work[0, item], 0)
        kv_start = work[1, item]
        kv_end = work[2, item]
        partial_row = work[3, item]
        page_base = cute.make_tensor(a.kv_indptr, cute.make_layout(request + 1))[request]
        tiles = cutlass.select_(live, cute.ceil_div(cutlass.max(kv_end - kv_start, 0), self.tile), 0)

        # ---- stage 1: q heads, scaled to base-2 logits ---------------------------
        q = cute.make_rmem_tensor(cute.make_layout((hpt, VEC)), Float32)
        for h in cutlass.range_constexpr(hpt):
            offset = Int64(request) * a.q_stride_batch + Int64(first_head + h) * a.q_stride_head + lane * VEC
            q_vec = cute.make_rmem_tensor(cute.make_layout(VEC), self.dtype)
            q_vec.store(self._vector(a.q, offset).load())
            q_f32 = cute.make_rmem_tensor(cute.make_layout(VEC), Float32)
            q_f32.store(q_vec.load().to(Float32))
            for e in cutlass.range_constexpr(VEC):
                q[h, e] = q_f32[e] * a.q_scale

        # ---- stage 2: the K/V pipeline's addressing -------------------------------
        smem = cute.arch.get_dyn_smem(self.kv_dtype, alignment=128)
        tile_elems = self.tile * self.head_dim
        k_tiles = cute.make_tensor(smem, cute.make_layout((self.stages, tile_elems), stride=(2 * tile_elems, 1)))
        v_tiles = cute.make_tensor(smem + tile_elems, cute.make_layout((self.stages, tile_elems),
                                                                        stride=(2 * tile_elems, 1)))
        # this thread's pieces: pass p loads token (p * rows_per_pass + load_row) of the tile
        rows_per_pass = launch.DECODE_THREADS // self.pieces_per_row
        load_row = tidx // self.pieces_per_row
        load_col = (tidx % self.pieces_per_row) * self.piece
        head_offset = Int64(kv_head) * a.cache_stride_head + load_col
        # (page slot, entry in page) of each pass's token at the next tile to issue
        page_slot = cute.make_rmem_tensor(cute.make_layout(self.passes), Int32)
        entry = cute.make_rmem_tensor(cute.make_layout(self.passes), Int32)
        page = cute.make_rmem_tensor(cute.make_layout(self.passes), Int32)
        indices = cute.make_tensor(a.kv_indices, cute.make_layout(1 << 30))
        for p in cutlass.range_constexpr(self.passes):
            token = kv_start + p * rows_per_pass + load_row
            page_slot[p] = token // a.page_size
            entry[p] = token - page_slot[p] * a.page_size
            page[p] = Int32(0)
            if token < kv_end:
                page[p] = indices[page_base + page_slot[p]]

        # ---- the pipeline: stages-1 tiles ahead ------------------------------------
        for t in cutlass.range_constexpr(self.stages - 1):
            self._issue(a, t, tiles, kv_start, kv_end, k_tiles, v_tiles, page_slot, entry, page, page_base,
                        head_offset, load_row, load_col, rows_per_pass, indices)

        # ---- stage 3: scores, online softmax, P·V, tile by tile ------------------
        o = cute.make_rmem_tensor(cute.make_layout((hpt, VEC)), Float32)
        o.fill(0.0)
        m = cute.make_rmem_tensor(cute.make_layout(hpt), Float32)
        d = cute.make_rmem_tensor(cute.make_layout(hpt), Float32)
        m.fill(NEG_INF)
        d.fill(0.0)
        for t in cutlass.range(tiles, unroll=1):
            cute.arch.cp_async_wait_group(self.stages - 2)
            cute.arch.barrier()
            # the stage read at the previous iteration is free: refill it
            self._issue(a, t + self.stages - 1, tiles, kv_start, kv_end, k_tiles, v_tiles, page_slot, entry, page,
                        page_base, head_offset, load_row, load_col, rows_per_pass, indices)
            stage = t % self.stages
            self._attend_tile(a, q, o, m, d, k_tiles, v_tiles, stage, kv_start + t * self.tile, kv_end, slot, lane)
        cute.arch.cp_async_wait_group(0)
        cute.arch.barrier()

        # ---- stage 4: merge the token slots, write -------------------------------
        if live:
            self._finish(a, o, m, d, smem, item, request, partial_row, first_head, head_group, slot, lane)

    # ------------------------------------------------------------------ #
    # 4. stages
    # ------------------------------------------------------------------ #
    @cute.jit
    def _vector(self, ptr: cute.Pointer, offset: Int64) -> cute.Tensor:
        """8 elements at ``ptr + offset`` (offset a multiple of 8: 16-byte aligned rows)."""
        return cute.make_tensor(ptr + cute.assume(offset, divby=VEC), cute.make_layout(VEC))

    @cute.jit
    def _issue(self, a, t, tiles, kv_start, kv_end, k_tiles, v_tiles, page_slot, entry, page, page_base,
               head_offset, load_row, load_col, rows_per_pass, indices):
        """Start the loads of tile ``t`` (if it exists) into its stage, advance this thread's
        tokens to tile ``t + 1`` and load their page ids; always commit a group (so the
        group count stays one per tile)."""
        if t < tiles:
            stage = t % self.stages
            atom = cute.make_copy_atom(cute.nvgpu.cpasync.CopyG2SOp(cache_mode=cute.nvgpu.cpasync.LoadCacheMode.GLOBAL),
                                       self.kv_dtype, num_bits_per_copy=128)
            piece = cute.make_layout(self.piece)
            for p in cutlass.range_constexpr(self.passes):
                token_in_tile = p * rows_per_pass + load_row
                dst = cute.assume(token_in_tile * self.head_dim + load_col, divby=self.piece)
                k_dst = cute.make_tensor(k_tiles[stage, None].iterator + dst, piece)
                v_dst = cute.make_tensor(v_tiles[stage, None].iterator + dst, piece)
                # a page id outside the cache reads as zeros (never out of bounds)
                if kv_start + t * self.tile + token_in_tile < kv_end and page[p] >= 0 and page[p] < a.num_pages:
                    src = (Int64(page[p]) * a.cache_stride_page + Int64(entry[p]) * a.cache_stride_entry
                           + head_offset)
                    src = cute.assume(src, divby=self.piece)
                    cute.copy(atom, cute.make_tensor(a.k_cache + src, piece), k_dst)
                    cute.copy(atom, cute.make_tensor(a.v_cache + src, piece), v_dst)
                else:  # past the range: zeros (a stale V row times p = 0 could be NaN)
                    k_dst.fill(0)
                    v_dst.fill(0)
                # the same token of the next tile: tile = tile_pages pages + tile_rem entries
                entry[p] = entry[p] + a.tile_rem
                page_slot[p] = page_slot[p] + a.tile_pages
                if entry[p] >= a.page_size:
                    entry[p] = entry[p] - a.page_size
                    page_slot[p] = page_slot[p] + 1
                if kv_start + (t + 1) * self.tile + token_in_tile < kv_end:
                    page[p] = indices[page_base + page_slot[p]]
        cute.arch.cp_async_commit_group()

    @cute.jit
    def _attend_tile(self, a, q, o, m, d, k_tiles, v_tiles, stage, tile_start, kv_end, slot, lane):
        hpt = self.heads_per_thread
        n = self.tokens_per_slot
        scores = cute.make_rmem_tensor(cute.make_layout((hpt, n)), Float32)
        # scores: this lane's 8-element partial dots, then a butterfly over the row's lanes
        for u in cutlass.range_constexpr(n):
            k = self._smem_vector(k_tiles, stage, u * self.slots + slot, lane)
            for h in cutlass.range_constexpr(hpt):
                acc = q[h, 0] * k[0]
                for e in cutlass.range_constexpr(1, VEC):
                    acc = acc + q[h, e] * k[e]
                scores[h, u] = acc
        for u in cutlass.range_constexpr(n):
            valid = tile_start + u * self.slots + slot < kv_end
            for h in cutlass.range_constexpr(hpt):
                s = warp_reduce(scores[h, u], operator.add, self.lanes)
                if a.cap_scale != Float32(0.0):  # soft cap: cap * tanh(s / cap), q holds the 1/cap
                    s = a.cap_scale * cute.math.tanh(s, fastmath=True)
                scores[h, u] = cutlass.select_(valid, s, Float32(NEG_INF))
        # online softmax: one rescale of the running state per tile
        p = cute.make_rmem_tensor(cute.make_layout((hpt, n)), Float32)
        for h in cutlass.range_constexpr(hpt):
            m_new = m[h]
            for u in cutlass.range_constexpr(n):
                m_new = cute.arch.fmax(m_new, scores[h, u])
            # 0 while every score so far is masked, so 2^(-inf - ref) is 0, never NaN
            ref = cutlass.select_(m_new == Float32(NEG_INF), Float32(0.0), m_new)
            rescale = cute.math.exp2(m[h] - ref, fastmath=True)
            total = d[h] * rescale
            for u in cutlass.range_constexpr(n):
                p[h, u] = cute.math.exp2(scores[h, u] - ref, fastmath=True)
                total = total + p[h, u]
            d[h] = total
            m[h] = m_new
            for e in cutlass.range_constexpr(VEC):
                o[h, e] = o[h, e] * rescale
        for u in cutlass.range_constexpr(n):
            v = self._smem_vector(v_tiles, stage, u * self.slots + slot, lane)
            for h in cutlass.range_constexpr(hpt):
                for e in cutlass.range_constexpr(VEC):
                    o[h, e] = o[h, e] + p[h, u] * v[e]

    @cute.jit
    def _smem_vector(self, tiles: cute.Tensor, stage, token, lane) -> cute.Tensor:
        """This lane's 8 elements of a token row of a stage, as fp32 registers."""
        offset = cute.assume(token * self.head_dim + lane * VEC, divby=VEC)  # 16-byte vectors
        raw = cute.make_rmem_tensor(cute.make_layout(VEC), self.kv_dtype)
        raw.store(cute.make_tensor(tiles[stage, None].iterator + offset, cute.make_layout(VEC)).load())
        values = cute.make_rmem_tensor(cute.make_layout(VEC), Float32)
        values.store(raw.load().to(Float32))
        return values

    @cute.jit
    def _finish(self, a, o, m, d, smem, item, request, partial_row, first_head, head_group, slot, lane):
        """Merge the token slots of each head (slot 0 folds the others in from shared memory),
        normalise and write the output or the partial state."""
        hpt = self.heads_per_thread
        # fp32 states in the (now idle) pipeline buffers: o [slots, heads, head_dim], then m, d
        state_smem = cute.recast_ptr(smem, dtype=Float32)
        o_all = cute.make_tensor(state_smem, cute.make_layout((self.slots, self.heads, self.head_dim)))
        md_all = cute.make_tensor(state_smem + self.slots * self.heads * self.head_dim,
                                  cute.make_layout((2, self.slots, self.heads)))
        for h in cutlass.range_constexpr(hpt):
            head = head_group * hpt + h
            for e in cutlass.range_constexpr(VEC):
                o_all[slot, head, lane * VEC + e] = o[h, e]
            if lane == 0:
                md_all[0, slot, head] = m[h]
                md_all[1, slot, head] = d[h]
        cute.arch.barrier()
        if slot == 0:
            for h in cutlass.range_constexpr(hpt):
                head = head_group * hpt + h
                m_max = md_all[0, 0, head]
                for z in cutlass.range_constexpr(1, self.slots):
                    m_max = cute.arch.fmax(m_max, md_all[0, z, head])
                ref = cutlass.select_(m_max == Float32(NEG_INF), Float32(0.0), m_max)
                total = Float32(0.0)
                acc = cute.make_rmem_tensor(cute.make_layout(VEC), Float32)
                acc.fill(0.0)
                for z in cutlass.range_constexpr(self.slots):
                    w = cute.math.exp2(md_all[0, z, head] - ref, fastmath=True)
                    total = total + md_all[1, z, head] * w
                    for e in cutlass.range_constexpr(VEC):
                        acc[e] = acc[e] + o_all[z, head, lane * VEC + e] * w
                nonempty = total > Float32(0.0)
                inv = cutlass.select_(nonempty, cute.arch.rcp_approx(total), Float32(0.0))
                lse = cutlass.select_(nonempty, m_max + cute.math.log2(total, fastmath=True), Float32(NEG_INF))
                result = cute.make_rmem_tensor(cute.make_layout(VEC), self.dtype)
                result.store((acc.load() * (inv * a.out_scale)).to(self.dtype))
                qo_head = first_head + h
                if partial_row < 0:
                    out_offset = Int64(request) * a.out_stride_batch + Int64(qo_head) * a.out_stride_head
                    self._vector(a.out, out_offset + lane * VEC).store(result.load())
                    if a.write_lse != 0 and lane == 0:
                        lse_offset = Int64(request) * a.lse_stride_batch + Int64(qo_head)
                        cute.make_tensor(a.lse + lse_offset, cute.make_layout(1))[0] = lse
                else:
                    tmp_row = Int64(partial_row) * a.num_qo_heads + Int64(qo_head)
                    self._vector(a.tmp_v, tmp_row * self.head_dim + lane * VEC).store(result.load())
                    if lane == 0:
                        cute.make_tensor(a.tmp_s + tmp_row, cute.make_layout(1))[0] = lse
