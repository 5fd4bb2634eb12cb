"""CPU tier: division by a launch-time constant as a multiply and a shift (jit/fastdiv.py), the
quotient the append kernel's device half computes: exact against Python's // for every divisor
up to 4096, random large divisors, and the dividends at the edges of the exact range."""

from __future__ import annotations

import random

import pytest

from cutefi.jit.fastdiv import DIVIDEND_LIMIT, magic


def _edges(divisor: int) -> list[int]:
    near = [divisor * q + r for q in (1, 2, DIVIDEND_LIMIT // divisor - 1) for r in (-1, 0, 1)]
    return [n for n in [0, 1, DIVIDEND_LIMIT - 1, DIVIDEND_LIMIT - 2, *near] if 0 <= n < DIVIDEND_LIMIT]


def test_every_small_divisor_and_random_large_ones():
    rng = random.Random(0)
    divisors = list(range(1, 4097)) + [rng.randrange(4097, DIVIDEND_LIMIT) for _ in range(2000)]
    for divisor in divisors:
        mul, shift = magic(divisor)
        assert 0 < mul < 2**32  # (the device's product of a dividend below 2**31 fits an int64)
        for n in _edges(divisor) + [rng.randrange(DIVIDEND_LIMIT) for _ in range(20)]:
            assert (n * mul) >> shift == n // divisor, (n, divisor)


def test_a_divisor_below_one_is_refused():
    with pytest.raises(ValueError, match="divisor must be >= 1"):
        magic(0)
