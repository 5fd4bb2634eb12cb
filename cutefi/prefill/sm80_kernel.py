"""Prefill attention for the mma.sync family (sm_80 … sm_121a): FlashAttention-2's structure
in CuTe DSL. ABI and tiles: ``launch.py`` (``sm80_contract``); work units: ``plan.py``.

A CTA of eight warps takes one work unit: 128 q rows of one (request, q head), 16 rows a
warp. Stages:
  1. the Q tile and the last KV tile's K rows stream into shared memory with 16-byte cp.async
     (rows XOR-swizzled over 8 rows so ldmatrix reads hit 8 bank groups); each thread
     computes the addresses of its rows: ragged rows, or a page table lookup for any page
     size (page ids outside the cache read zeros); rows past the request repeat its last
     one (their keys are masked, their queries not stored);
  2. per KV tile, last first (the tiles that need a mask come first): V's rows start loading
     while S = Q K^T runs (ldmatrix, mma.sync m16n8k16, fp32), then the mask where the tile
     needs one (and a custom mask's bits, read from global memory per score), the online
     softmax on each thread's two rows (base 2), P packed to 16-bit pairs in the registers
     where it is the A operand of O += P V; the next K tile loads while P V runs (V by
     ldmatrix.trans);
  3. O / rowsum (the head's sink in the denominator, if any) and the base-2 lse, stored from
     registers (rows past the request's end are never written).
Options, in shared memory between the stages: FP8 K/V widened to 16 bits, Llama RoPE on Q
and K, and MLA's 192-wide Q/K with 128-wide V. This is the path of every non-Hopper GPU, and
on Hopper of what the TMA kernel does not take (other page sizes, custom masks, FP8 KV, RoPE,
MLA): one K and one V buffer, no warp specialisation.
"""

from __future__ import annotations

import cutlass
import cutlass.cute as cute
from cutlass import Float32, Int32, Int64, Uint32, const_expr
from cutlass.cute.nvgpu import cpasync, warp

from cutefi.cute import args as kernel_args
from cutefi.cute.args import KernelArgs
from cutefi.cute.attention_state import finish_row, head_sink
from cutefi.cute.dtypes import cute_dtype
from cutefi.cute.fp8_widen import f16x2_to_bf16x2, widen_factor, widen_pair
from cutefi.cute.mma_frag import acc_as_a, kv_tile_range, rows_view
from cutefi.cute.pack16 import convert_pairs
from cutefi.cute.pdl import wait_for_inputs
from cutefi.cute.rope_angle import rope_cos_sin
from cutefi.prefill import launch

VEC = 8  # 16-bit elements of a 16-byte piece
TILE_M = launch.TILE_M
THREADS = launch.SM80_THREADS
NEG_INF = float("-inf")


