"""Work units of a grouped (segment) GEMM: segment ``s`` is rows ``[indptr[s], indptr[s + 1])``
of A and of the output, multiplied by weight ``weight_indices[s]``.

``prefix[s]`` is the number of output tiles of the segments before ``s``
(``ceil(rows / tile_m) * tiles_n`` each), so ``prefix[groups]`` is the number of work units and
the tiles of a segment are consecutive units (M tiles fastest: the CTAs running together share
the segment's weight columns in L2). The Hopper builds count it in each CTA from ``indptr``
(``count_prefix``: no host pass, no extra launches); the mma.sync builds read one the host
wrote (``tile_prefix``). A unit's segment is found by binary search over the prefix. A
segment's last M tile reads rows of the next segment (TMA loads whole tiles); the store drops
them.
"""

from __future__ import annotations

import cutlass
import cutlass.cute as cute
from cutlass import Int32

_FLAT = 1 << 30  # (the extent the index vectors are viewed with; launch.MAX_GROUPS bounds the segments)


@cute.jit
def count_prefix(indptr_ptr: cute.Pointer, staged: cute.Tensor, groups: Int32, tiles_n: Int32,
                 tile_m: cutlass.Constexpr[int], thread: Int32, threads: cutlass.Constexpr[int]):
    """``staged[s]`` = the output tiles of the segments before ``s``, for s in ``[0, groups]``,
    from ``indptr``; every thread takes part and the caller synchronises the CTA before
    reading it. The CTA stages ``indptr`` (one load latency), then warp 0 scans 32 segments
    a round with shuffles, in place: a round reads the raw bounds it overwrites before
    writing them, and carries its last bound and running total to the next round."""
    indptr = cute.make_tensor(indptr_ptr, cute.make_layout(_FLAT))
    for s in cutlass.range(thread, groups + 1, threads, unroll=1):
        staged[s] = indptr[s]
    cute.arch.sync_threads()
    if thread < 32:
        lane = thread
        previous_end = staged[0]
        carry = Int32(0)
        for first in cutlass.range(0, groups, 32, unroll=1):
            segment = first + lane
            end = previous_end
            if segment < groups:
                end = staged[segment + 1]
            start = cute.arch.shuffle_sync_up(end, 1)
            if lane == 0:
                start = previous_end
            # (a negative length counts as empty, as a zero one; lanes past the last segment add 0)
            total = (cutlass.max(end - start, 0) + tile_m - 1) // tile_m * tiles_n
            if segment >= groups:
                total = 0
            for offset in cutlass.range_constexpr(5):  # (inclusive scan over the warp)
                before = cute.arch.shuffle_sync_up(total, 1 << offset)
                if lane >= (1 << offset):
                    total = total + before
            total = total + carry
            if segment < groups:
                staged[segment + 1] = total
            previous_end = cute.arch.shuffle_sync(end, 31)
            carry = cute.arch.shuffle_sync(total, 31)
        # (every lane read staged[0] before lane 0 rewrites it: without the warp barrier the
        # order is not guaranteed by the memory model, and racecheck reports the hazard)
        cute.arch.sync_warp()
        if lane == 0:
            staged[0] = 0


@cute.jit
def last_start_at_most(starts: cute.Tensor, count: Int32, value: Int32) -> Int32:
    """The last ``s`` in ``[0, count)`` with ``starts[s] <= value`` (binary search over the
    non-decreasing ``starts``; ``starts[0] <= value``): the segment that holds ``value``, where
    segment ``s`` runs from ``starts[s]`` to ``starts[s + 1]`` (empty ones are never found)."""
    low = Int32(0)
    high = count
    while high - low > 1:
        middle = (low + high) // 2
        if starts[middle] <= value:
            low = middle
        else:
            high = middle
    return low


@cute.jit
def find_unit(staged: cute.Tensor, indptr_ptr: cute.Pointer, weights_ptr: cute.Pointer, groups: Int32,
              tile_m: cutlass.Constexpr[int], linear: Int32):
    """(m tile, n tile, weight, first row of the segment, its end row) of work unit ``linear``
    (< ``staged[groups]``): the last segment whose first unit is at most ``linear`` (empty
    segments share their successor's first unit, so they are never found)."""
    low = last_start_at_most(staged, groups, linear)
    indptr = cute.make_tensor(indptr_ptr, cute.make_layout(_FLAT))
    weights = cute.make_tensor(weights_ptr, cute.make_layout(_FLAT))
    first_row = indptr[low]
    end_row = indptr[low + 1]
    tiles_m = (end_row - first_row + tile_m - 1) // tile_m
    local = linear - staged[low]
    n_tile = local // tiles_m
    m_tile = local - n_tile * tiles_m
    return m_tile, n_tile, weights[low], first_row, end_row
