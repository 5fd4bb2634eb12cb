"""Split-K meetings: the CTAs (or work units) that share an output tile count themselves in
a per-tile int32 counter, and the last to arrive sums the others' fp32 partials.

The counters start at zero (the API zeroes them when it makes them) and the last arrival
puts its counter back to zero, so the next launch on the same scratch starts clean.
"""

from __future__ import annotations

import cutlass
import cutlass.cute as cute
from cutlass import Int32


@cute.jit
def arrive_last(counter: cute.Pointer, splits: Int32, flag: cute.Tensor, is_leader: cutlass.Boolean,
                barrier) -> cutlass.Boolean:
    """Count this split in ``counter``; True in every thread of the split that counts last.

    Every thread's partial-sum writes must come before the call. One acq_rel atomic by one
    thread, between two barriers, publishes them (the first barrier orders them before it;
    release is cumulative) and, in the last split, orders the reads of the others' partials
    after their writes: a gpu-scope fence in each thread measured several µs a meeting.
    ``barrier``: the participating threads' barrier (``arrive_and_wait``); ``flag``: one
    Int32 of shared memory the leader writes the verdict to.
    """
    barrier.arrive_and_wait()
    if is_leader:
        arrived = cute.arch.atomic_add(counter, Int32(1), sem="acq_rel", scope="gpu")
        flag[0] = Int32(arrived == splits - 1)
    barrier.arrive_and_wait()
    return flag[0] != 0


@cute.jit
def reset_counter(counter: cute.Pointer):
    """The last split's clean-up: zero for the next launch on this scratch."""
    cute.make_tensor(counter, cute.make_layout(1))[0] = Int32(0)
