"""Append K/V rows to a paged KV cache (FlashInfer's append_paged_kv_cache, and
append_paged_mla_kv_cache: its compressed kv and rope rows as K and V) in CuTe DSL: each thread
moves one 16-byte piece of one (token, head) row of K or V to its page. Mapping, ABI and
launch: ``launch.py`` (``append_contract``)."""

from __future__ import annotations

import cutlass
import cutlass.cute as cute
from cutlass import Int32, Int64

from cutefi.attention import launch
from cutefi.cute import args as kernel_args
from cutefi.cute.args import KernelArgs
from cutefi.cute.paged import page_entry
from cutefi.cute.pdl import wait_for_inputs


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
        token, piece_group, which = cute.arch.block_idx()  # which: 0 K, 1 V
        piece = piece_group * launch.APPEND_THREADS + tidx
        wait_for_inputs()
        if which == 0:
            self._row_piece(a, token, piece, a.k_row_chunks, a.key, a.key_stride_token, a.key_stride_head, a.k_cache,
                            a.k_cache_stride_page, a.k_cache_stride_entry, a.k_cache_stride_head)
        else:
            self._row_piece(a, token, piece, a.v_row_chunks, a.value, a.value_stride_token, a.value_stride_head,
                            a.v_cache, a.v_cache_stride_page, a.v_cache_stride_entry, a.v_cache_stride_head)

    @cute.jit
    def _row_piece(self, a, token: Int32, piece: Int32, row_chunks: Int32, src_ptr: cute.Pointer, src_token: Int64,
                   src_head: Int64, dst_ptr: cute.Pointer, dst_page: Int64, dst_entry: Int64, dst_head: Int64):
        """This thread's 16-byte piece of one (token, head) row of a set, moved to its page entry."""
        # ---- stage 0: which head and piece of the row ----------------------------
        head = piece // row_chunks
        chunk = piece - head * row_chunks
        if head < a.heads:
            # ---- stage 1: where the token goes (the same for the whole CTA) -----------
            page, entry = page_entry(a.batch_indices, a.positions, a.kv_indptr, a.kv_indices, token, a.batch,
                                     a.num_indices, a.page_size, a.num_pages)
            if page >= 0:
                # ---- stage 2: one 16-byte piece, append row -> page entry ----------
                offset = Int64(chunk) * launch.CHUNK_BYTES
                src = Int64(token) * src_token + Int64(head) * src_head + offset
                dst = Int64(page) * dst_page + Int64(entry) * dst_entry + Int64(head) * dst_head + offset
                self._move(src_ptr, src, dst_ptr, dst)

    @cute.jit
    def _move(self, src_ptr: cute.Pointer, src: Int64, dst_ptr: cute.Pointer, dst: Int64):
        atom = cute.make_copy_atom(cute.nvgpu.CopyUniversalOp(), cutlass.Uint8, num_bits_per_copy=128)
        layout = cute.make_layout(launch.CHUNK_BYTES)
        src_tile = cute.make_tensor(src_ptr + cute.assume(src, divby=launch.CHUNK_BYTES), layout)
        dst_tile = cute.make_tensor(dst_ptr + cute.assume(dst, divby=launch.CHUNK_BYTES), layout)
        piece = cute.make_rmem_tensor(layout, cutlass.Uint8)
        cute.copy(atom, src_tile, piece)
        cute.copy(atom, piece, dst_tile)
