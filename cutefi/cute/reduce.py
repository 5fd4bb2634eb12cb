"""Warp / block reduction helpers for CuTe DSL kernels (cutefi).

Conventions
-----------
* A "row group" is ``threads_per_row`` consecutive threads (tidx-contiguous)
  that cooperate on one row.  ``threads_per_row`` is a compile-time power of
  two; groups narrower than a warp are aligned sub-warp lane groups.
* ``warp_reduce`` reduces across the aligned ``group`` lanes of the calling
  thread with a shuffle butterfly (every lane gets the result).
* ``block_reduce`` combines per-warp partials of each row through a shared
  memory buffer of shape ``(rows_per_cta, warps_per_row)`` (fp32) and one
  ``bar.sync``; every thread of the row gets the result.
* ``row_reduce_sum`` = warp stage + (if the row spans several warps) block stage.

All functions must be called by every thread of the CTA (they contain warp
shuffles with a full mask and, for multi-warp rows, a CTA barrier).
"""

import operator
from typing import Callable, Optional

import cutlass
import cutlass.cute as cute
from cutlass import Float32, const_expr

WARP_SIZE = 32


@cute.jit
def warp_reduce(
    val: cute.Numeric,
    op: Callable,
    group: cutlass.Constexpr[int] = WARP_SIZE,
) -> cute.Numeric:
    """Butterfly all-reduce over aligned groups of ``group`` lanes (power of 2 <= 32)."""
    assert group >= 1 and group <= WARP_SIZE and (group & (group - 1)) == 0
    offset = group // 2
    for _ in cutlass.range_constexpr(group.bit_length() - 1 if group > 1 else 0):
        val = op(val, cute.arch.shuffle_sync_bfly(val, offset=offset))
        offset = offset // 2
    return val


@cute.jit
def warp_reduce_sum(val: Float32, group: cutlass.Constexpr[int] = WARP_SIZE) -> Float32:
    return warp_reduce(val, operator.add, group)


@cute.jit
def block_reduce(
    val: cute.Numeric,
    op: Callable,
    reduction_buffer: cute.Tensor,
) -> cute.Numeric:
    """Cross-warp stage.  ``val`` must already be warp-reduced.

    ``reduction_buffer``: smem tensor of shape ``(rows_per_cta, warps_per_row)``
    (static, warps_per_row <= 32).  Warps are assigned to rows in tidx order:
    warp w handles row ``w // warps_per_row``.
    """
    warps_per_row = const_expr(cute.size(reduction_buffer, mode=[1]))
    assert warps_per_row <= WARP_SIZE and (warps_per_row & (warps_per_row - 1)) == 0
    lane = cute.arch.lane_idx()
    warp = cute.arch.warp_idx()
    row_idx = warp // warps_per_row
    col_idx = warp % warps_per_row
    if lane == 0:
        reduction_buffer[row_idx, col_idx] = val
    cute.arch.barrier()
    # Every aligned group of ``warps_per_row`` lanes reads the whole row of
    # partials (smem broadcast), so a log2(warps_per_row)-step butterfly gives
    # the total to *every* lane, not just the first warps_per_row lanes.
    partial = reduction_buffer[row_idx, lane % warps_per_row]
    return warp_reduce(partial, op, warps_per_row)


@cute.jit
def row_reduce_sum(
    val: Float32,
    threads_per_row: cutlass.Constexpr[int],
    reduction_buffer: Optional[cute.Tensor] = None,
) -> Float32:
    """Sum ``val`` over the ``threads_per_row`` threads of this thread's row.

    ``reduction_buffer`` is required iff ``threads_per_row > 32``.
    """
    val = warp_reduce(val, operator.add, min(threads_per_row, WARP_SIZE))
    if const_expr(threads_per_row > WARP_SIZE):
        assert reduction_buffer is not None, "multi-warp rows need a smem reduction buffer"
        val = block_reduce(val, operator.add, reduction_buffer)
    return val


@cute.jit
def combine_moments(n_a: Float32, mean_a: Float32, m2_a: Float32, n_b: Float32, mean_b: Float32,
                     m2_b: Float32):
    """Chan et al.'s pairwise update of (count, mean, sum of squared deviations): exact in real
    arithmetic, and without the cancellation of sum(x^2) - n * mean^2. Empty parts (n = 0) are
    neutral."""
    n = n_a + n_b
    share_b = n_b * cute.arch.rcp_approx(cutlass.max(n, Float32(1.0)))
    delta = mean_b - mean_a
    return n, mean_a + delta * share_b, m2_a + m2_b + delta * delta * n_a * share_b


