"""Append K/V rows to a paged KV cache (FlashInfer's append_paged_kv_cache, and
append_paged_mla_kv_cache: its compressed kv and rope rows as K and V) in CuTe DSL. Mapping, ABI
and launch: ``launch.py`` (``append_contract``).

A CTA takes ``tokens_per_cta`` consecutive tokens whole: each token's K pieces then its V pieces
(16 bytes each, every head) form one run of ``token_pieces``, and the CTA's runs are moved in
rounds of ``launch.APPEND_ITEMS`` pieces. Stages:
  0. the CTA's tokens;
  1. each token's page and entry looked up once (one thread a token), shared through shared
     memory: the index loads are not repeated for every piece of the token;
  2. per round, a thread's ``APPEND_UNROLL`` pieces loaded first, then stored, so a thread has
     that many loads in flight (K and V rows of any widths share the round: MLA's 1024- and
     128-byte rows keep every thread busy, where a CTA a row left most of them idle).
"""

from __future__ import annotations

import cutlass
import cutlass.cute as cute
from cutlass import Int32, Int64

from cutefi.attention import launch
from cutefi.cute import args as kernel_args
from cutefi.cute.args import KernelArgs
from cutefi.cute.paged import page_entry
from cutefi.cute.pdl import wait_for_inputs

THREADS = launch.APPEND_THREADS
UNROLL = launch.APPEND_UNROLL
CHUNK = launch.CHUNK_BYTES


class AppendPagedKvKernel:
    def __init__(self):
        self.contract = launch.append_contract()

    @cute.jit
    def __call__(self, args: KernelArgs):
        kernel_args.launch(self.kernel, self.contract, args)

    @cute.kernel
    def kernel(self, args: KernelArgs):
        a = args
        tidx, _, _ = cute.arch.thread_idx()
        cta, _, _ = cute.arch.block_idx()
        # ---- stage 0: this CTA's tokens (at most the shared table's size) ---------------
        token0 = cta * a.tokens_per_cta
        tokens = cutlass.min(cutlass.min(a.tokens_per_cta, launch.APPEND_TOKENS_MAX), a.nnz - token0)
        slots = cute.make_layout((launch.APPEND_TOKENS_MAX, 2), stride=(2, 1))  # (page, entry) a token
        table = cute.make_tensor(cute.arch.alloc_smem(Int32, cute.cosize(slots), alignment=16), slots)
        wait_for_inputs()
        # ---- stage 1: each token's page and entry, once ---------------------------------
        for t in cutlass.range(tidx, tokens, THREADS, unroll=1):
            page, entry = page_entry(a.batch_indices, a.positions, a.kv_indptr, a.kv_indices, token0 + t, a.batch,
                                     a.num_indices, a.page_size, a.num_pages)
            table[t, 0] = page
            table[t, 1] = entry
        cute.arch.barrier()
        # ---- stage 2: the tokens' pieces in rounds: a thread's loads, then its stores ------
        items = tokens * a.token_pieces
        for base in cutlass.range(0, items, launch.APPEND_ITEMS, unroll=1):
            self._round(a, token0, table, base + tidx, items)

    @cute.jit
    def _round(self, a, token0: Int32, table: cute.Tensor, first: Int32, items: Int32):
        """Pieces ``first``, ``first + THREADS``, ... of the CTA's run: all loaded, then all stored
        (a piece of a token without a valid slot, or past the run, is neither)."""
        data = cute.make_rmem_tensor(cute.make_layout((CHUNK, UNROLL)), cutlass.Uint8)
        dst = cute.make_rmem_tensor(cute.make_layout(UNROLL), Int64)  # byte offset in its cache; -1: none
        is_v = cute.make_rmem_tensor(cute.make_layout(UNROLL), Int32)
        k_pieces = a.heads * a.k_row_chunks
        for u in cutlass.range_constexpr(UNROLL):
            dst[u] = Int64(-1)
            is_v[u] = 0
            j = first + u * THREADS
            if j < items:
                t = j // a.token_pieces
                piece = j - t * a.token_pieces
                page = table[t, 0]
                if page >= 0:
                    entry = table[t, 1]
                    token = token0 + t
                    # K's piece, or V's (then its own row width and strides)
                    row_chunks, src_token, src_head = a.k_row_chunks, a.key_stride_token, a.key_stride_head
                    dst_page, dst_entry, dst_head = a.k_cache_stride_page, a.k_cache_stride_entry, a.k_cache_stride_head
                    if piece >= k_pieces:
                        piece = piece - k_pieces
                        row_chunks, src_token, src_head = a.v_row_chunks, a.value_stride_token, a.value_stride_head
                        dst_page, dst_entry = a.v_cache_stride_page, a.v_cache_stride_entry
                        dst_head = a.v_cache_stride_head
                        is_v[u] = 1
                    head = piece // row_chunks
                    chunk = piece - head * row_chunks
                    src = Int64(token) * src_token + Int64(head) * src_head + chunk * CHUNK
                    if is_v[u] == 0:
                        self._load(a.key, src, data, u)
                    else:
                        self._load(a.value, src, data, u)
                    dst[u] = Int64(page) * dst_page + Int64(entry) * dst_entry + Int64(head) * dst_head + chunk * CHUNK
        for u in cutlass.range_constexpr(UNROLL):
            if dst[u] >= 0:
                if is_v[u] == 0:
                    self._store(a.k_cache, dst[u], data, u)
                else:
                    self._store(a.v_cache, dst[u], data, u)

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
