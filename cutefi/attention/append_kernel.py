"""Append K/V rows to a paged KV cache (FlashInfer's append_paged_kv_cache) in CuTe DSL: each
thread moves one 16-byte piece of one (token, head) row of K or V to its page. Mapping, ABI and
launch: ``launch.py`` (``append_contract``)."""

from __future__ import annotations

import cutlass
import cutlass.cute as cute
from cutlass import Int64

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

        # ---- stage 0: this thread's piece of a row -------------------------
        piece = piece_group * launch.APPEND_THREADS + tidx
        head = piece // a.row_chunks
        chunk = piece - head * a.row_chunks
        wait_for_inputs()
        if head < a.heads:
            # ---- stage 1: where the token goes (the same for the whole CTA) -----------
            page, entry = page_entry(a.batch_indices, a.positions, a.kv_indptr, a.kv_indices, token, a.batch,
                                     a.num_indices, a.page_size, a.num_pages)
            if page >= 0:
                # ---- stage 2: one 16-byte piece, append row -> page entry ----------
                src = Int64(token) * a.append_stride_token + Int64(head) * a.append_stride_head
                dst = (Int64(page) * a.cache_stride_page + Int64(entry) * a.cache_stride_entry
                       + Int64(head) * a.cache_stride_head)
                offset = Int64(chunk) * launch.CHUNK_BYTES
                if which == 0:
                    self._move(a.key, src + offset, a.k_cache, dst + offset)
                else:
                    self._move(a.value, src + offset, a.v_cache, dst + offset)

    @cute.jit
    def _move(self, src_ptr: cute.Pointer, src: Int64, dst_ptr: cute.Pointer, dst: Int64):
        atom = cute.make_copy_atom(cute.nvgpu.CopyUniversalOp(), cutlass.Uint8, num_bits_per_copy=128)
        layout = cute.make_layout(launch.CHUNK_BYTES)
        src_tile = cute.make_tensor(src_ptr + cute.assume(src, divby=launch.CHUNK_BYTES), layout)
        dst_tile = cute.make_tensor(dst_ptr + cute.assume(dst, divby=launch.CHUNK_BYTES), layout)
        piece = cute.make_rmem_tensor(layout, cutlass.Uint8)
        cute.copy(atom, src_tile, piece)
        cute.copy(atom, piece, dst_tile)
