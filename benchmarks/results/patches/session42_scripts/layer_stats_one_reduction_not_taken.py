"""LayerNorm's row statistics on the row-norm builds that hold x in registers across them
(``norm_kernel.RowNormKernel``, all but the builds reading x twice, ``reread.py``): the row's
mean and 1/sqrt(variance + eps). A row that fills an aligned persistent build (``N ==
tile_n``) takes one reduction of each thread's (mean, squared deviations); other rows and builds
two, the mean's and then the centred squares'. A mixin: the methods read the build's shape from the
kernel object."""

from __future__ import annotations

import cutlass
import cutlass.cute as cute
from cutlass import Float32, const_expr

from cutefi.cute.args import KernelArgs
from cutefi.cute.pack16 import widen
from cutefi.cute.reduce import row_reduce_moments_equal, row_reduce_sum


class LayerStatistics:
    @cute.jit
    def _own_moments(self, x: cute.Tensor):
        """This thread's (mean, sum of squared deviations) of all its chunks of the 16-bit
        registers ``x`` ((vec, 1), 1, K), in one pass shifted by its first element c: sum(x - c)
        and sum((x - c)^2) lose at most log2(K * vec) bits to cancellation, since c is one of
        the values (its squared distance to their mean is at most their sum of squared
        deviations). Two running sums each, element by element (no per-chunk partial sums)."""
        K = const_expr(cute.size(x, mode=[2]))
        count = const_expr(K * self.vec)
        shift = widen(x[None, None, 0])[0]
        sums, squares = [Float32(0.0), Float32(0.0)], [Float32(0.0), Float32(0.0)]
        for k in cutlass.range_constexpr(K):
            d = widen(x[None, None, k]) - shift
            for i in cutlass.range_constexpr(self.vec):
                sums[i % 2] = sums[i % 2] + d[i]
                squares[i % 2] = squares[i % 2] + d[i] * d[i]
        s1, s2 = sums[0] + sums[1], squares[0] + squares[1]
        own_mean = shift + s1 * Float32(1.0 / count)
        return own_mean, cutlass.max(s2 - s1 * s1 * Float32(1.0 / count), Float32(0.0))

    @cute.jit
    def _moments_buffer(self, parity=None):
        """Static smem for one cross-warp reduction of (mean, m2, count) partials (None when a
        row fits in one warp); with a ``parity`` (persistent builds: the row count mod 2) one of
        two that rows take in turn, so a row's writes never meet the last row's reads."""
        if const_expr(self.warps_per_row == 1):
            return None
        layout = cute.make_ordered_layout((self.rows_per_cta, self.warps_per_row, 3), order=(2, 1, 0))
        size = cute.cosize(layout)
        if const_expr(parity is None):
            return cute.make_tensor(cute.arch.alloc_smem(Float32, size, alignment=16), layout)
        pair = cute.arch.alloc_smem(Float32, 2 * size, alignment=16)
        return cute.make_tensor(pair + parity * size, layout)

    @cute.jit
    def _layer_statistics(self, args: KernelArgs, x: cute.TensorSSA, tXrX: cute.Tensor, tXpW: cute.Tensor,
                          col: list, extra, inv_n: Float32, refill, parity):
        """The row's (mean, rstd) from ``x`` (its fp32 values; ``tXrX`` their 16-bit registers).
        ``refill``: None, or ``(next_row, lane, ring, slot, lead)`` of a persistent build, whose
        slot takes the next row once x is in registers; ``extra``: None, or ``(rXe, has_extra,
        col_e)``, the row's lead chunk (shifted builds with ``lead_chunk``)."""
        mean, rstd = Float32(0.0), Float32(0.0)
        if const_expr(self.shifted or refill is None):
            # (one-row builds too: the 8192 class spilled 70 registers with both paths)
            mean, rstd = self._two_reductions(args, x, tXrX, tXpW, col, extra, inv_n, refill)
        else:
            if args.N == self.tile_n:
                # every thread holds K full chunks: equal parts, combined with constant weights
                own_mean, own_m2 = self._own_moments(tXrX)
                if const_expr(refill is not None):
                    self._prefetch(args, *refill)
                mean, m2 = row_reduce_moments_equal(own_mean, own_m2, const_expr(cute.size(tXrX)),
                                                    self.threads_per_row, self._moments_buffer(parity))
                rstd = cute.math.rsqrt(m2 * inv_n + args.eps, fastmath=True)
            else:
                mean, rstd = self._two_reductions(args, x, tXrX, tXpW, col, extra, inv_n, refill)
        return mean, rstd

    @cute.jit
    def _two_reductions(self, args: KernelArgs, x: cute.TensorSSA, tXrX: cute.Tensor, tXpW: cute.Tensor,
                        col: list, extra, inv_n: Float32, refill):
        """(mean, rstd) in two reductions: the row's sum, then its centred squares (the arguments
        as ``_layer_statistics``'s)."""
        N = args.N
        K = const_expr(cute.size(tXrX, mode=[2]))
        lead_sum = Float32(0.0)  # the lead chunk's sum (its thread's; 0 elsewhere)
        if const_expr(extra is not None):
            rXe, has_extra, col_e = extra
            if has_extra:
                lead_sum = Float32(self._widen(rXe).reduce(cute.ReductionOp.ADD, init_val=Float32(0.0),
                                                           reduction_profile=0))
        sum_x = x.reduce(cute.ReductionOp.ADD, init_val=Float32(0.0), reduction_profile=0) + lead_sum
        if const_expr(refill is not None):
            # x is in registers (sum_x used it): the slot can take the next row
            self._prefetch(args, *refill)
        mean = row_reduce_sum(sum_x, self.threads_per_row, self._reduction_buffer()) * inv_n
        tXrD = cute.make_rmem_tensor_like(tXrX, Float32)
        tXrD.store(x - mean)
        # the squares of the chunks in the row (a select a chunk, not an element). Shifted rows'
        # end chunks hold out-of-row elements as 0 (masked at the load), each adding exactly
        # mean^2: taken off as their count times mean^2 (integer work a chunk, not a select an
        # element), at most 14 a row
        sum_sq = Float32(0.0)
        outside = cutlass.Int32(0)
        for k in cutlass.range_constexpr(K):
            centred = tXrD[None, None, k].load()
            part = (centred * centred).reduce(cute.ReductionOp.ADD, init_val=Float32(0.0), reduction_profile=0)
            if tXpW[0, 0, k]:
                sum_sq = sum_sq + part
            if const_expr(self.shifted):
                if tXpW[0, 0, k]:
                    outside = outside + cutlass.max(-col[k], 0) + cutlass.max(col[k] + self.vec - N, 0)
        if const_expr(extra is not None):
            rXe, has_extra, col_e = extra
            if has_extra:
                centred_e = self._widen(rXe) - mean
                sum_sq = sum_sq + (centred_e * centred_e).reduce(cute.ReductionOp.ADD, init_val=Float32(0.0),
                                                                 reduction_profile=0)
                outside = outside + (col_e + self.vec - N)
        if const_expr(self.shifted):
            # (rounding can take a constant row's sum a hair below 0)
            sum_sq = cutlass.max(sum_sq - Float32(outside) * (mean * mean), Float32(0.0))
        sum_sq = row_reduce_sum(sum_sq, self.threads_per_row, self._reduction_buffer())
        return mean, cute.math.rsqrt(sum_sq * inv_n + args.eps, fastmath=True)
