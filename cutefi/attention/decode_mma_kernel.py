"""Batch decode attention over a paged KV cache on tensor cores (mma.sync m16n8k16), in CuTe
DSL. Mapping, ABI and launch: ``launch.py`` (``mma_decode_contract``); work items:
``decode_plan.py``.

The q heads of one kv head (up to 16, zero-padded) are the M rows of the MMAs, so a KV byte
costs the same few instructions whatever the GQA group (groups up to 8 take the narrow builds,
``decode_narrow_kernel.py``, which subclass this one and put the heads on N). Stages of a CTA:
  0. the work item, this warp's share of its 16-token tiles;
  1. the Q tile into shared memory (heads past the group as zero rows);
  2. per warp, a private ring of K/V tiles filled by cp.async through the page table: lane j
     keeps the page of the tile's row j (loaded a step ahead) and shuffles the row's address
     to the lanes that read it, so each instruction reads whole rows (full DRAM bursts: 1.5x
     faster than lanes reading 32-byte slices of 16 rows); a row's 16-byte pieces are
     XOR-swizzled in shared memory so ldmatrix reads 8 rows from 8 bank groups while each
     128-byte line still lands in one 128-byte segment; each piece's L2 fetch is a whole
     128-byte line (``cute/cp_async.py``); tokens past the range (or on a page id outside the
     cache) are zero-filled;
  3. per tile: S = Q·K^T (ldmatrix, mma), scale, soft cap and range mask, online softmax
     on the accumulator rows, O += P·V (P from the S registers, V by ldmatrix.trans); FP8
     builds with deep rings take two tiles a step (``launch.mma_decode_pair_tiles``);
  4. the four warps' states merged through shared memory; the output (or the partial state
     of a split request) and its base-2 log-sum-exp written (``decode_merge.py``).
"""

from __future__ import annotations

import cutlass
import cutlass.cute as cute
from cutlass import Float32, Int32, Int64, Uint32, const_expr
from cutlass.cute.nvgpu import warp

from cutefi.attention import launch
from cutefi.attention.decode_merge import MergeStages
from cutefi.attention.decode_rope import RopeStages
from cutefi.cute import args as kernel_args
from cutefi.cute.args import KernelArgs
from cutefi.cute.attention_state import NEG_INF
from cutefi.cute.cp_async import cp_async_16
from cutefi.cute.dtypes import cute_dtype
from cutefi.cute.fp8_widen import widen_factor, widen_interleaved, widen_pair
from cutefi.cute.mma_frag import acc_as_a, rows_view
from cutefi.cute.pdl import wait_for_inputs

VEC = launch.VEC  # 16-bit elements of a 16-byte piece
ROWS = launch.MMA_DECODE_ROWS
LOG2E = 1.4426950408889634
TILE = launch.MMA_DECODE_TILE
WARPS = launch.MMA_DECODE_WARPS
F16_MAX = 65504.0
L2_PREFETCH = 128  # bytes the L2 fetches around a K/V piece (``cute/cp_async.py``)


