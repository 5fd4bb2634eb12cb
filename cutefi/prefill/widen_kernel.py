"""FP8 K/V widened to 16 bits for Hopper's TMA prefill kernel, in CuTe DSL (sm_90a).

ABI: ``launch.widen_contract``. K (``blockIdx.y`` 0) and V (1) rows of ``head_dim`` FP8
codes become rows of q's dtype, written densely: output row ``r`` is source ``(o, a, b)`` with
``r = (o * inner_a + a) * inner_b + b``, read at ``outer(o) * outer_stride + a * a_stride + b *
b_stride`` (bytes), ``outer(o)`` = ``ids[o]`` (a page table, clamped to ``[0, sources)``;
``paged``) or ``o``. Ragged K/V:
o a token, a its kv head, inner_b 1; paged: o a page-table entry, a a kv head, b a page row.

Each thread moves one 16-byte chunk (16 codes): one 128-bit load, eight ``cvt`` pairs (e4m3
in hardware; e5m2 is f16's high byte), two 128-bit stores; the chunks of a row are
neighbouring threads, so a warp's loads and stores are contiguous runs.
"""

from __future__ import annotations

import cutlass
import cutlass.cute as cute
from cutlass import Int32, Int64, Uint32, const_expr

from cutefi.cute import args as kernel_args
from cutefi.cute.args import KernelArgs
from cutefi.cute.fp8_widen import f16x2_to_bf16x2, widen_pair
from cutefi.cute.pdl import wait_for_inputs
from cutefi.prefill import launch

CODES = 16  # FP8 codes a thread: one 128-bit load
WORDS_IN, WORDS_OUT = CODES // 4, CODES // 2


class WidenKv:
    def __init__(self, dtype: str, kv_dtype: str) -> None:
        self.contract = launch.widen_contract(dtype, kv_dtype)
        self.dtype, self.kv_dtype = dtype, kv_dtype

    @cute.jit
    def __call__(self, args: KernelArgs):
        kernel_args.launch(self.kernel, self.contract, args)

    @cute.kernel
    def kernel(self, args: KernelArgs):
        tidx, _, _ = cute.arch.thread_idx()
        bidx, which, _ = cute.arch.block_idx()
        chunks_per_row = args.head_dim // CODES
        chunk = bidx * launch.WIDEN_THREADS + tidx
        wait_for_inputs()
        if chunk < args.rows * chunks_per_row:
            row = chunk // chunks_per_row
            column = chunk - row * chunks_per_row
            src_offset = self._source_row(args, row, which) + Int64(column * CODES)
            dst_offset = Int64(row) * Int64(args.head_dim) + Int64(column * CODES)  # (elements)
            src, dst = args.k_src, args.k_dst
            if which == 1:
                src, dst = args.v_src, args.v_dst
            self._widen_chunk(src, dst, src_offset, dst_offset)

    @cute.jit
    def _source_row(self, args, row, which) -> Int64:
        """The byte offset of output row ``row``'s source (K's strides, or V's)."""
        inner = args.inner_a * args.inner_b
        outer = row // inner
        rest = row - outer * inner
        a = rest // args.inner_b
        b = rest - a * args.inner_b
        if args.paged != 0:  # (a page id outside the cache reads its nearest page, never past it)
            page = cute.make_tensor(args.ids + Int64(outer), cute.make_layout(1))[0]
            outer = cutlass.max(cutlass.min(page, args.sources - 1), Int32(0))
        strides = (args.k_outer_stride, args.k_a_stride, args.k_b_stride)
        if which == 1:
            strides = (args.v_outer_stride, args.v_a_stride, args.v_b_stride)
        return Int64(outer) * strides[0] + Int64(a) * strides[1] + Int64(b) * strides[2]

    @cute.jit
    def _widen_chunk(self, src, dst, src_offset, dst_offset):
        """16 codes at byte ``src_offset`` of ``src`` -> 16 values at element ``dst_offset`` of ``dst``."""
        vector = cute.make_copy_atom(cute.nvgpu.CopyUniversalOp(), Int32, num_bits_per_copy=128)
        codes = cute.make_rmem_tensor(cute.make_layout(WORDS_IN), Int32)
        values = cute.make_rmem_tensor(cute.make_layout(WORDS_OUT), Int32)
        source = cute.make_tensor(src + cute.assume(src_offset // 4, divby=4), cute.make_layout(WORDS_IN))
        cute.copy(vector, source, codes)
        for w in cutlass.range_constexpr(WORDS_IN):
            for half in cutlass.range_constexpr(2):
                pair = widen_pair(Uint32(codes[w]), 2 * half, 2 * half + 1, self.kv_dtype)
                if const_expr(self.dtype == "bf16"):
                    pair = f16x2_to_bf16x2(pair)
                values[2 * w + half] = Int32(pair)
        target = cute.make_tensor(dst + cute.assume(dst_offset // 2, divby=4), cute.make_layout(WORDS_OUT))
        for part in cutlass.range_constexpr(2):
            cute.copy(vector, cute.make_tensor(values.iterator + part * 4, cute.make_layout(4)),
                      cute.make_tensor(target.iterator + part * 4, cute.make_layout(4)))
