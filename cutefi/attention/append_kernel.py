"""Append K/V rows to a paged KV cache (FlashInfer's append_paged_kv_cache, and
append_paged_mla_kv_cache: its compressed kv and rope rows as K and V) in CuTe DSL. Mapping, ABI
and launch: ``launch.py`` (``append_contract``).

Two builds (``launch.append_by_rows`` picks one a call). By rows, for small appends: a CTA per
(token, 128 pieces of a row set, K or V), a thread per 16-byte piece, each thread looking up its
token's page. By pieces, for large ones: the appended pieces form one run, token by token: each
token's K pieces (every head), then its V pieces, ``token_pieces`` in all. A CTA takes
``pieces_per_cta`` consecutive pieces of that run (``launch.append_pieces_per_cta``); a thread
takes up to ``APPEND_UNROLL`` of them, ``THREADS`` apart. Stages:
  0. the CTA's pieces: the token of its first piece and how many tokens its pieces touch;
  1. a thread's pieces loaded: their sources need no page, so the loads are in flight while
     stage 2 walks the page tables (K and V rows of any widths share a CTA: MLA's 1024- and
     128-byte rows keep every thread busy, where a CTA a row left most of them idle);
  2. each touched token's page and entry looked up once (one thread a token) into shared memory;
  3. the pieces stored into their pages (a piece of a token without a valid slot is not).
Divisions by the row sizes are multiplies (``cute/fastdiv.py``).
"""

from __future__ import annotations

import cutlass
import cutlass.cute as cute
from cutlass import Int32, Int64, const_expr

from cutefi.attention import launch
from cutefi.cute import args as kernel_args
from cutefi.cute.args import KernelArgs
from cutefi.cute.fastdiv import fast_div
from cutefi.cute.paged import page_entry
from cutefi.cute.pdl import wait_for_inputs

THREADS = launch.APPEND_THREADS
UNROLL = launch.APPEND_UNROLL
CHUNK = launch.CHUNK_BYTES
_I32_MAX = 2**31 - 1