class BatchDecodeMmaKernel(RopeStages, MergeStages):
    # ------------------------------------------------------------------ #
    # 1. specialisation
    # ------------------------------------------------------------------ #
    def __init__(self, dtype: str, kv_dtype: str, head_dim: int, stages: int, rope: bool, software_fp8: bool = False):
        if (dtype, kv_dtype, head_dim, stages, rope) not in launch.MMA_DECODE_SPECS:
            raise ValueError(f"unsupported tensor-core decode build {dtype!r}, kv {kv_dtype!r}, head_dim={head_dim}, "
                             f"stages={stages}, rope={rope}")
        self.contract = launch.mma_decode_contract(dtype, kv_dtype, head_dim, stages, rope, software_fp8)
        self._configure(dtype, kv_dtype, head_dim, stages, rope, software_fp8)

    def _configure(self, dtype: str, kv_dtype: str, head_dim: int, stages: int, rope: bool, software_fp8: bool):
        """The build's constants (shared with the narrow builds, ``decode_narrow_kernel.py``)."""
        self.rows = ROWS  # q heads a CTA holds
        self.packed = False  # kv heads packed into a tile's rows (``pack_shift``): the narrow builds
        # two tiles a warp step: their S chains are independent and one softmax round covers 32
        # tokens (stages - 2 tiles stay in flight during a step's wait instead of stages - 1)
        self.pair_tiles = launch.mma_decode_pair_tiles(kv_dtype, stages)
        self.software_fp8 = software_fp8  # sm_80/86's FP8 widening on any target (a test build)
        self.rope = rope
        self.dtype = cute_dtype(dtype)
        # the MMAs' type: q's, or f16 against FP8 KV (it holds every FP8 value exactly; bf16 q
        # is converted, saturated at +-65504, and P gains precision)
        self.mma_dtype = cutlass.Float16 if kv_dtype in launch.KV_FP8 else self.dtype
        self.kv_format = kv_dtype
        self.fp8 = kv_dtype in launch.KV_FP8
        self.head_dim = head_dim
        self.stages = stages
        # shared memory and the cp.async/ldmatrix paths count in 16-bit units: an FP8 row of
        # head_dim codes is head_dim / 2 of them
        self.kv_cols = head_dim * launch.kv_bytes(kv_dtype) // 2
        self.q_chunks = head_dim // VEC  # 16-byte pieces of a q (and output) row
        self.kv_chunks = self.kv_cols // VEC  # 16-byte pieces of a K/V row
        # Q rows padded by one 16-byte piece: 8 rows at one column fall in 8 distinct bank groups
        self.q_stride = head_dim + VEC
        # K/V rows are dense and their 16-byte pieces XOR-swizzled instead (launch.kv_swizzle):
        # a padded row would start mid-128-byte segment, and the L1 splits such a cp.async
        # line into requests that fetch the straddling sectors from L2 twice (ncu: 1.5x the
        # L2->L1 sectors of the bytes read)
        self.kv_swizzle = launch.kv_swizzle(self.kv_chunks)
        self.tile_elems = TILE * self.kv_cols
        self.q_in_registers = head_dim <= 128
        # the warps' merge reuses the rings and the Q tile after them: their (O, max, sum) must fit
        assert (WARPS * stages * 2 * self.tile_elems + ROWS * self.q_stride) * 2 >= WARPS * ROWS * (head_dim + 2) * 4

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
        work = cute.make_tensor(a.work, cute.make_layout((launch.DECODE_WORK_ROWS, a.items), stride=(a.items, 1)))
        live = work[0, item] >= 0  # an idle item pads a CUDA-graph plan's fixed grid
        request = cutlass.max(work[0, item], 0)
        kv_start = work[1, item]
        kv_end = work[2, item]
        partial_row = work[3, item]
        # the request's attention sink (a logit in every head's denominator) rides on one item
        with_sink = a.has_sinks != 0 and work[4, item] != 0
        page_base = work[6, item]  # kv_indptr[request], put there by the plan: one dependent load fewer
        # 2^shift kv heads a CTA (packed builds): tile row r is token r >> shift of kv head
        # kv_head * 2^shift + (r & (2^shift - 1)), so a token's rows of those heads (adjacent in
        # an NHD page) are read together; the CTA's q heads are their groups', in order
        shift, pack, tile_tokens = 0, 1, TILE
        if const_expr(self.packed):
            shift = a.pack_shift
            pack = Int32(1) << shift
            tile_tokens = Int32(TILE) >> shift
        cta_group = a.group * pack
        first_head = kv_head * cta_group + row_block * self.rows
        heads_here = cutlass.min(cta_group - row_block * self.rows, self.rows)
        tiles = cutlass.select_(live, cute.ceil_div(cutlass.max(kv_end - kv_start, 0), tile_tokens), 0)
        my_tiles = cutlass.max(tiles - warp_id + WARPS - 1, 0) // WARPS  # tiles warp_id, +4, +8, ...

        # ---- shared memory: per-warp K/V rings, then the Q tile ------------------
        smem = cute.arch.get_dyn_smem(self.mma_dtype, alignment=128)
        ring_elems = self.stages * 2 * self.tile_elems
        ring = smem + cute.assume(warp_id * ring_elems, divby=128)
        q_smem = smem + WARPS * ring_elems

        # ---- stage 2 starts first: the ring's first tiles are in flight while Q is staged;
        # lane j keeps the page of row j % 16 of each tile ----------------------------------
        head_offset = Int64(kv_head * pack + (lane % TILE & (pack - 1))) * a.cache_stride_head
        first_token = kv_start + warp_id * tile_tokens + (lane % TILE >> shift)
        step_tokens = WARPS * tile_tokens
        page_slot = cute.make_rmem_tensor(cute.make_layout(1), Int32)
        entry = cute.make_rmem_tensor(cute.make_layout(1), Int32)
        page = cute.make_rmem_tensor(cute.make_layout(1), Int32)
        page_slot[0] = first_token // a.page_size
        entry[0] = first_token - page_slot[0] * a.page_size
        indices = cute.make_tensor(a.kv_indices, cute.make_layout(1 << 30))
        page[0] = Int32(-1)
        if first_token < kv_end:
            page[0] = indices[page_base + page_slot[0]]
        ahead = self.stages - (2 if const_expr(self.pair_tiles) else 1)  # tiles in flight during a wait
        for step in cutlass.range_constexpr(ahead):
            self._issue(a, step, my_tiles, ring, first_token, kv_end, page_slot, entry, page, page_base,
                        head_offset, lane, indices, step_tokens)


        # ---- stage 1: Q tile (zero rows past the group) ---------------------------
        if const_expr(self.rope):
            self._stage_q_rotated(a, q_smem, tidx, request, first_head, heads_here, live,
                                  Float32(work[5, item] - 1))
        else:
            # (rows past self.rows, up to ROWS, are in the tile too: zero-filled)
            for task in cutlass.range_constexpr(-(-self.rows * self.q_chunks // (WARPS * 32))):
                piece = task * WARPS * 32 + tidx
                row = piece // self.q_chunks
                chunk = piece % self.q_chunks
                dst = self._q_dst(q_smem, row, chunk)
                if row < heads_here and live:
                    dst.store(self._to_mma(self._q_src(a, request, first_head + row, chunk).load()).reshape(dst.shape))
                else:
                    dst.fill(0)
        cute.arch.barrier()

        mma, acc_o, row_max, row_sum = self._mma_setup(q_smem, lane)
        same_head = None  # (packed builds) whether this thread's scores pair a q head with its kv head
        if const_expr(self.packed):
            same_head = tuple((lane // 4 & (pack - 1)) == self._head_index(h, lane) // a.group for h in range(2))
        per_step = 2 if const_expr(self.pair_tiles) else 1
        for pass_ in cutlass.range((my_tiles + per_step - 1) // per_step, unroll=1):
            step = pass_ * per_step
            # refill the stages the previous step used before waiting: `ahead` tiles stay in
            # flight during the wait too (the warp barrier orders every lane's ldmatrix reads of
            # them before the new writes)
            cute.arch.sync_warp()
            for t in cutlass.range_constexpr(per_step):
                self._issue(a, step + ahead + t, my_tiles, ring, first_token, kv_end, page_slot, entry, page,
                            page_base, head_offset, lane, indices, step_tokens)
            cute.arch.cp_async_wait_group(ahead)
            cute.arch.sync_warp()  # every lane's pieces of this step's tiles have landed
            # ---- stage 3: one step's tiles -------------------------------------------------
            # (a pair's second tile past my_tiles lies past kv_end: fully masked, P = 0, no P·V)
            tiles_here = []
            for t in cutlass.range_constexpr(per_step):
                stage_base = ring + cute.assume(((step + t) % self.stages) * 2 * self.tile_elems, divby=128)
                tile_start = kv_start + ((step + t) * WARPS + warp_id) * tile_tokens
                tiles_here.append((self._tile_scores(a, mma, stage_base, tile_start, lane), stage_base, tile_start))
            self._softmax_step(a, tiles_here, lane, acc_o, row_max, row_sum, kv_end, shift, tile_tokens, same_head)
            for t in cutlass.range_constexpr(per_step):
                acc_s, stage_base, _ = tiles_here[t]
                if const_expr(t == 0):
                    self._tile_pv(mma, acc_s, stage_base, acc_o, lane)
                elif step + t < my_tiles:
                    self._tile_pv(mma, acc_s, stage_base, acc_o, lane)
        cute.arch.cp_async_wait_group(0)
        cute.arch.barrier()  # every warp is done with its ring: the merge may reuse it

        # ---- stage 4: merge the warps, write ------------------------------------------
        if live:
            self._finish(a, smem, acc_o, row_max, row_sum, mma, tidx, warp_id, lane, request, partial_row, with_sink,
                         first_head, heads_here)

    # ------------------------------------------------------------------ #
    # 4. stages
    # ------------------------------------------------------------------ #
    def _mma_setup(self, q_smem, lane):
        """The MMA partitions, Q's A operands (in registers up to head_dim 128), O's accumulators
        and this thread's rows' running (max, sum)."""
        # N tiled to 16: one ldmatrix.x4 fills a 16 x 16 B block
        tiled_mma = cute.make_tiled_mma(warp.MmaF16BF16Op(self.mma_dtype, Float32, (16, 8, 16)),
                                        permutation_mnk=(ROWS, 16, 16))
        thr_mma = tiled_mma.get_slice(lane)
        s_q = cute.make_tensor(q_smem, cute.make_layout((ROWS, self.head_dim), stride=(self.q_stride, 1)))
        load_a = cute.make_tiled_copy_A(cute.make_copy_atom(warp.LdMatrix8x8x16bOp(False, 4), self.mma_dtype), tiled_mma)
        load_b = cute.make_tiled_copy_B(cute.make_copy_atom(warp.LdMatrix8x8x16bOp(False, 4), self.mma_dtype), tiled_mma)
        load_bt = cute.make_tiled_copy_B(cute.make_copy_atom(warp.LdMatrix8x8x16bOp(True, 4), self.mma_dtype), tiled_mma)
        r_q = thr_mma.make_fragment_A(thr_mma.partition_A(s_q))
        q_from = load_a.get_slice(lane).partition_S(s_q)
        q_to = load_a.get_slice(lane).retile(r_q)
        acc_o = cute.make_rmem_tensor(thr_mma.partition_shape_C((ROWS, self.head_dim)), Float32)
        acc_o.fill(0.0)
        row_max = cute.make_rmem_tensor(cute.make_layout(2), Float32)
        row_sum = cute.make_rmem_tensor(cute.make_layout(2), Float32)  # this thread's columns only
        row_max.fill(NEG_INF)
        row_sum.fill(0.0)
        # Q stays in registers for the whole item (head_dim 256: reloaded per tile, for registers)
        if const_expr(self.q_in_registers):
            for k in range(cute.size(r_q, mode=[2])):  # (a plain method: Python's loop unrolls)
                cute.copy(load_a, q_from[None, None, k], q_to[None, None, k])
        return (tiled_mma, thr_mma, load_a, load_b, load_bt, q_from, q_to, r_q), acc_o, row_max, row_sum

    @cute.jit
    def _tile_scores(self, a, mma, stage_base, tile_start, lane) -> cute.Tensor:
        """S = Q·K^T of the tile at ``stage_base`` (fp32 accumulators, C layout)."""
        tiled_mma, thr_mma, load_a, load_b, load_bt, q_from, q_to, r_q = mma
        s_k = cute.make_tensor(stage_base, self._kv_layout())
        r_kin = thr_mma.make_fragment_B(thr_mma.partition_B(s_k))
        k_from = load_b.get_slice(lane).partition_S(s_k)
        k_to = load_b.get_slice(lane).retile(r_kin)
        r_k = r_kin
        if const_expr(self.fp8):
            r_k = cute.make_rmem_tensor(thr_mma.partition_shape_B((TILE, self.head_dim)), self.mma_dtype)
        # two accumulators (halves of the k-blocks): half-length MMA chains
        acc_s = cute.make_rmem_tensor(thr_mma.partition_shape_C((ROWS, TILE)), Float32)
        acc_hi = cute.make_rmem_tensor(thr_mma.partition_shape_C((ROWS, TILE)), Float32)
        acc_s.fill(0.0)
        acc_hi.fill(0.0)
        self._scores(a, (tiled_mma, load_a, load_b, q_from, q_to, r_q, k_from, k_to, r_kin, r_k, acc_s, acc_hi),
                     tile_start, lane)
        acc_s.store(acc_s.load() + acc_hi.load())
        return acc_s

    @cute.jit
    def _tile_pv(self, mma, acc_s: cute.Tensor, stage_base, acc_o: cute.Tensor, lane):
        """O += P·V of the tile at ``stage_base``: P (the softmaxed scores) from registers."""
        tiled_mma, thr_mma, load_a, load_b, load_bt, q_from, q_to, r_q = mma
        r_p = cute.make_fragment_like(acc_s, self.mma_dtype)
        r_p.store(acc_s.load().to(self.mma_dtype))
        # the S accumulators of two 8-token MMAs are the A operand of one 16-token MMA
        p_as_a = cute.make_tensor(r_p.iterator, acc_as_a(r_p.layout))
        s_vt = self._v_transposed(stage_base)
        r_vin = thr_mma.make_fragment_B(thr_mma.partition_B(s_vt))
        cute.copy(load_bt, load_bt.get_slice(lane).partition_S(s_vt), load_bt.get_slice(lane).retile(r_vin))
        r_v = r_vin
        if const_expr(self.fp8):
            r_v = cute.make_rmem_tensor(thr_mma.partition_shape_B((self.head_dim, TILE)), self.mma_dtype)
            self._widen_v(r_vin, r_v)
        cute.gemm(tiled_mma, acc_o, p_as_a, r_v, acc_o)

    @cute.jit
    def _scores(self, a, scores, tile_start, lane):
        """S = Q·K^T of one tile into two accumulators (halves of the k-blocks: shorter MMA
        chains). The k-blocks go in pairs (b, b + k_steps / 2): a RoPE pair of dims (i, i +
        head_dim / 2) sits in one thread at the same place of both; an FP8 ldmatrix step holds 2."""
        tiled_mma, load_a, load_b, q_from, q_to, r_q, k_from, k_to, r_kin, r_k, acc_lo, acc_hi = scores
        per_load = 2 if const_expr(self.fp8) else 1
        half = cute.size(r_q, mode=[2]) // 2
        for first in cutlass.range_constexpr(0, half, per_load):
            for block in (first, first + half):
                if const_expr(not self.fp8):
                    cute.copy(load_b, k_from[None, None, block], k_to[None, None, block])
                else:
                    cute.copy(load_b, k_from[None, None, block // 2], k_to[None, None, block // 2])
                    self._widen_k(r_kin, r_k, block // 2)
            if const_expr(self.rope):
                for b in cutlass.range_constexpr(first, first + per_load):
                    self._rotate_k(a, r_k, b, b + half, tile_start, lane)
            for b in cutlass.range_constexpr(first, first + per_load):
                for k in (b, b + half):
                    if const_expr(not self.q_in_registers):
                        cute.copy(load_a, q_from[None, None, k], q_to[None, None, k])
                    acc = acc_lo if k < half else acc_hi
                    cute.gemm(tiled_mma, acc, r_q[None, None, k], r_k[None, None, k], acc)

    def _q_dst(self, q_smem, row, chunk):
        """Where q piece ``chunk`` of ``row`` goes in shared memory (permuted for FP8 K)."""
        if const_expr(self.fp8):
            return self._q_permuted(q_smem, row, chunk)
        return cute.make_tensor(q_smem + cute.assume(row * self.q_stride + chunk * VEC, divby=VEC),
                                cute.make_layout(VEC))

    def _to_mma(self, values: cute.TensorSSA) -> cute.TensorSSA:
        """q values (its type or fp32) in the MMAs' type: bf16 into f16 saturates at +-65504."""
        if const_expr(self.mma_dtype == values.dtype):
            return values
        if const_expr(self.mma_dtype == self.dtype):
            return values.to(self.dtype)
        wide = cute.make_rmem_tensor(values.shape, Float32)
        wide.store(values.to(Float32))
        for i in range(cute.size(wide)):  # trace-time unrolled (not a @cute.jit function)
            wide[i] = cute.arch.fmax(cute.arch.fmin(wide[i], Float32(F16_MAX)), Float32(-F16_MAX))
        return wide.load().to(self.mma_dtype)

    def _q_src(self, a, request, head, chunk):
        offset = Int64(request) * a.q_stride_batch + Int64(head) * a.q_stride_head + chunk * VEC
        return cute.make_tensor(a.q + cute.assume(offset, divby=VEC), cute.make_layout(VEC))

    def _v_transposed(self, stage_base):
        """The V tile at ``stage_base`` as (16-bit columns, tokens): what ldmatrix.trans reads."""
        s_v = cute.make_tensor(stage_base + self.tile_elems, self._kv_layout())
        return cute.composition(s_v, cute.make_layout((self.kv_cols, TILE), stride=(TILE, 1)))

    def _swizzled(self, row, chunk):
        """Offset (16-bit units) of 16-byte piece ``chunk`` of ``row`` in a swizzled K/V tile
        (the cp.async side of ``_kv_layout``, so both sides share one swizzle)."""
        return cute.assume(self._kv_layout()((row, chunk * VEC)), divby=VEC)

    def _kv_layout(self):
        """(tokens, 16-bit columns) of a swizzled K/V tile, as ldmatrix partitions see it."""
        bits, shift = self.kv_swizzle
        return cute.make_composed_layout(cute.make_swizzle(bits, 3, shift), 0,
                                         cute.make_layout((TILE, self.kv_cols), stride=(self.kv_cols, 1)))

    def _q_permuted(self, q_smem, row, chunk):
        """Where q piece ``chunk`` (head dims 8 chunk .. 8 chunk + 7) goes for FP8 K: in each
        16-dim block, MMA k-slot 2c + b (b < 2) holds dim 4c + b and slot 2c + 8 + b dim 4c + 2 + b,
        the dims an FP8 ldmatrix lane's 4 codes of K hold (so the products pair up)."""
        base = row * self.q_stride + (chunk // 2) * 16 + (chunk % 2) * 4
        return cute.make_tensor(q_smem + cute.assume(base, divby=4),
                                cute.make_layout((2, 2, 2), stride=(1, 8, 2)))

    def _kv_factor(self) -> float:
        """What widened K/V values are short of on this target (``fp8_widen.widen_factor``)."""
        return widen_factor(self.kv_format, self.software_fp8) if self.fp8 else 1.0

    @staticmethod
    def _words(fragment: cute.Tensor) -> cute.Tensor:
        """A compact 16-bit register fragment as a flat tensor of 32-bit words (pairs)."""
        words = cute.recast_tensor(fragment, Uint32)
        return cute.make_tensor(words.iterator, cute.make_layout(cute.size(words)))

    @cute.jit
    def _widen_k(self, raw: cute.Tensor, r_k: cute.Tensor, step: cutlass.Constexpr[int]):
        """FP8 ldmatrix step ``step`` (32 head dims) -> B operands of k-blocks 2 step, 2 step + 1.
        A lane's word (v, n-tile j) holds dims 32 step + 16 v + 4c .. +3 of its token: bytes
        0-1 are the block's (b0, b1) pair, bytes 2-3 its (b2, b3) pair (q permuted to match)."""
        raw_words = self._words(raw)
        out_words = self._words(r_k)
        for j in cutlass.range_constexpr(cute.size(raw, mode=[1])):
            for v in cutlass.range_constexpr(2):
                word = raw_words[raw.layout(((0, v), j, step)) // 2]
                for pair in cutlass.range_constexpr(2):
                    out_words[r_k.layout(((0, pair), j, 2 * step + v)) // 2] = widen_pair(
                        word, 2 * pair, 2 * pair + 1, self.kv_format, self.software_fp8)

    @cute.jit
    def _widen_v(self, raw: cute.Tensor, r_v: cute.Tensor):
        """FP8 V by ldmatrix.trans (16-bit columns = pairs of head dims) -> B operands. A lane's
        word (v, column tile t) holds tokens (a, a + 1) x dims (2n, 2n + 1): bytes 0 and 2 are
        the (a, a + 1) pair of dim 2n (n-tile 2t), bytes 1 and 3 that of dim 2n + 1 (n-tile
        2t + 1); the output's columns come out permuted (``_o_layout``)."""
        raw_words = self._words(raw)
        out_words = self._words(r_v)
        for t in cutlass.range_constexpr(cute.size(raw, mode=[1])):
            for v in cutlass.range_constexpr(2):
                word = raw_words[raw.layout(((0, v), t, 0)) // 2]
                pairs = widen_interleaved(word, self.kv_format, self.software_fp8)  # (bytes 0, 2), (1, 3)
                for odd in cutlass.range_constexpr(2):
                    out_words[r_v.layout(((0, v), 2 * t + odd, 0)) // 2] = pairs[odd]

    def _o_layout(self):
        """(rows, O column) -> offset in a row-major (ROWS, head_dim) buffer. FP8 V: O column
        8 T + i (n-tile T = 2 t + e) holds head dim 16 t + 2 i + e."""
        d = self.head_dim
        if self.fp8:
            return cute.make_layout((ROWS, (8, 2, d // 16)), stride=(d, (2, 1, 16)))
        return cute.make_layout((ROWS, d), stride=(d, 1))

    @cute.jit
    def _issue(self, a, step, my_tiles, ring, first_token, kv_end, page_slot, entry, page, page_base, head_offset,
               lane, indices, step_tokens):
        """Start this lane's loads of the warp's tile ``step`` into its stage, move its token
        a step on (4 tiles, ``step_tokens``) and load that token's page id; commit a group either way."""
        if step < my_tiles:
            stage_base = ring + cute.assume((step % self.stages) * 2 * self.tile_elems, divby=128)
            token = first_token + step * step_tokens
            valid = token < kv_end and page[0] >= 0 and page[0] < a.num_pages
            self._load_rows(a, stage_base, valid, head_offset, lane, page[0], entry[0])
            entry[0] = entry[0] + a.tile_rem
            page_slot[0] = page_slot[0] + a.tile_pages
            if entry[0] >= a.page_size:
                entry[0] = entry[0] - a.page_size
                page_slot[0] = page_slot[0] + 1
            if token + step_tokens < kv_end:
                page[0] = indices[page_base + page_slot[0]]
        cute.arch.cp_async_commit_group()

    @cute.jit
    def _load_rows(self, a, stage_base, valid, head_offset, lane, page, entry):
        """Whole rows per instruction: lane j < 16 has row j's address (-1: zeros), shuffled to
        the ``chunks`` lanes that read that row's consecutive 16-byte pieces."""
        offset = Int64(page) * a.cache_stride_page + Int64(entry) * a.cache_stride_entry + head_offset
        if const_expr(self.fp8):
            offset = offset >> 1  # 16-bit units (rows are 16-byte aligned: the API checks)
        offset = cutlass.select_(valid, offset, Int64(-1))
        rows_per_load = 32 // self.kv_chunks
        column = (lane % self.kv_chunks) * VEC
        sub = lane // self.kv_chunks
        piece = cute.make_layout(VEC)
        for i in cutlass.range_constexpr(TILE // rows_per_load):
            row = i * rows_per_load + sub
            row_offset = cute.arch.shuffle_sync(offset, row)
            dst = stage_base + self._swizzled(row, lane % self.kv_chunks)
            k_dst = cute.make_tensor(dst, piece)
            v_dst = cute.make_tensor(dst + self.tile_elems, piece)
            if row_offset >= 0:
                src = cute.assume(row_offset + column, divby=VEC)
                # a whole 128-byte L2 line from DRAM: a 64-byte row (FP8 head_dim 64) brings its
                # neighbour kv head's row, which the next CTA reads at about the same time (on
                # the H200: 1.4x at 64 x 4096 NHD, no change for 128- and 256-byte rows; 256
                # bytes ran 2-4% slower; decode_l2_prefetch_h200_session27.json)
                cp_async_16(dst, cute.recast_ptr(a.k_cache, dtype=self.mma_dtype) + src, L2_PREFETCH)
                cp_async_16(dst + self.tile_elems, cute.recast_ptr(a.v_cache, dtype=self.mma_dtype) + src, L2_PREFETCH)
            else:
                k_dst.fill(0)
                v_dst.fill(0)

    # where a thread's two heads sit in its fragments: rows lane/4 and lane/4 + 8 of the m16n8 C
    # layout, whose columns 8n + 2 (lane % 4) + {0, 1} (n-tile n) are tokens; the narrow builds
    # override these five
    def _by_head(self, acc: cute.Tensor) -> cute.Tensor:
        """An S or O accumulator fragment as (this thread's 2 heads, its values of each)."""
        return rows_view(acc)

    def _token_offset(self, c, lane):
        """Token (from the tile's start) of value ``c`` of a head in an S fragment."""
        return (c // 2) * 8 + (c % 2) + 2 * (lane % 4)

    # butterfly offsets between the lanes that hold one head's values
    HEAD_LANES = (1, 2)

    def _head_index(self, h, lane):
        """This thread's head ``h`` (0, 1) as a row of the CTA's q tile."""
        return lane // 4 + 8 * h

    def _head_writer(self, lane):
        """Whether this lane writes its heads' (max, sum)."""
        return lane % 4 == 0

    @cute.jit
    def _softmax_step(self, a, tiles_here: list, lane, acc_o: cute.Tensor, row_max, row_sum, kv_end, shift,
                      tile_tokens, same_head):
        """The online softmax of one step's tiles (``(acc_s, stage, tile_start)`` each) on this
        thread's two heads. Scores become base-2 logits ``t * mult``: t the raw score and mult =
        q_scale, or with a soft cap t = cap_scale * tanh(score * q_scale) and mult = 1 (so the
        scale rides in the exp2's FFMA). Tokens past the range are masked (a tile holds
        ``tile_tokens``; row r is token r >> shift), and in packed builds the scores of a q head
        against another kv head's rows (``same_head``); O is rescaled only when some head of the
        warp has a new maximum."""
        views = [self._by_head(acc_s) for acc_s, _, _ in tiles_here]
        o_heads = self._by_head(acc_o)
        columns = cute.size(views[0], mode=[1])
        q_scale = a.q_scale
        if const_expr(self._kv_factor() != 1.0):  # software-widened e4m3 K is 2^-8 short
            q_scale = q_scale * Float32(self._kv_factor())
        mult = q_scale
        if a.cap_scale != Float32(0.0):
            mult = Float32(1.0)
            for s_heads in views:
                for h in cutlass.range_constexpr(2):
                    for c in cutlass.range_constexpr(columns):
                        s_heads[h, c] = a.cap_scale * cute.math.tanh(s_heads[h, c] * q_scale, fastmath=True)
        for t in cutlass.range_constexpr(len(views)):
            s_heads = views[t]
            tile_start = tiles_here[t][2]
            if tile_start + tile_tokens > kv_end:
                for h in cutlass.range_constexpr(2):
                    for c in cutlass.range_constexpr(columns):
                        valid = tile_start + (self._token_offset(c, lane) >> shift) < kv_end
                        s_heads[h, c] = cutlass.select_(valid, s_heads[h, c], Float32(NEG_INF))
            if const_expr(self.packed):
                for h in cutlass.range_constexpr(2):
                    for c in cutlass.range_constexpr(columns):
                        s_heads[h, c] = cutlass.select_(same_head[h], s_heads[h, c], Float32(NEG_INF))
        rescale = cute.make_rmem_tensor(cute.make_layout(2), Float32)
        changed = False
        for h in cutlass.range_constexpr(2):
            tile_max = views[0][h, 0]
            for s_heads in views:
                for c in cutlass.range_constexpr(columns):
                    tile_max = cute.arch.fmax(tile_max, s_heads[h, c])
            for offset in self.HEAD_LANES:
                tile_max = cute.arch.fmax(tile_max, cute.arch.shuffle_sync_bfly(tile_max, offset=offset))
            scaled_max = cutlass.select_(tile_max == Float32(NEG_INF), Float32(NEG_INF), tile_max * mult)
            new_max = cute.arch.fmax(row_max[h], scaled_max)
            changed = changed or new_max != row_max[h]
            # 0 while every score so far is masked: 2^(-inf - 0) = 0, never NaN
            ref = cutlass.select_(new_max == Float32(NEG_INF), Float32(0.0), new_max)
            rescale[h] = cute.math.exp2(row_max[h] - ref, fastmath=True)
            total = row_sum[h] * rescale[h]
            for s_heads in views:
                for c in cutlass.range_constexpr(columns):
                    p = cute.math.exp2(s_heads[h, c] * mult - ref, fastmath=True)
                    s_heads[h, c] = p
                    total = total + p
            row_sum[h] = total
            row_max[h] = new_max
        if cute.arch.vote_any_sync(changed):
            for h in cutlass.range_constexpr(2):
                for c in cutlass.range_constexpr(cute.size(o_heads, mode=[1])):
                    o_heads[h, c] = o_heads[h, c] * rescale[h]
