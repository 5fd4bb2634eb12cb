"""CPU tier: cutefi's dtype names agree with torch: each name's bits and torch dtype, and the
FP8 saturation limits the quantising kernels are built with are the formats' largest finite
values."""

from __future__ import annotations

import pytest
import torch

from cutefi import dtypes


@pytest.mark.parametrize("name", sorted(dtypes.DTYPES))
def test_bits_and_names_match_torch(name):
    torch_dtype = getattr(torch, dtypes.DTYPES[name][1])
    assert dtypes.bits(name) == torch_dtype.itemsize * 8
    assert dtypes.name_of(torch_dtype) == name


@pytest.mark.parametrize("name, torch_dtype", [("fp8e4m3", torch.float8_e4m3fn), ("fp8e5m2", torch.float8_e5m2)])
def test_fp8_limits_are_the_largest_finite_values(name, torch_dtype):
    assert dtypes.FP8_MAX[name] == torch.finfo(torch_dtype).max