class AppendPagedKvKernel:
    def __init__(self, by_rows: bool = False):
        self.by_rows = by_rows
        self.contract = launch.append_contract(by_rows)

    @cute.jit
    def __call__(self, args: KernelArgs):
        kernel_args.launch(self.kernel, self.contract, args)

    @cute.kernel
    def kernel(self, args: KernelArgs):
        if const_expr(self.by_rows):
            self._by_rows(args)
        else:
            self._by_pieces(args)

    @cute.jit
    def _by_rows(self, a):
        """The by-rows build: this thread's 16-byte piece of one (token, head) row of K or V, moved
        to its page entry (the token's page looked up by every thread: no barrier, the shortest
        path for a small append)."""
        tidx, _, _ = cute.arch.thread_idx()
        token, piece_group, which = cute.arch.block_idx()  # which: 0 K, 1 V
        piece = piece_group * THREADS + tidx
        wait_for_inputs()
        if which == 0:
            self._row_piece(a, token, piece, a.k_row_chunks, a.k_row_chunks_mul, a.k_row_chunks_shift, a.key,
                            a.key_stride_token, a.key_stride_head, a.k_cache, a.k_cache_stride_page,
                            a.k_cache_stride_entry, a.k_cache_stride_head)
        else:
            self._row_piece(a, token, piece, a.v_row_chunks, a.v_row_chunks_mul, a.v_row_chunks_shift, a.value,
                            a.value_stride_token, a.value_stride_head, a.v_cache, a.v_cache_stride_page,
                            a.v_cache_stride_entry, a.v_cache_stride_head)

    @cute.jit
    def _row_piece(self, a, token: Int32, piece: Int32, row_chunks: Int32, chunks_mul: Int64, chunks_shift: Int32,
                   src_ptr: cute.Pointer, src_token: Int64, src_head: Int64, dst_ptr: cute.Pointer, dst_page: Int64,
                   dst_entry: Int64, dst_head: Int64):
        head = fast_div(piece, chunks_mul, chunks_shift)
        chunk = piece - head * row_chunks
        if head < a.heads:
            page, entry = page_entry(a.batch_indices, a.positions, a.kv_indptr, a.kv_indices, token, a.batch,
                                     a.num_indices, a.page_size, a.num_pages)
            if page >= 0:
                data = cute.make_rmem_tensor(cute.make_layout((CHUNK, 1)), cutlass.Uint8)
                self._load(src_ptr, Int64(token) * src_token + Int64(head) * src_head + chunk * CHUNK, data, 0)
                self._store(dst_ptr, Int64(page) * dst_page + Int64(entry) * dst_entry + Int64(head) * dst_head
                            + chunk * CHUNK, data, 0)

    @cute.jit
    def _by_pieces(self, a):
        """The by-pieces build (module docstring's stages)."""
        tidx, _, _ = cute.arch.thread_idx()
        cta, _, _ = cute.arch.block_idx()
        # ---- stage 0: this CTA's pieces: piece `offset` of token `token0` on -----------------
        total = Int64(a.nnz) * a.token_pieces
        start = Int64(cta) * a.pieces_per_cta
        per_cta = cutlass.min(a.pieces_per_cta, launch.APPEND_ITEMS)  # (the host's choice: never more)
        count = Int32(cutlass.min(Int64(per_cta), total - start))
        token0 = Int32(0)
        offset = Int32(0)
        if total <= _I32_MAX:  # (a multiply where the run allows: the 64-bit division is a call)
            token0 = fast_div(Int32(start), a.token_pieces_mul, a.token_pieces_shift)
            offset = Int32(start) - token0 * a.token_pieces
        else:
            token0 = Int32(start // a.token_pieces)
            offset = Int32(start - Int64(token0) * a.token_pieces)
        # (at most APPEND_TOKENS_MAX: count <= 512)
        tokens = fast_div(offset + count - 1, a.token_pieces_mul, a.token_pieces_shift) + 1
        slots = cute.make_layout((launch.APPEND_TOKENS_MAX, 2), stride=(2, 1))  # (page, entry) a token
        table = cute.make_tensor(cute.arch.alloc_smem(Int32, cute.cosize(slots), alignment=16), slots)
        data = cute.make_rmem_tensor(cute.make_layout((CHUNK, UNROLL)), cutlass.Uint8)
        token_of = cute.make_rmem_tensor(cute.make_layout(UNROLL), Int32)  # (in the CTA; -1: no piece)
        in_page = cute.make_rmem_tensor(cute.make_layout(UNROLL), Int64)  # head and chunk offset in an entry
        is_v = cute.make_rmem_tensor(cute.make_layout(UNROLL), Int32)
        wait_for_inputs()
        # ---- stage 1: this thread's pieces, loaded -------------------------------------
        for u in cutlass.range_constexpr(UNROLL):
            self._load_piece(a, token0, offset + tidx + u * THREADS, tidx + u * THREADS < count, data, token_of,
                             in_page, is_v, u)
        # ---- stage 2: each touched token's page and entry, once -------------------------
        for t in cutlass.range(tidx, tokens, THREADS, unroll=1):
            page, entry = page_entry(a.batch_indices, a.positions, a.kv_indptr, a.kv_indices, token0 + t, a.batch,
                                     a.num_indices, a.page_size, a.num_pages)
            table[t, 0] = page
            table[t, 1] = entry
        cute.arch.barrier()
        # ---- stage 3: the pieces of tokens with a slot, stored ----------------------------
        for u in cutlass.range_constexpr(UNROLL):
            t = token_of[u]
            if t >= 0:
                page = table[t, 0]
                if page >= 0:
                    entry = Int64(table[t, 1])
                    if is_v[u] == 0:
                        dst = Int64(page) * a.k_cache_stride_page + entry * a.k_cache_stride_entry + in_page[u]
                        self._store(a.k_cache, dst, data, u)
                    else:
                        dst = Int64(page) * a.v_cache_stride_page + entry * a.v_cache_stride_entry + in_page[u]
                        self._store(a.v_cache, dst, data, u)

    @cute.jit
    def _load_piece(self, a, token0: Int32, j: Int32, valid, data: cute.Tensor, token_of: cute.Tensor,
                    in_page: cute.Tensor, is_v: cute.Tensor, u: cutlass.Constexpr[int]):
        """Piece ``j`` of the run from token ``token0`` (if ``valid``) into ``data[:, u]``, with its
        token (in the CTA), K or V, and its byte offset within a cache entry."""
        token_of[u] = -1
        is_v[u] = 0
        in_page[u] = Int64(0)
        if valid:
            t = fast_div(j, a.token_pieces_mul, a.token_pieces_shift)
            piece = j - t * a.token_pieces
            token = token0 + t
            k_pieces = a.heads * a.k_row_chunks
            token_of[u] = t
            if piece < k_pieces:
                head = fast_div(piece, a.k_row_chunks_mul, a.k_row_chunks_shift)
                chunk = piece - head * a.k_row_chunks
                in_page[u] = Int64(head) * a.k_cache_stride_head + chunk * CHUNK
                self._load(a.key, Int64(token) * a.key_stride_token + Int64(head) * a.key_stride_head + chunk * CHUNK,
                           data, u)
            else:
                piece = piece - k_pieces
                head = fast_div(piece, a.v_row_chunks_mul, a.v_row_chunks_shift)
                chunk = piece - head * a.v_row_chunks
                is_v[u] = 1
                in_page[u] = Int64(head) * a.v_cache_stride_head + chunk * CHUNK
                self._load(a.value,
                           Int64(token) * a.value_stride_token + Int64(head) * a.value_stride_head + chunk * CHUNK,
                           data, u)

    @cute.jit
    def _load(self, ptr: cute.Pointer, offset: Int64, data: cute.Tensor, u: cutlass.Constexpr[int]):
        cute.copy(self._atom(), self._piece(ptr, offset), data[None, u])

    @cute.jit
    def _store(self, ptr: cute.Pointer, offset: Int64, data: cute.Tensor, u: cutlass.Constexpr[int]):
        cute.copy(self._atom(), data[None, u], self._piece(ptr, offset))

    def _atom(self):
        return cute.make_copy_atom(cute.nvgpu.CopyUniversalOp(), cutlass.Uint8, num_bits_per_copy=128)

    @cute.jit
    def _piece(self, ptr: cute.Pointer, offset: Int64) -> cute.Tensor:
        return cute.make_tensor(ptr + cute.assume(offset, divby=CHUNK), cute.make_layout(CHUNK))
