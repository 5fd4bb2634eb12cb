"""Long-row norm kernel (hidden sizes above 32768) in CuTe DSL: RMSNorm and LayerNorm, the fused
add, gemma weights, FP8 outputs and RMSNorm + SiLU, with the row-norm kernel's numerics (``norm_kernel.py``).

A CTA a row (row ``r`` = token ``r // heads``, head ``r % heads``, as the row-norm builds) walks
the row twice, each thread taking every ``BLOCK_THREADS``-th access of ``vec`` elements:

1. statistics: RMSNorm's sum of squares (of s = x + residual for the fused add), LayerNorm's
   (count, mean, squared deviations) of the thread's elements, in one pass shifted by its first
   element, combined across the row with Chan's update (``reduce.row_reduce_moments``);
2. output: x (and the residual) again, the fused add's residual <- round(s) stored, the
   parameters read, the output stored (FP8: times 1/scale, saturated, rounded).

Contract and builds: ``long_rows.py``.
"""

from __future__ import annotations

import cutlass
import cutlass.cute as cute
from cutlass import Float32, Int32, Int64, const_expr

from cutefi.cute import args as kernel_args
from cutefi.cute.activation import silu
from cutefi.cute.args import KernelArgs
from cutefi.cute.convert import store_fp8
from cutefi.cute.dtypes import cute_dtype
from cutefi.cute.pdl import wait_for_inputs
from cutefi.cute.reduce import row_reduce_moments, row_reduce_sum
from cutefi.norm import launch, long_rows


