"""Split-K inside a thread-block cluster: the ``cluster_k`` CTAs of a cluster hold the K
splits of one output tile, and each sums and stores one share of it.

Every consumer thread holds the same accumulator positions in every CTA, so the tile is cut
by register index: share ``c`` is a thread's values ``[c * n / k, (c + 1) * n / k)``. A CTA
sends each peer its share of this CTA's partial sums with ``st.async`` into the peer's
shared memory (distributed shared memory; the bytes complete a transaction count on the
peer's mbarrier, so no fence or flag round trip through L2 is needed), waits until the
other ``k - 1`` partials of its own share have landed, and adds them in split order (the
result does not depend on which CTA finishes first). Against the workspace meeting
(:mod:`cutefi.cute.split_k`) no global memory is touched and no CTA reduces alone while the
others idle.

The exchange buffer of a CTA holds ``k - 1`` slots (one per sender: slot
``(sender - receiver - 1) mod k``) of ``(vectors, threads, vec)`` fp32, consecutive threads
16 bytes apart so that a warp's vector stores and loads are conflict-free. One meeting a
CTA a launch: the sender never waits for the receiver to free its slot, so a launch gives a
CTA one work unit (the plan's ``ctas == units``); ``round`` picks the mbarrier phase.

With more splits than the cluster holds (``groups`` clusters a tile), the shares then meet
through the workspace (:func:`meet_groups`).
"""

from __future__ import annotations

import cutlass
import cutlass.cute as cute
from cutlass import Float32, Int32

from cutefi.cute import split_k


@cute.jit
def meet(values: cute.Tensor, thread: Int32, exchange, cluster_k: cutlass.Constexpr[int],
         threads: cutlass.Constexpr[int], round: Int32):
    """Sum this CTA's share of ``values`` (fp32 registers, same positions in every CTA) over
    the cluster's K splits, in place. ``exchange``: (buffer, mbarrier, rank in the cluster)."""
    buffer, full, rank = exchange
    share = cute.size(values) // cluster_k
    vec = min(4, share)
    vectors = share // vec
    slot_elems = vectors * threads * vec

    # 1. every other CTA gets its share of this CTA's partial sums
    for c in cutlass.range_constexpr(cluster_k):
        if c != rank:
            slot = (rank - c - 1 + cluster_k) % cluster_k
            for j in cutlass.range_constexpr(vectors):
                offset = cute.assume(slot * slot_elems + (j * threads + thread) * vec, divby=vec)
                words = tuple(values[c * share + j * vec + e].bitcast(Int32) for e in range(vec))
                cute.arch.store_async_dsmem(buffer + offset, words if vec > 1 else words[0], full, c)

    # 2. the other k - 1 partials of this CTA's share land
    if thread == 0:
        cute.arch.mbarrier_arrive_and_expect_tx(full, (cluster_k - 1) * slot_elems * 4)
    cute.arch.mbarrier_wait(full, round % 2)

    # 3. added in split order (this CTA's own partial at its rank)
    staged = cute.make_rmem_tensor(cute.make_layout((vec, cluster_k)), Float32)
    for c in cutlass.range_constexpr(cluster_k):
        if c == rank:
            for j in cutlass.range_constexpr(vectors):
                for s in cutlass.range_constexpr(cluster_k):
                    if s != c:
                        slot = (s - c - 1 + cluster_k) % cluster_k
                        offset = slot * slot_elems + (j * threads + thread) * vec
                        src = cute.make_tensor(buffer + cute.assume(offset, divby=vec), cute.make_layout(vec))
                        cute.autovec_copy(src, staged[None, s])
                for e in cutlass.range_constexpr(vec):
                    index = c * share + j * vec + e
                    total = values[index] if c == 0 else staged[e, 0]
                    for s in cutlass.range_constexpr(1, cluster_k):
                        total = total + (values[index] if s == c else staged[e, s])
                    values[index] = total


@cute.jit
def meet_groups(values: cute.Tensor, thread: Int32, rank: Int32, cluster_k: cutlass.Constexpr[int],
                threads: cutlass.Constexpr[int], workspace: cute.Pointer, counters: cute.Pointer, tile: Int32,
                groups: Int32, group: Int32, flag: cute.Tensor, barrier) -> cutlass.Boolean:
    """More splits than a cluster holds: after :func:`meet`, ``groups`` clusters hold one tile's
    K splits, and the CTAs of equal rank (one share each) meet through the workspace like
    :func:`cutefi.cute.split_k.arrive_last`: each writes its share, the last to count sums the
    ``groups`` shares in group order into ``values`` and returns True (it stores the share);
    the counter of (tile, rank) goes back to zero. Against one workspace meeting of all the
    splits, each tile's last CTA reads ``groups`` half tiles instead of ``2 * groups`` tiles."""
    share = cute.size(values) // cluster_k
    vectors = share // 4
    slot = (tile * cluster_k + rank) * groups  # this (tile, share)'s first group slot
    meeting = (tile * cluster_k + rank)
    for c in cutlass.range_constexpr(cluster_k):
        if c == rank:
            mine = _group_slot(workspace, slot + group, vectors, threads)
            staged = cute.make_rmem_tensor(cute.make_layout(4), Float32)
            for j in cutlass.range_constexpr(vectors):
                for e in cutlass.range_constexpr(4):
                    staged[e] = values[c * share + 4 * j + e]
                cute.autovec_copy(staged, mine[None, j, thread])
    last = split_k.arrive_last(counters + meeting, groups, flag, thread == 0, barrier)
    if last:
        for c in cutlass.range_constexpr(cluster_k):
            if c == rank:
                totals = cute.make_rmem_tensor(cute.make_layout((4, vectors)), Float32)
                totals.fill(0.0)
                staged = cute.make_rmem_tensor(cute.make_layout((4, vectors)), Float32)
                for g in cutlass.range(groups, unroll=1):
                    theirs = _group_slot(workspace, slot + g, vectors, threads)
                    for j in cutlass.range_constexpr(vectors):
                        cute.autovec_copy(theirs[None, j, thread], staged[None, j])
                    totals.store(totals.load() + staged.load())
                for j in cutlass.range_constexpr(vectors):
                    for e in cutlass.range_constexpr(4):
                        values[c * share + 4 * j + e] = totals[e, j]
        if thread == 0:
            split_k.reset_counter(counters + meeting)
    return last


def _group_slot(workspace: cute.Pointer, slot, vectors: int, threads: int) -> cute.Tensor:
    """One share of one group: fp32 (4, vector, thread), consecutive threads 16 bytes apart."""
    elems = 4 * vectors * threads
    offset = cute.assume(cutlass.Int64(slot) * elems, divby=4 * threads)
    return cute.make_tensor(workspace + offset, cute.make_layout((4, vectors, threads), stride=(1, 4 * threads, 4)))
