"""The parts of the row-norm kernel (``norm_kernel.RowNormKernel``) that only the builds reading
x twice use (``launch.Geometry.reread``, ``tuning.REREAD_ROWS``): LayerNorm's statistics in one
reduction, its output a chunk at a time with x read again, and the fused add's residual store.
A mixin: the methods read the build's shape from the kernel object."""

from __future__ import annotations

import cutlass
import cutlass.cute as cute
from cutlass import Float32, const_expr

from cutefi.cute.args import KernelArgs
from cutefi.cute.convert import store_fp8
from cutefi.cute.hinted_load import l2_policy, load_chunk
from cutefi.cute.reduce import combine_moments, row_reduce_moments


class RereadRows:
    @cute.jit
    def _moments(self, x: cute.Tensor, in_row: cute.Tensor, n: cutlass.Int32, eps: Float32):
        """LayerNorm's row mean and 1/sqrt(variance + eps) in one reduction: each in-row chunk's
        (``in_row[0, 0, k]``) count, mean and squared deviations, widened a chunk at a time from
        the 16-bit registers ``x`` (8 fp32 values live, not the thread's whole row), combined into
        the thread's and then across the row's threads (``reduce.row_reduce_moments``)."""
        count, mean, m2 = Float32(0.0), Float32(0.0), Float32(0.0)
        for k in cutlass.range_constexpr(cute.size(x, mode=[2])):
            values = x[None, None, k].load().to(Float32)
            chunk_mean = values.reduce(cute.ReductionOp.ADD, init_val=Float32(0.0), reduction_profile=0) * \
                Float32(1.0 / self.vec)
            d = values - chunk_mean
            chunk_m2 = (d * d).reduce(cute.ReductionOp.ADD, init_val=Float32(0.0), reduction_profile=0)
            if in_row[0, 0, k]:
                count, mean, m2 = combine_moments(count, mean, m2, Float32(self.vec), chunk_mean, chunk_m2)
        buffer = None
        if const_expr(self.warps_per_row > 1):
            layout = cute.make_ordered_layout((self.rows_per_cta, self.warps_per_row, 3), order=(2, 1, 0))
            buffer = cute.make_tensor(cute.arch.alloc_smem(Float32, cute.cosize(layout), alignment=16), layout)
        _, mean, m2 = row_reduce_moments(count, mean, m2, self.threads_per_row, buffer)
        return mean, cute.math.rsqrt(m2 * cute.arch.rcp_approx(Float32(n)) + eps, fastmath=True)

    @cute.jit
    def _layer_out_by_chunks(self, args: KernelArgs, tXgX: cute.Tensor, tXrX: cute.Tensor, tXpO: cute.Tensor,
                             param_copy: cute.TiledCopy, tXgW: cute.Tensor, tXrW: cute.Tensor, tXgB: cute.Tensor,
                             tXrB: cute.Tensor, out_copy: cute.TiledCopy, tXgO: cute.Tensor, tXrO: cute.Tensor,
                             mean: Float32, rstd: Float32):
        """A LayerNorm row that reads x twice: a chunk at a time, x again (an L1 hit, then evicted
        first), its gamma and beta, the output stored; a chunk's registers only, so the build
        holds little across the loop (``_moments`` took the statistics)."""
        policy = l2_policy("evict_first")
        inv_scale = self._inv_scale(args) if const_expr(self.quant) else Float32(1.0)
        for k in cutlass.range_constexpr(cute.size(tXrX, mode=[2])):
            if tXpO[0, 0, k]:
                load_chunk(tXgX, tXrX, k, policy, "evict_first")
                cute.copy(param_copy, tXgW[None, None, k], tXrW[None, None, k])
                cute.copy(param_copy, tXgB[None, None, k], tXrB[None, None, k])
                x_k = tXrX[None, None, k]
                gamma = cute.make_tensor(tXrW[None, None, k].iterator, x_k.layout).load()
                beta = cute.make_tensor(tXrB[None, None, k].iterator, x_k.layout).load()
                y = (x_k.load().to(Float32) - mean) * rstd * gamma + beta
                if const_expr(self.quant):
                    store_fp8(y * inv_scale, tXrO[None, None, k], self.quant_max, self.fp8_in_software)
                else:
                    tXrO[None, None, k].store(y.to(self.out_dtype))
                cute.copy(out_copy, tXrO[None, None, k], tXgO[None, None, k])

    @cute.jit
    def _store_residual(self, copy: cute.TiledCopy, s: cute.TensorSSA, like: cute.Tensor, dest: cute.Tensor,
                        pred: cute.Tensor, full: list, col: list, n: cutlass.Int32, row_ok: cutlass.Boolean):
        """The fused add's residual <- round(s) (``s``: x + residual in fp32), staged in
        registers of its own (x and residual stay to rebuild s later)."""
        rounded = cute.make_rmem_tensor_like(like)
        rounded.store(s.to(self.dtype))
        self._store(copy, rounded, dest, pred, full, col, n, row_ok)
