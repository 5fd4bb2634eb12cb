"""Division by a launch-time constant as a multiply and a shift (the host half; the device half
is ``cutefi/cute/fastdiv.py``). A kernel that divides by a runtime size in its inner loop pays
~20 dependent instructions for each integer division; with ``(mul, shift)`` computed here once a
launch, ``n // d == (n * mul) >> shift`` for every ``0 <= n < 2**31`` (Granlund-Montgomery
round-up: shift = 31 + ceil(log2 d), mul = ceil(2**shift / d) < 2**32; the error of mul, below
d, times n stays under 2**shift / d >= 2**31)."""

from __future__ import annotations

DIVIDEND_LIMIT = 2**31  # the quotient is exact for dividends below this


def magic(divisor: int) -> tuple[int, int]:
    """``(mul, shift)`` of ``divisor`` (an int >= 1)."""
    if divisor < 1:
        raise ValueError(f"divisor must be >= 1, got {divisor}")
    shift = 31 + (divisor - 1).bit_length()  # 31 + ceil(log2 divisor)
    return -(-(1 << shift) // divisor), shift
