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
from cutefi.cute.pack16 import widen
from cutefi.cute.reduce import combine_moments, row_reduce_moments, row_reduce_moments_equal


class RereadRows:
    @cute.jit
    def _moments(self, x: cute.Tensor, in_row: cute.Tensor, n: cutlass.Int32, eps: Float32):
        """LayerNorm's row mean and 1/sqrt(variance + eps) in one reduction. A row that fills the
        build (``n == tile_n``, uniform over the CTA) takes the fast path below; otherwise each
        in-row chunk's (``in_row[0, 0, k]``) count, mean and squared deviations, widened a chunk
        at a time from the 16-bit registers ``x``, are combined into the thread's and then
        across the row's threads (``reduce.row_reduce_moments``)."""
        buffer = None
        if const_expr(self.warps_per_row > 1):
            layout = cute.make_ordered_layout((self.rows_per_cta, self.warps_per_row, 3), order=(2, 1, 0))
            buffer = cute.make_tensor(cute.arch.alloc_smem(Float32, cute.cosize(layout), alignment=16), layout)
        K = const_expr(cute.size(x, mode=[2]))
        mean, m2 = Float32(0.0), Float32(0.0)
        if n == self.tile_n:
            # the row fills the build: every thread holds K chunks, so every combine has equal
            # parts (constant weights: no reciprocal on the reduction's path). The thread's own
            # moments in one pass, shifted by its first element c: sum(x - c) and sum((x - c)^2)
            # lose at most log2(K * vec) bits to cancellation, since c is one of the values
            # (its squared distance to their mean is at most their sum of squared deviations)
            count = const_expr(K * self.vec)
            shift = widen(x[None, None, 0])[0]
            # (two running sums each, element by element: no per-chunk partial sums to add up)
            sums, squares = [Float32(0.0), Float32(0.0)], [Float32(0.0), Float32(0.0)]
            for k in cutlass.range_constexpr(K):
                d = widen(x[None, None, k]) - shift
                for i in cutlass.range_constexpr(self.vec):
                    sums[i % 2] = sums[i % 2] + d[i]
                    squares[i % 2] = squares[i % 2] + d[i] * d[i]
            s1, s2 = sums[0] + sums[1], squares[0] + squares[1]
            own_mean = shift + s1 * Float32(1.0 / count)
            own_m2 = cutlass.max(s2 - s1 * s1 * Float32(1.0 / count), Float32(0.0))
            mean, m2 = row_reduce_moments_equal(own_mean, own_m2, count, self.threads_per_row, buffer)
        else:
            count, own_mean, own_m2 = Float32(0.0), Float32(0.0), Float32(0.0)
            for k in cutlass.range_constexpr(K):
                values = x[None, None, k].load().to(Float32)
                chunk_mean = values.reduce(cute.ReductionOp.ADD, init_val=Float32(0.0), reduction_profile=0) * \
                    Float32(1.0 / self.vec)
                d = values - chunk_mean
                chunk_m2 = (d * d).reduce(cute.ReductionOp.ADD, init_val=Float32(0.0), reduction_profile=0)
                if in_row[0, 0, k]:
                    count, own_mean, own_m2 = combine_moments(count, own_mean, own_m2, Float32(self.vec),
                                                              chunk_mean, chunk_m2)
            _, mean, m2 = row_reduce_moments(count, own_mean, own_m2, self.threads_per_row, buffer)
        return mean, cute.math.rsqrt(m2 * cute.arch.rcp_approx(Float32(n)) + eps, fastmath=True)

    @cute.jit
    def _layer_out_by_chunks(self, args: KernelArgs, tXgX: cute.Tensor, tXrX: cute.Tensor, tXpO: cute.Tensor,
                             param_copy: cute.TiledCopy, tXgW: cute.Tensor, tXrW: cute.Tensor, tXgB: cute.Tensor,
                             tXrB: cute.Tensor, out_copy: cute.TiledCopy, tXgO: cute.Tensor, tXrO: cute.Tensor,
                             mean: Float32, rstd: Float32, full_row: cutlass.Boolean):
        """A LayerNorm row that reads x twice: a chunk at a time, x again (an L1 hit, then evicted
        first), its gamma and beta, the output stored; a chunk's registers only, so the build
        holds little across the loop (``_moments`` took the statistics). ``full_row``: every
        chunk is in the row (and the row in the tensor), uniform over the CTA."""
        policy = l2_policy("evict_first")
        inv_scale = self._inv_scale(args) if const_expr(self.quant) else Float32(1.0)
        chunks = (tXgX, tXrX, param_copy, tXgW, tXrW, tXgB, tXrB, out_copy, tXgO, tXrO)
        if full_row:
            # every chunk in the row: no branch around a chunk, so the next chunk's loads can
            # issue before this one's store (a branch a chunk kept each chunk's L1 round trip
            # behind the last one's)
            for k in cutlass.range_constexpr(cute.size(tXrX, mode=[2])):
                self._layer_chunk_out(chunks, k, policy, mean, rstd, inv_scale)
        else:
            for k in cutlass.range_constexpr(cute.size(tXrX, mode=[2])):
                if tXpO[0, 0, k]:
                    self._layer_chunk_out(chunks, k, policy, mean, rstd, inv_scale)

    @cute.jit
    def _layer_chunk_out(self, chunks: tuple, k: cutlass.Constexpr[int], policy, mean: Float32, rstd: Float32,
                         inv_scale: Float32):
        """Chunk ``k`` of a LayerNorm row's output: x again, its gamma and beta, the store."""
        tXgX, tXrX, param_copy, tXgW, tXrW, tXgB, tXrB, out_copy, tXgO, tXrO = chunks
        load_chunk(tXgX, tXrX, k, policy, "evict_first")
        cute.copy(param_copy, tXgW[None, None, k], tXrW[None, None, k])
        cute.copy(param_copy, tXgB[None, None, k], tXrB[None, None, k])
        x_k = tXrX[None, None, k]
        gamma = cute.make_tensor(tXrW[None, None, k].iterator, x_k.layout).load()
        beta = cute.make_tensor(tXrB[None, None, k].iterator, x_k.layout).load()
        if const_expr(tXrW.element_type.width == 16):  # (16-bit parameters: widened)
            gamma, beta = gamma.to(Float32), beta.to(Float32)
        y = (widen(x_k) - mean) * rstd * gamma + beta
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
