"""Division by a launch-time constant on the device: ``n // d`` as ``(n * mul) >> shift`` with the
host's ``cutefi.jit.fastdiv.magic(d)`` (exact for 0 <= n < 2**31): a multiply and a shift where an
integer division is ~20 dependent instructions."""

from __future__ import annotations

import cutlass.cute as cute
from cutlass import Int32, Int64


@cute.jit
def fast_div(n: Int32, mul: Int64, shift: Int32) -> Int32:
    """``n // d`` for ``0 <= n < 2**31`` (``mul``, ``shift``: ``magic(d)``)."""
    return Int32((Int64(n) * mul) >> Int64(shift))
