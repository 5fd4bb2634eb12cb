"""CPU tier: the norm builds' geometry (``cutefi/norm/launch.py``): the persistent LayerNorm
builds' ring fits static shared memory, and ``row_iters`` with the contract's grid covers
every row exactly with at most one wave of resident CTAs."""

from __future__ import annotations

import pytest

from cutefi.norm import launch

STATIC_SMEM = 48 * 1024  # the kernel's ring and reduction buffers are static shared memory


def _geometries():
    for kind, dtype, n_class, fused, gemma, aligned, out_dtype in launch._variants():
        yield (kind, dtype, n_class, fused, aligned, out_dtype), launch.geometry(kind, dtype, n_class, fused, aligned,
                                                                                   out_dtype)


def test_prefetch_only_on_aligned_layernorm_and_the_ring_fits():
    prefetching = 0
    for (kind, _, n_class, fused, aligned, _), shape in _geometries():
        if shape.prefetch:
            prefetching += 1
            assert kind == "layer" and aligned and not fused, (kind, n_class)
            assert n_class >= 1024  # the 2^30-row bound of row_iters holds by memory size
        assert shape.ring_bytes + 8 * shape.rows_per_cta * shape.warps_per_row * 4 <= STATIC_SMEM, (kind, n_class)
    assert prefetching  # the table is in use


@pytest.mark.parametrize("n_class, quant", sorted(launch._LAYER_PREFETCH))
@pytest.mark.parametrize("rows", [1, 7, 127, 128, 1000, 4096, 16384, 65537, 1 << 22])
@pytest.mark.parametrize("sms", [1, 80, 132])
def test_row_iters_and_grid_cover_every_row_once(n_class, quant, rows, sms):
    shape = launch.geometry("layer", "bf16", n_class, False, True, "fp8e4m3" if quant else None)
    contract = launch.contract("layer", "bf16", n_class, False, False, True, "fp8e4m3" if quant else None)
    iters = launch.row_iters(shape, rows, sms)
    grid = contract.grid({"M": rows, "row_iters": iters})[0]
    groups = -(-rows // shape.rows_per_cta)
    # CTA b's thread rows are b + i * grid (row groups), i < iters: together every group < grid * iters
    assert grid * iters >= groups and (grid - 1) * iters < groups
    assert grid <= max(1, sms * shape.min_ctas_per_sm) or iters == 1
    if rows > sms * shape.min_ctas_per_sm * shape.rows_per_cta:
        assert iters > 1


def test_row_iters_without_prefetch_is_one_and_bounded_rows():
    plain = launch.geometry("rms", "bf16", 4096, False, True, None)
    assert launch.row_iters(plain, 1 << 25, 132) == 1
    with pytest.raises(ValueError, match="2\\^30"):
        launch.row_iters(launch.geometry("layer", "bf16", 2048, False, True, None), 1 << 30, 132)
