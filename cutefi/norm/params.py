"""The parameters of the row-norm kernel (``norm_kernel.RowNormKernel``): gamma, beta or the
weight read in the row's frame (aligned chunks, or shifted rows' columns at their unaligned
place), 16-bit ones widened, seen with the row's register layout; and the FP8 builds' 1/scale.
A mixin: the methods read the build's shape from the kernel object."""

from __future__ import annotations

import cutlass
import cutlass.cute as cute
from cutlass import Float32, const_expr

from cutefi.cute.args import KernelArgs
from cutefi.norm.shifted import params16_in_row_frame


class RowParams:
    @cute.jit
    def _inv_scale(self, args: KernelArgs) -> Float32:
        """FlashInfer's quantisation: times 1/scale (then saturated to the format's finite range,
        a NaN to +max as FlashInfer's fminf makes it, and rounded to nearest)."""
        scale = args.scale_value  # 0: the scale is a tensor, read on the device
        if scale == Float32(0.0):
            scale = cute.make_tensor(args.scale, cute.make_layout(1))[0]
        return Float32(1.0) / scale

    @cute.jit
    def _load_param(self, copy: cute.TiledCopy, thr, ptr, chunks: cute.Tensor, values: cute.Tensor,
                    pred: cute.Tensor, col: list, lead: cutlass.Int32, n: cutlass.Int32):
        """A parameter vector in the row's frame: aligned builds load their chunks; shifted
        ones read each chunk's columns at their (unaligned) place: fp32 an element at a time,
        16-bit a word at a time (``shifted.params16_in_row_frame``; columns outside the row
        read as whatever is there: never stored)."""
        if const_expr(not self.shifted):
            cute.copy(copy, chunks, values, pred=pred)
        elif const_expr(self.param_dtype.width == 32):
            # fp32: every element is 4-byte aligned wherever the row starts, so read the
            # row's columns directly, one 32-bit access each (no merges into packed registers)
            K = const_expr(cute.size(values, mode=[2]))
            element_copy = cute.make_tiled_copy_tv(
                cute.make_copy_atom(cute.nvgpu.CopyUniversalOp(), self.param_dtype, num_bits_per_copy=32),
                cute.make_layout((1, self.threads_per_row)), cute.make_layout((1, self.vec)))
            thr_element = element_copy.get_slice(cute.arch.thread_idx()[0] % self.threads_per_row)
            src = thr_element.partition_S(cute.make_tensor(ptr + (-lead), cute.make_layout((1, self.tile_n))))
            dst = cute.make_tensor(values.iterator, src.layout.shape)
            in_row = cute.make_rmem_tensor(cute.make_layout(src.layout.shape), cutlass.Boolean)
            for k in cutlass.range_constexpr(K):
                for i in cutlass.range_constexpr(self.vec):
                    in_row[(0, i), 0, k] = col[k] + i >= 0 and col[k] + i < n
            cute.copy(element_copy, src, dst, pred=in_row)
        else:
            params16_in_row_frame(ptr, values, col, lead, n, self.tile_n)

    @cute.jit
    def _widened(self, params: cute.Tensor) -> cute.Tensor:
        """16-bit parameter registers as fp32 ones of the same shape (compact, the same element
        order: ``_as_row_values`` views them with the row's layout)."""
        wide = cute.make_rmem_tensor(params.layout, Float32)
        wide.store(params.load().to(Float32))
        return wide

    @cute.jit
    def _as_row_values(self, params: cute.Tensor, like: cute.Tensor) -> cute.TensorSSA:
        """The parameter registers seen with the layout of the row registers: fp32 chunks are
        partitioned as (4, 2) values per 128-bit pair, the row as (8, 1); both are compact in
        the same element order, so this is a view, not a copy."""
        return cute.make_tensor(params.iterator, like.layout).load()