@cute.jit
def _warp_reduce_moments(n: Float32, mean: Float32, m2: Float32, group: cutlass.Constexpr[int]):
    offset = group // 2
    for _ in cutlass.range_constexpr(group.bit_length() - 1 if group > 1 else 0):
        n, mean, m2 = combine_moments(n, mean, m2, cute.arch.shuffle_sync_bfly(n, offset=offset),
                                       cute.arch.shuffle_sync_bfly(mean, offset=offset),
                                       cute.arch.shuffle_sync_bfly(m2, offset=offset))
        offset = offset // 2
    return n, mean, m2


@cute.jit
def _through_smem(values: list, reduction_buffer: cute.Tensor) -> list:
    """The cross-warp exchange of a row's reduction: lane 0 of each warp writes its ``values``
    (already warp-reduced) to ``reduction_buffer`` (``(rows_per_cta, warps_per_row, >= len)``),
    and after one barrier each lane reads those of warp ``lane % warps_per_row`` of its row, so
    a butterfly over ``warps_per_row`` lanes gives every lane the row's result."""
    warps_per_row = const_expr(cute.size(reduction_buffer, mode=[1]))
    lane = cute.arch.lane_idx()
    warp = cute.arch.warp_idx()
    row_idx = warp // warps_per_row
    if lane == 0:
        for i in cutlass.range_constexpr(len(values)):
            reduction_buffer[row_idx, warp % warps_per_row, i] = values[i]
    cute.arch.barrier()
    return [reduction_buffer[row_idx, lane % warps_per_row, i] for i in range(len(values))]


@cute.jit
def row_reduce_moments(n: Float32, mean: Float32, m2: Float32, threads_per_row: cutlass.Constexpr[int],
                       reduction_buffer: Optional[cute.Tensor] = None):
    """The row's (count, mean, sum of squared deviations from the mean) from each thread's own
    (``n`` elements, their ``mean``, their ``m2``): one reduction for a LayerNorm's two
    statistics. ``reduction_buffer`` (fp32, ``(rows_per_cta, warps_per_row, 3)``) is required
    iff ``threads_per_row > 32``; every thread of the row gets the result."""
    n, mean, m2 = _warp_reduce_moments(n, mean, m2, min(threads_per_row, WARP_SIZE))
    if const_expr(threads_per_row > WARP_SIZE):
        assert reduction_buffer is not None, "multi-warp rows need a smem reduction buffer"
        n, mean, m2 = _through_smem([n, mean, m2], reduction_buffer)
        n, mean, m2 = _warp_reduce_moments(n, mean, m2, const_expr(cute.size(reduction_buffer, mode=[1])))
    return n, mean, m2


@cute.jit
def _combine_equal(mean_a: Float32, m2_a: Float32, mean_b: Float32, m2_b: Float32, count: cutlass.Constexpr[float]):
    """``combine_moments`` of two parts of ``count`` elements each: the weights are constants
    (no reciprocal on the reduction's path)."""
    delta = mean_b - mean_a
    return (mean_a + mean_b) * Float32(0.5), m2_a + m2_b + delta * delta * Float32(count * 0.5)


@cute.jit
def _butterfly_equal(mean: Float32, m2: Float32, group: cutlass.Constexpr[int], count: cutlass.Constexpr[int]):
    """(mean, m2) over aligned groups of ``group`` lanes that each hold ``count`` elements."""
    offset = group // 2
    part = count
    for _ in cutlass.range_constexpr(group.bit_length() - 1 if group > 1 else 0):
        mean, m2 = _combine_equal(mean, m2, cute.arch.shuffle_sync_bfly(mean, offset=offset),
                                  cute.arch.shuffle_sync_bfly(m2, offset=offset), part)
        offset = offset // 2
        part = part * 2
    return mean, m2


@cute.jit
def row_reduce_moments_equal(mean: Float32, m2: Float32, count: cutlass.Constexpr[int],
                             threads_per_row: cutlass.Constexpr[int],
                             reduction_buffer: Optional[cute.Tensor] = None):
    """``row_reduce_moments`` where every thread of the row holds ``count`` elements (a row that
    fills its build): (mean, sum of squared deviations) of the row. ``reduction_buffer``: fp32,
    ``(rows_per_cta, warps_per_row, >= 2)``."""
    group = const_expr(min(threads_per_row, WARP_SIZE))
    mean, m2 = _butterfly_equal(mean, m2, group, count)
    if const_expr(threads_per_row > WARP_SIZE):
        assert reduction_buffer is not None, "multi-warp rows need a smem reduction buffer"
        mean, m2 = _through_smem([mean, m2], reduction_buffer)
        mean, m2 = _butterfly_equal(mean, m2, const_expr(cute.size(reduction_buffer, mode=[1])), count * group)
    return mean, m2