class LongRowNormKernel:
    def __init__(self, norm: str, dtype_name: str, fused_add: bool = False, gemma: bool = False,
                 aligned: bool = True, out_dtype: str | None = None, silu: bool = False):
        if norm not in launch.KINDS or (norm == "layer" and (fused_add or gemma)):
            raise ValueError(f"unsupported norm kind {norm!r} (fused_add={fused_add}, gemma={gemma})")
        self.contract = long_rows.contract(norm, dtype_name, fused_add, gemma, aligned, out_dtype, silu)
        self.silu = silu  # RMSNorm + SiLU: silu(s * rstd * w), then 1/scale
        self.layer = norm == "layer"
        self.dtype = cute_dtype(dtype_name)
        # LayerNorm's gamma and beta are fp32; RMSNorm's weight has the input dtype
        self.param_dtype = Float32 if self.layer else self.dtype
        self.quant = out_dtype is not None
        self.out_dtype = cute_dtype(out_dtype) if self.quant else self.dtype
        self.quant_max = launch.QUANT_MAX[out_dtype] if self.quant else 0.0
        self.fused_add = fused_add
        self.gemma = gemma
        shape = long_rows.LongGeometry(aligned)
        self.vec = shape.vec
        self.threads = long_rows.BLOCK_THREADS
        self.warps = shape.warps

    @cute.jit
    def __call__(self, args: KernelArgs):
        kernel_args.launch(self.kernel, self.contract, args)

    @cute.kernel
    def kernel(self, args: KernelArgs):
        tidx, _, _ = cute.arch.thread_idx()
        row, _, _ = cute.arch.block_idx()
        token, head = row, Int32(0)
        if args.heads != 1:
            token = row // args.heads
            head = row - token * args.heads
        x_at = Int64(token) * args.x_row_stride + Int64(head) * args.x_head_stride
        out_at = Int64(token) * args.out_row_stride + Int64(head) * args.out_head_stride
        res_at = Int64(token) * args.residual_row_stride + Int64(head) * args.residual_head_stride
        # with PDL the previous kernel may still be writing x (or reading out): wait here
        wait_for_inputs()
        accesses = args.N // self.vec  # (aligned builds: N % vec == 0)

        # ---- pass 1: the row's statistics -----------------------------------
        mean, rstd = Float32(0.0), Float32(0.0)
        if const_expr(self.layer):
            mean, rstd = self._layer_statistics(args, x_at, accesses)
        else:
            sum_sq = Float32(0.0)
            for c in cutlass.range(tidx, accesses, self.threads, unroll=long_rows.UNROLL):
                s = self._row_values(args, x_at, res_at, c)
                sum_sq = sum_sq + (s * s).reduce(cute.ReductionOp.ADD, init_val=Float32(0.0), reduction_profile=0)
            buffer = cute.make_tensor(cute.arch.alloc_smem(Float32, self.warps, alignment=16),
                                      cute.make_layout((1, self.warps)))
            sum_sq = row_reduce_sum(sum_sq, self.threads, buffer)
            rstd = cute.math.rsqrt(sum_sq / Float32(args.N) + args.eps, fastmath=True)

        # ---- pass 2: x again, parameters, output ----------------------------
        inv_scale = Float32(1.0)
        if const_expr(self.quant):
            scale = args.scale_value  # 0: the scale is a tensor, read on the device
            if scale == Float32(0.0):
                scale = cute.make_tensor(args.scale, cute.make_layout(1))[0]
            inv_scale = Float32(1.0) / scale
        for c in cutlass.range(tidx, accesses, self.threads, unroll=long_rows.UNROLL):
            s = self._row_values(args, x_at, res_at, c)
            if const_expr(self.fused_add):  # residual <- round(s); the output from the fp32 s
                self._store(args.residual, res_at, c, s, self.dtype)
            w = self._load(args.weight, Int64(0), c, self.param_dtype)
            if const_expr(self.gemma):
                w = w + Float32(1.0)
            y = s
            if const_expr(self.layer):
                y = (s - mean) * rstd * w + self._load(args.bias, Int64(0), c, self.param_dtype)
                if const_expr(self.quant):
                    y = y * inv_scale
            elif const_expr(self.silu):
                y = silu(s * rstd * w)
                if const_expr(self.quant):
                    y = y * inv_scale
            else:
                y = s * (rstd * inv_scale) * w  # 1/scale folded into the row's factor
            self._store(args.out, out_at, c, y, self.out_dtype)

    @cute.jit
    def _layer_statistics(self, args: KernelArgs, x_at: Int64, accesses: Int32):
        """(mean, rstd) of the row: each thread's elements shifted by its first one (sum(x - c)
        and sum((x - c)^2) lose at most log2 of its element count in bits to cancellation, c
        being one of them), then Chan's pairwise combine across the row (counts differ by an
        access at most)."""
        tidx = cute.arch.thread_idx()[0]
        shift = self._load(args.x, x_at, tidx, self.dtype)[0]  # (every thread has an access: N > 32768)
        s1, s2 = Float32(0.0), Float32(0.0)
        for c in cutlass.range(tidx, accesses, self.threads, unroll=long_rows.UNROLL):
            d = self._load(args.x, x_at, c, self.dtype) - shift
            s1 = s1 + d.reduce(cute.ReductionOp.ADD, init_val=Float32(0.0), reduction_profile=0)
            s2 = s2 + (d * d).reduce(cute.ReductionOp.ADD, init_val=Float32(0.0), reduction_profile=0)
        count = Float32(((accesses - 1 - tidx) // self.threads + 1) * self.vec)
        inv_count = Float32(1.0) / count
        own_mean = shift + s1 * inv_count
        own_m2 = cutlass.max(s2 - s1 * s1 * inv_count, Float32(0.0))
        layout = cute.make_ordered_layout((1, self.warps, 3), order=(2, 1, 0))
        buffer = cute.make_tensor(cute.arch.alloc_smem(Float32, cute.cosize(layout), alignment=16), layout)
        _, mean, m2 = row_reduce_moments(count, own_mean, own_m2, self.threads, buffer)
        return mean, cute.math.rsqrt(m2 / Float32(args.N) + args.eps, fastmath=True)

    @cute.jit
    def _row_values(self, args: KernelArgs, x_at: Int64, res_at: Int64, c: Int32) -> cute.TensorSSA:
        """Access ``c`` of the row as fp32: x, or s = x + residual for the fused add."""
        s = self._load(args.x, x_at, c, self.dtype)
        if const_expr(self.fused_add):
            s = s + self._load(args.residual, res_at, c, self.dtype)
        return s

    @cute.jit
    def _load(self, ptr: cute.Pointer, at: Int64, c: Int32, dtype) -> cute.TensorSSA:
        """Access ``c`` (``vec`` elements) of the vector at element ``at`` of ``ptr``, as fp32."""
        offset = at + Int64(c) * self.vec
        if const_expr(self.vec > 1):
            offset = cute.assume(offset, divby=self.vec)
        regs = cute.make_rmem_tensor(cute.make_layout(self.vec), dtype)
        cute.autovec_copy(cute.make_tensor(ptr + offset, cute.make_layout(self.vec)), regs)
        return regs.load().to(Float32)

    @cute.jit
    def _store(self, ptr: cute.Pointer, at: Int64, c: Int32, values: cute.TensorSSA, dtype):
        """Store fp32 ``values`` as access ``c`` of the vector at element ``at`` of ``ptr``, in
        ``dtype`` (FP8: saturated and rounded, ``convert.store_fp8``)."""
        offset = at + Int64(c) * self.vec
        if const_expr(self.vec > 1):
            offset = cute.assume(offset, divby=self.vec)
        # (FP8 conversions go in pairs: an element-access build converts a pair, stores one)
        width = const_expr(max(self.vec, 2) if dtype.width == 8 else self.vec)
        regs = cute.make_rmem_tensor(cute.make_layout(width), dtype)
        if const_expr(dtype.width == 8):
            staged = cute.make_rmem_tensor(cute.make_layout(width), Float32)
            staged.fill(0.0)
            for i in cutlass.range_constexpr(self.vec):
                staged[i] = values[i]
            store_fp8(staged.load(), regs, self.quant_max)
        else:
            regs.store(values.to(dtype))
        dest = cute.make_tensor(ptr + offset, cute.make_layout(self.vec))
        if const_expr(width == self.vec):
            cute.autovec_copy(regs, dest)
        else:
            cute.autovec_copy(cute.make_tensor(regs.iterator, cute.make_layout(self.vec)), dest)