class PrefillSm80:
    # ------------------------------------------------------------------ #
    # 1. specialisation
    # ------------------------------------------------------------------ #
    def __init__(self, dtype: str, head_dim: int, kv_dtype: str | None = None, software_fp8: bool = False,
                 head_dim_vo: int | None = None) -> None:
        self.contract = launch.sm80_contract(dtype, head_dim, kv_dtype, software_fp8, head_dim_vo)
        # DeepSeek-style MLA prefill: Q and K rows of head_dim (192), V and O rows of head_dim_vo
        # (128), V's rows found with V's own strides
        self.head_dim_vo = head_dim_vo or head_dim
        self.mla = self.head_dim_vo != head_dim
        self.software_fp8 = software_fp8  # (sm_80/86's integer widening on any target: tests)
        self.dtype = cute_dtype(dtype)
        self.head_dim = head_dim
        self.tile_n = launch.SM80_TILE_N[head_dim]
        self.chunks = head_dim // VEC  # 16-byte pieces of a Q (and 16-bit K) row
        # FP8 K/V: rows of head_dim bytes land in the upper half of their 16-bit tile, then
        # each thread widens the pieces it loaded (fp8_widen) into the swizzled tile
        self.kv_format = kv_dtype if kv_dtype in launch.KV_FP8 else None
        self.kv_dtype = cute_dtype(kv_dtype) if self.kv_format else self.dtype
        self.kv_chunks = head_dim * (1 if self.kv_format else 2) // 16
        self.kv_rows_per_pass = THREADS // self.kv_chunks
        # Q's fragments stay in registers up to head dim 128 (16-bit K/V); wider heads and FP8
        # builds re-read them per tile (their registers went to spills on sm_100a/sm_120a)
        self.q_in_registers = head_dim <= 128 and not self.kv_format

    @cute.jit
    def __call__(self, args: KernelArgs):
        kernel_args.launch(self.kernel, self.contract, args)

    def _tile_layout(self, rows: int, cols: int | None = None):
        """(rows, cols = head_dim) 16-bit tile, row-major for power-of-two rows; a row's 16-byte
        pieces XORed with its index mod 8, so the 8 rows an ldmatrix reads sit in 8 bank groups."""
        cols = cols or self.head_dim
        if cols & (cols - 1) == 0:
            shift = cols.bit_length() - 1 - 3
            return cute.make_composed_layout(cute.make_swizzle(3, 3, shift), 0,
                                             cute.make_layout((rows, cols), stride=(cols, 1)))
        # (192: 8 x 64 swizzled atoms, rows first, then the three 64-column blocks)
        atom = cute.make_composed_layout(cute.make_swizzle(3, 3, 3), 0, cute.make_layout((8, 64), stride=(64, 1)))
        return cute.tile_to_shape(atom, (rows, cols), (0, 1))

    def _pieces(self, rows: int, chunks: int) -> int:
        """16-byte pieces a thread moves of a tile of ``rows`` x ``chunks`` pieces (piece ``p
        * THREADS + tidx``, row-major)."""
        assert rows * chunks % THREADS == 0
        return rows * chunks // THREADS

    # ------------------------------------------------------------------ #
    # 2. the kernel
    # ------------------------------------------------------------------ #
    @cute.kernel
    def kernel(self, args: KernelArgs):
        tidx, _, _ = cute.arch.thread_idx()
        unit, _, _ = cute.arch.block_idx()
        d, d_vo, tile_n = self.head_dim, self.head_dim_vo, self.tile_n
        wait_for_inputs()
        pairs = args.units // args.heads
        head = unit // pairs
        pair = unit - head * pairs
        work = cute.make_tensor(args.work, cute.make_layout((launch.WORK_ROWS, pairs), stride=(pairs, 1)))
        q_begin, qo_len, kv_begin, kv_len, m_block = work[0, pair], work[1, pair], work[2, pair], work[3, pair], \
            work[4, pair]
        mask_begin = work[5, pair]
        first_row = m_block * TILE_M
        # (a CUDA-graph plan's padding units have no rows)
        if first_row < qo_len:
            smem = cute.arch.get_dyn_smem(self.dtype, alignment=128)
            q_base = smem
            k_base = smem + TILE_M * d
            v_base = k_base + tile_n * d
            kv_head = head // args.group
            first, end = kv_tile_range(first_row, TILE_M, qo_len, kv_len, args.causal, args.window_left, tile_n)

            # ---- stage 1: Q and the first K tile ---------------------------------------
            q_rows = cute.make_rmem_tensor(cute.make_layout(self._pieces(TILE_M, self.chunks)), Int64)
            for p in cutlass.range_constexpr(cute.size(q_rows)):
                row = cutlass.min(first_row + (p * THREADS + tidx) // self.chunks, qo_len - 1)
                q_rows[p] = Int64(q_begin + row) * args.q_stride_token + Int64(head) * args.q_stride_head
            self._load_tile(q_base, TILE_M, d, q_rows, args.q, tidx)
            kv_rows = cute.make_rmem_tensor(cute.make_layout(self._pieces(tile_n, self.kv_chunks)), Int64)
            v_rows = kv_rows  # (V's rows are K's, but for MLA's narrower V rows)
            if const_expr(self.mla):
                v_rows = cute.make_rmem_tensor(cute.make_layout(self._pieces(tile_n, d_vo // VEC)), Int64)
            if end > first:
                self._kv_rows(args, kv_rows, end - 1, kv_begin, kv_len, kv_head, tidx, self.kv_chunks,
                              args.kv_stride_token, args.kv_stride_head)
                self._load_kv(k_base, kv_rows, args.k, tidx)
            cute.arch.cp_async_commit_group()

            # ---- MMA partitions: 8 warps along M, N tiled to 16 (one ldmatrix.x4 of B) ---
            tiled_mma = cute.make_tiled_mma(warp.MmaF16BF16Op(self.dtype, Float32, (16, 8, 16)),
                                            cute.make_layout((launch.SM80_WARPS, 1, 1)),
                                            permutation_mnk=(TILE_M, 16, 16))
            thr_mma = tiled_mma.get_slice(tidx)
            s_q = cute.make_tensor(q_base, self._tile_layout(TILE_M))
            s_k = cute.make_tensor(k_base, self._tile_layout(tile_n))
            s_v = cute.make_tensor(v_base, self._tile_layout(tile_n, d_vo))
            s_vt = cute.composition(s_v, cute.make_layout((d_vo, tile_n), stride=(tile_n, 1)))  # V^T: the B of P V
            load_a = cute.make_tiled_copy_A(cute.make_copy_atom(warp.LdMatrix8x8x16bOp(False, 4), self.dtype),
                                            tiled_mma).get_slice(tidx)
            load_b = cute.make_tiled_copy_B(cute.make_copy_atom(warp.LdMatrix8x8x16bOp(False, 4), self.dtype),
                                            tiled_mma).get_slice(tidx)
            load_bt = cute.make_tiled_copy_B(cute.make_copy_atom(warp.LdMatrix8x8x16bOp(True, 4), self.dtype),
                                             tiled_mma).get_slice(tidx)
            r_q = thr_mma.make_fragment_A(thr_mma.partition_A(s_q))
            r_k = thr_mma.make_fragment_B(thr_mma.partition_B(s_k))
            r_v = thr_mma.make_fragment_B(thr_mma.partition_B(s_vt))
            operands = ((load_a.partition_S(s_q), load_a.retile(r_q), r_q),
                        (load_b.partition_S(s_k), load_b.retile(r_k), r_k),
                        (load_bt.partition_S(s_vt), load_bt.retile(r_v), r_v))
            acc_s = cute.make_rmem_tensor(thr_mma.partition_shape_C((TILE_M, tile_n)), Float32)
            r_p = cute.make_rmem_tensor(thr_mma.partition_shape_A((TILE_M, tile_n)), self.dtype)
            acc_o = cute.make_rmem_tensor(thr_mma.partition_shape_C((TILE_M, d_vo)), Float32)
            coord_s = rows_view(thr_mma.partition_C(cute.make_identity_tensor((TILE_M, tile_n))))
            coord_o = rows_view(thr_mma.partition_C(cute.make_identity_tensor((TILE_M, d_vo))))
            row_max = cute.make_rmem_tensor(cute.make_layout(2), Float32)
            row_sum = cute.make_rmem_tensor(cute.make_layout(2), Float32)  # this thread's columns only
            row_max.fill(NEG_INF)
            row_sum.fill(0.0)
            acc_o.fill(0.0)
            # (scores as base-2 logits s * mult; a soft cap turns s into cap * tanh first;
            # software-widened e4m3 is 2^-8 short: the scales take it back)
            factor = widen_factor(self.kv_format, self.software_fp8) if const_expr(self.kv_format) else 1.0
            q_mult = args.q_mult * Float32(factor)
            mult = q_mult
            if args.cap_scale != Float32(0.0):
                mult = Float32(1.0)

            # ---- stage 2: the KV tiles, last first ----------------------------------------
            cute.arch.cp_async_wait_group(0)
            cute.arch.sync_threads()
            if args.has_rope != 0:
                self._rotate(args, q_base, TILE_M, first_row + kv_len - qo_len, tidx)
            if const_expr(self.q_in_registers):
                q_from, q_to, _ = operands[0]
                for kb in cutlass.range_constexpr(cute.size(r_q, mode=[2])):
                    cute.copy(load_a, q_from[None, None, kb], q_to[None, None, kb])
            for i in cutlass.range(end - first, unroll=1):
                n = end - 1 - i
                cute.arch.cp_async_wait_group(0)
                codes = self._staged_codes(k_base, tidx)  # (FP8: this thread's pieces of K(n))
                cute.arch.sync_threads()  # K(n) has landed; every warp is done with V(n + 1)
                if const_expr(self.mla):
                    self._kv_rows(args, v_rows, n, kv_begin, kv_len, kv_head, tidx, d_vo // VEC, args.v_stride_token,
                                  args.v_stride_head)
                    self._load_tile(v_base, tile_n, d_vo, v_rows, args.v, tidx)
                else:
                    self._load_kv(v_base, kv_rows, args.v, tidx)
                cute.arch.cp_async_commit_group()
                self._widen(k_base, codes, tidx)
                if args.has_rope != 0:
                    self._rotate(args, k_base, tile_n, n * tile_n, tidx)
                self._scores(tiled_mma, operands, load_a, load_b, acc_s)
                self._softmax(args, acc_s, coord_s, rows_view(acc_o), row_max, row_sum, q_mult, mult, first_row,
                              n * tile_n, qo_len, kv_len, mask_begin)
                convert_pairs(cute.make_tensor(acc_s.iterator, acc_as_a(acc_s.layout)), r_p)
                cute.arch.cp_async_wait_group(0)
                codes = self._staged_codes(v_base, tidx)
                cute.arch.sync_threads()  # V(n) has landed; every warp is done with K(n)
                if i + 1 < end - first:
                    self._kv_rows(args, kv_rows, n - 1, kv_begin, kv_len, kv_head, tidx, self.kv_chunks,
                                  args.kv_stride_token, args.kv_stride_head)
                    self._load_kv(k_base, kv_rows, args.k, tidx)
                cute.arch.cp_async_commit_group()
                self._widen(v_base, codes, tidx)
                v_from, v_to, _ = operands[2]
                for kb in cutlass.range_constexpr(cute.size(r_v, mode=[2])):
                    cute.copy(load_bt, v_from[None, None, kb], v_to[None, None, kb])
                    cute.gemm(tiled_mma, acc_o, r_p[None, None, kb], r_v[None, None, kb], acc_o)
            cute.arch.cp_async_wait_group(0)

            # ---- stage 3: epilogue ------------------------------------------------------
            self._epilogue(args, acc_o, coord_o, row_max, row_sum, q_begin, qo_len, first_row, head,
                           args.out_scale * Float32(factor))

    # ------------------------------------------------------------------ #
    # 3. loads
    # ------------------------------------------------------------------ #
    @cute.jit
    def _kv_rows(self, args, kv_rows, n, kv_begin, kv_len, kv_head, tidx, chunks: cutlass.Constexpr, stride_token,
                 stride_head):
        """The element offsets of the rows of this thread's pieces of KV tile ``n`` (rows of
        ``chunks`` pieces; -1: a page id outside the cache, read as zeros); rows past the
        request repeat its last one."""
        head_offset = Int64(kv_head) * stride_head
        indices = cute.make_tensor(args.kv_indices, cute.make_layout(1 << 30))
        for p in cutlass.range_constexpr(cute.size(kv_rows)):
            token = cutlass.min(n * self.tile_n + (p * THREADS + tidx) // chunks, kv_len - 1)
            if args.page_size == 0:
                kv_rows[p] = Int64(kv_begin + token) * stride_token + head_offset
            else:
                slot = token // args.page_size
                page = indices[kv_begin + slot]
                entry = token - slot * args.page_size
                kv_rows[p] = cutlass.select_(
                    page >= 0 and page < args.num_pages,
                    Int64(page) * args.kv_stride_page + Int64(entry) * stride_token + head_offset, Int64(-1))

    @cute.jit
    def _load_kv(self, base, row_offsets, src, tidx):
        """A K or V tile: 16-bit rows into the swizzled tile at ``base``; FP8 rows into its
        upper half, row-major (``_widen`` moves them into place)."""
        if const_expr(not self.kv_format):
            self._load_tile(base, self.tile_n, self.head_dim, row_offsets, src, tidx)
        else:
            atom = cute.make_copy_atom(cpasync.CopyG2SOp(cache_mode=cpasync.LoadCacheMode.GLOBAL), self.kv_dtype,
                                       num_bits_per_copy=128)
            piece = cute.make_layout(16)
            staging = self._staging(base)
            chunk = tidx % self.kv_chunks
            for p in cutlass.range_constexpr(cute.size(row_offsets)):
                row = p * self.kv_rows_per_pass + tidx // self.kv_chunks
                dst = cute.make_tensor(staging + cute.assume(row * self.head_dim + chunk * 16, divby=16), piece)
                if row_offsets[p] >= 0:
                    start = cute.assume(row_offsets[p] + chunk * 16, divby=16)
                    cute.copy(atom, cute.make_tensor(src + start, piece), dst)
                else:
                    dst.fill(0)

    def _staging(self, base):
        """The FP8 rows of the tile at ``base``: the upper half of its bytes."""
        return cute.recast_ptr(base + self.tile_n * self.head_dim // 2, dtype=self.kv_dtype)

    @cute.jit
    def _staged_codes(self, base, tidx):
        """This thread's FP8 pieces of the tile at ``base`` (after its cp.async wait: its own
        copies are visible to it), 4 words a piece; nothing for 16-bit K/V."""
        codes = None
        if const_expr(self.kv_format):
            passes = self.tile_n // self.kv_rows_per_pass
            codes = cute.make_rmem_tensor(cute.make_layout((4, passes)), Uint32)
            words = cute.recast_ptr(self._staging(base), dtype=Uint32)
            for p in cutlass.range_constexpr(passes):
                row = p * self.kv_rows_per_pass + tidx // self.kv_chunks
                at = cute.assume((row * self.head_dim + (tidx % self.kv_chunks) * 16) // 4, divby=4)
                codes[None, p].store(cute.make_tensor(words + at, cute.make_layout(4)).load())
        return codes

    @cute.jit
    def _widen(self, base, codes, tidx):
        """FP8 K/V: every thread has read its pieces (the barrier before this); it writes them
        widened into the swizzled 16-bit tile (16 codes -> 32 bytes), then a barrier."""
        if const_expr(self.kv_format):
            layout = self._tile_layout(self.tile_n)
            column = (tidx % self.kv_chunks) * 16
            halves = cute.make_rmem_tensor(cute.make_layout((4, 2)), Uint32)
            for p in cutlass.range_constexpr(cute.size(codes, mode=[1])):
                row = p * self.kv_rows_per_pass + tidx // self.kv_chunks
                for w in cutlass.range_constexpr(4):
                    for pair in cutlass.range_constexpr(2):
                        widened = widen_pair(codes[w, p], 2 * pair, 2 * pair + 1, self.kv_format, self.software_fp8)
                        if const_expr(self.dtype == cutlass.BFloat16):
                            widened = f16x2_to_bf16x2(widened)
                        halves[(2 * w + pair) % 4, (2 * w + pair) // 4] = widened
                for h in cutlass.range_constexpr(2):
                    at = cute.assume(layout((row, column + 8 * h)), divby=VEC)
                    words = cute.recast_ptr(base + at, dtype=Uint32)
                    cute.make_tensor(words, cute.make_layout(4)).store(halves[None, h].load())
            cute.arch.sync_threads()

    @cute.jit
    def _load_tile(self, base, rows: cutlass.Constexpr, cols: cutlass.Constexpr, row_offsets, src, tidx):
        """cp.async of a (rows, cols) 16-bit tile into the swizzled buffer at ``base``: this
        thread's pieces ``p * THREADS + tidx`` (row-major, 16 bytes each), piece p's row from
        element offset ``row_offsets[p]`` of ``src`` (< 0: zeros)."""
        atom = cute.make_copy_atom(cpasync.CopyG2SOp(cache_mode=cpasync.LoadCacheMode.GLOBAL), self.dtype,
                                   num_bits_per_copy=128)
        layout = self._tile_layout(rows, cols)
        chunks = cols // VEC
        piece = cute.make_layout(VEC)
        for p in cutlass.range_constexpr(self._pieces(rows, chunks)):
            row = (p * THREADS + tidx) // chunks
            chunk = (p * THREADS + tidx) % chunks
            dst = cute.make_tensor(base + cute.assume(layout((row, chunk * VEC)), divby=VEC), piece)
            if row_offsets[p] >= 0:
                start = cute.assume(row_offsets[p] + chunk * VEC, divby=VEC)
                cute.copy(atom, cute.make_tensor(src + start, piece), dst)
            else:
                dst.fill(0)

    @cute.jit
    def _rotate(self, args, base, rows: cutlass.Constexpr, first_position, tidx):
        """Llama RoPE in place on the (rows, head_dim) tile at ``base``, row r at position
        ``first_position + r``: a thread takes pieces c and c + head_dim / 16 of a row (dims i
        and i + head_dim / 2 pair up), rotates them in fp32 and stores both; then a barrier."""
        layout = self._tile_layout(rows)
        halves = self.head_dim // (2 * VEC)
        piece = cute.make_layout(VEC)
        for t in cutlass.range_constexpr(rows * halves // THREADS):
            row = (t * THREADS + tidx) // halves
            chunk = (t * THREADS + tidx) % halves
            lo_at = cute.make_tensor(base + cute.assume(layout((row, chunk * VEC)), divby=VEC), piece)
            hi_at = cute.make_tensor(base + cute.assume(layout((row, (chunk + halves) * VEC)), divby=VEC), piece)
            lo = cute.make_rmem_tensor(piece, Float32)
            hi = cute.make_rmem_tensor(piece, Float32)
            lo.store(lo_at.load().to(Float32))
            hi.store(hi_at.load().to(Float32))
            position = Float32(first_position + row)
            for e in cutlass.range_constexpr(VEC):
                cos, sin = rope_cos_sin(position, chunk * VEC + e, args.rope_rcp_scale, args.rope_log2_step)
                x1, x2 = lo[e], hi[e]
                lo[e] = x1 * cos - x2 * sin
                hi[e] = x2 * cos + x1 * sin
            lo_at.store(lo.load().to(self.dtype))
            hi_at.store(hi.load().to(self.dtype))
        cute.arch.sync_threads()

    # ------------------------------------------------------------------ #
    # 4. S = Q K^T, softmax, epilogue
    # ------------------------------------------------------------------ #
    @cute.jit
    def _scores(self, tiled_mma, operands, load_a, load_b, acc_s):
        (q_from, q_to, r_q), (k_from, k_to, r_k), _ = operands
        acc_s.fill(0.0)
        for kb in cutlass.range_constexpr(cute.size(r_k, mode=[2])):
            cute.copy(load_b, k_from[None, None, kb], k_to[None, None, kb])
            if const_expr(not self.q_in_registers):
                cute.copy(load_a, q_from[None, None, kb], q_to[None, None, kb])
            cute.gemm(tiled_mma, acc_s, r_q[None, None, kb], r_k[None, None, kb], acc_s)

    @cute.jit
    def _softmax(self, args, acc_s, coord_s, o_rows, row_max, row_sum, q_mult, mult, first_row, first_col, qo_len,
                 kv_len, mask_begin):
        """The online softmax of one KV tile on this thread's two rows: the mask where the tile
        needs one, each row's new maximum (over the quad of threads holding the row; kept
        scaled by ``mult``), P = 2^(s * mult - max) in place of S, the running sums (per
        thread) and O's rows rescaled by the change of their maximum."""
        s_rows = rows_view(acc_s)
        columns = cute.size(s_rows, mode=[1])
        if args.cap_scale != Float32(0.0):
            for r in cutlass.range_constexpr(2):
                for c in cutlass.range_constexpr(columns):
                    s_rows[r, c] = args.cap_scale * cute.math.tanh(s_rows[r, c] * q_mult, fastmath=True)
        shift = kv_len - qo_len  # (q row r is key position r + shift)
        last_col = first_col + self.tile_n - 1
        needs_mask = last_col >= kv_len
        if args.causal != 0:
            needs_mask = needs_mask or last_col > first_row + shift
        if args.window_left >= 0:
            needs_mask = needs_mask or first_col < first_row + TILE_M - 1 + shift - args.window_left
        if args.has_mask != 0:
            self._custom_mask(args, s_rows, coord_s, first_row, first_col, qo_len, kv_len, mask_begin)
        if needs_mask:
            for r in cutlass.range_constexpr(2):
                position = first_row + coord_s[r, 0][0] + shift
                hi = kv_len - 1
                if args.causal != 0:
                    hi = cutlass.min(hi, position)
                lo = Int32(0)
                if args.window_left >= 0:
                    lo = position - args.window_left
                for c in cutlass.range_constexpr(columns):
                    col = first_col + coord_s[r, c][1]
                    s_rows[r, c] = cutlass.select_(col <= hi and col >= lo, s_rows[r, c], Float32(NEG_INF))
        for r in cutlass.range_constexpr(2):
            tile_max = s_rows[r, 0]
            for c in cutlass.range_constexpr(1, columns):
                tile_max = cute.arch.fmax(tile_max, s_rows[r, c])
            tile_max = cute.arch.fmax(tile_max, cute.arch.shuffle_sync_bfly(tile_max, offset=1))
            tile_max = cute.arch.fmax(tile_max, cute.arch.shuffle_sync_bfly(tile_max, offset=2))
            new_max = cute.arch.fmax(row_max[r], cutlass.select_(tile_max == Float32(NEG_INF), Float32(NEG_INF),
                                                                 tile_max * mult))
            # 0 while every score so far is masked: 2^(-inf - 0) = 0, never NaN
            ref = cutlass.select_(new_max == Float32(NEG_INF), Float32(0.0), new_max)
            rescale = cute.math.exp2(row_max[r] - ref, fastmath=True)
            total = row_sum[r] * rescale
            for c in cutlass.range_constexpr(columns):
                p = cute.math.exp2(s_rows[r, c] * mult - ref, fastmath=True)
                s_rows[r, c] = p
                total = total + p
            row_sum[r] = total
            row_max[r] = new_max
            for c in cutlass.range_constexpr(cute.size(o_rows, mode=[1])):
                o_rows[r, c] = o_rows[r, c] * rescale

    @cute.jit
    def _custom_mask(self, args, s_rows, coord_s, first_row, first_col, qo_len, kv_len, mask_begin):
        """Scores whose bit of the request's custom mask is 0 become -inf (bit ``row * kv_len +
        col`` from byte ``mask_begin``, the lowest bit first); keys past the request and rows
        past its queries read no bit (the range mask hides those keys; those rows are not
        stored)."""
        first_bit = Int64(mask_begin) * 8
        for r in cutlass.range_constexpr(2):
            row = first_row + coord_s[r, 0][0]
            row_bit = first_bit + Int64(row) * kv_len
            for c in cutlass.range_constexpr(cute.size(s_rows, mode=[1])):
                col = first_col + coord_s[r, c][1]
                inside = row < qo_len and col < kv_len
                bit = cutlass.select_(inside, row_bit + col, first_bit)
                byte = Int32(cute.make_tensor(args.mask + (bit >> 3), cute.make_layout(1))[0])
                keep = (byte >> Int32(bit & 7)) & 1
                s_rows[r, c] = cutlass.select_(keep != 0 or not inside, s_rows[r, c], Float32(NEG_INF))

    @cute.jit
    def _epilogue(self, args, acc_o, coord_o, row_max, row_sum, q_begin, qo_len, first_row, head, out_scale):
        """O / rowsum stored from registers (a thread's columns of a row: pairs 8 apart) and
        the rows' base-2 lse (the head's sink, if any, in the denominator); rows with nothing
        to see get 0 and -inf."""
        o_rows = rows_view(acc_o)
        columns = cute.size(o_rows, mode=[1])
        values = cute.make_rmem_tensor(cute.make_layout((2, columns // 2)), self.dtype)
        head_offset = Int64(head) * args.out_stride_head
        sink = head_sink(args.sinks, args.heads, head, args.has_sinks)  # (a logit with no value)
        for r in cutlass.range_constexpr(2):
            total = row_sum[r]
            total = total + cute.arch.shuffle_sync_bfly(total, offset=1)
            total = total + cute.arch.shuffle_sync_bfly(total, offset=2)
            inv, lse = finish_row(total, row_max[r], sink)
            inv = inv * out_scale
            row = first_row + coord_o[r, 0][0]
            if row < qo_len:
                token = Int64(q_begin + row)
                for c in cutlass.range_constexpr(columns):
                    values[c % 2, c // 2] = (o_rows[r, c] * inv).to(self.dtype)
                start = cute.assume(token * args.out_stride_token + head_offset + coord_o[r, 0][1], divby=2)
                cute.autovec_copy(values, cute.make_tensor(args.out + start, cute.make_layout(
                    (2, columns // 2), stride=(1, 8))))
                if args.write_lse != 0 and coord_o[r, 0][1] == 0:
                    lse_at = token * args.lse_stride_token + Int64(head) * args.lse_stride_head
                    cute.make_tensor(args.lse + lse_at, cute.make_layout(1))[0] = lse
