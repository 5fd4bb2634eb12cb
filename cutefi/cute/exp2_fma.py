"""2^x on the FMA pipe instead of the MUFU unit (FlashAttention-4's trick): where a kernel's
exponentials keep the MUFU unit (16 a cycle an SM) as busy as its tensor cores, taking some of
them as a short polynomial (the FMA pipe does 128 a cycle) evens the two out.

``2^x = 2^n * 2^f`` with ``n = round(x)`` and ``f = x - n`` in [-0.5, 0.5]: ``x + 1.5 * 2^23``
rounds x to an integer held in the low mantissa bits; ``2^f`` is a degree-3 polynomial fitted
for relative error (at most 1.1e-4, below a bf16 or fp16 ulp); ``2^n`` is added to the
exponent field as an integer (n << 23).
"""

from __future__ import annotations

import cutlass.cute as cute
from cutlass import Float32, Int32

_ROUND = 12582912.0  # 1.5 * 2^23
_C1, _C2, _C3 = 0.693282961845398, 0.2422110140323639, 0.05500885844230652  # 2^f ~ 1 + c1 f + c2 f^2 + c3 f^3
_FLOOR = -127.0  # 2^-127 is taken as 0


@cute.jit
def exp2_fma(x: Float32) -> Float32:
    """2^x for x <= ~8 (softmax exponents): 8 FMA-pipe instructions, no MUFU. x <= -127 (and
    -inf) gives 0, x in (-127, -125) a value below 2^-125 (an exponent that leaves the normal
    range)."""
    x = cute.arch.fmax(x, Float32(_FLOOR))
    rounded = x + Float32(_ROUND)
    f = x - (rounded - Float32(_ROUND))
    p = (Float32(_C3) * f + Float32(_C2)) * f + Float32(_C1)
    p = p * f + Float32(1.0)
    return (p.bitcast(Int32) + (rounded.bitcast(Int32) << 23)).bitcast(Float32)
