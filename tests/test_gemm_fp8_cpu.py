"""CPU tier: quantize_fp8 (torch operations: it runs here) against a float64 reference of the
group scales written in the test, and the argument checks of the block-scaled and grouped FP8
GEMMs, which run before any device is touched."""

from __future__ import annotations

import pytest
import torch

import cutefi


def _reference_scales(x: torch.Tensor, rows: int, cols: int, fp8: torch.dtype) -> torch.Tensor:
    """amax / fp8 max of each rows x cols group (1.0 for an all-zero group), in float64."""
    m, k = x.shape
    scales = torch.empty(-(-m // rows), -(-k // cols), dtype=torch.float64)
    for i in range(scales.shape[0]):
        for j in range(scales.shape[1]):
            amax = x[i * rows:(i + 1) * rows, j * cols:(j + 1) * cols].double().abs().max().item()
            scales[i, j] = amax / torch.finfo(fp8).max if amax > 0 else 1.0
    return scales


@pytest.mark.parametrize("fp8", [torch.float8_e4m3fn, torch.float8_e5m2])
@pytest.mark.parametrize("group_shape,shape", [((1, 128), (5, 300)), ((128, 128), (130, 257)), (None, (7, 33))])
def test_quantize_fp8_groups(fp8, group_shape, shape):
    gen = torch.Generator().manual_seed(sum(shape))
    x = torch.randn(shape, generator=gen, dtype=torch.bfloat16) * 3
    x[0, :5] = 0  # (part of a group zero: the group's scale still comes from the rest)
    q, scale = cutefi.quantize_fp8(x, fp8, group_shape=group_shape)
    assert q.dtype == fp8 and q.shape == x.shape and q.is_contiguous()
    rows, cols = group_shape or shape
    ref = _reference_scales(x, rows, cols, fp8)
    if group_shape is None:
        ref = ref.reshape(1)
    torch.testing.assert_close(scale.double(), ref, rtol=1e-6, atol=0)
    full = scale.reshape(-(-shape[0] // rows), -(-shape[1] // cols)).repeat_interleave(rows, 0)[:shape[0]].repeat_interleave(cols, 1)[:, :shape[1]]
    back = q.double() * full
    # (half a unit in the last place of the format's mantissa, or of its smallest subnormal step)
    mantissa = {torch.float8_e4m3fn: 3, torch.float8_e5m2: 2}[fp8]
    tiny = {torch.float8_e4m3fn: 2.0**-9, torch.float8_e5m2: 2.0**-16}[fp8]
    bound = x.double().abs() * 2.0**-(mantissa + 1) + full * tiny
    assert ((back - x.double()).abs() <= bound * 1.0001).all()
    if group_shape is not None:
        _, mn = cutefi.quantize_fp8(x, fp8, group_shape=group_shape, scale_major_mode="MN")
        assert torch.equal(mn, scale.t())


def test_quantize_fp8_saturates_and_refuses():
    q, scale = cutefi.quantize_fp8(torch.tensor([[1e30, -1e30] + [1.0] * 126]), group_shape=(1, 128))
    assert torch.isfinite(q.float()).all() and q.float()[0, 0] == 448 and q.float()[0, 1] == -448
    with pytest.raises(TypeError, match="float8_e4m3fn or torch.float8_e5m2"):
        cutefi.quantize_fp8(torch.ones(4, 4), torch.int8)
    with pytest.raises(ValueError, match="group_shape"):
        cutefi.quantize_fp8(torch.ones(4, 4), group_shape=(1, 64))
    with pytest.raises(ValueError, match="2-D x"):
        cutefi.quantize_fp8(torch.ones(2, 4, 4), group_shape=(1, 128))
    with pytest.raises(TypeError, match="16- or 32-bit"):
        cutefi.quantize_fp8(torch.ones(4, 4).to(torch.float8_e4m3fn))


@pytest.mark.parametrize("call, exc, pattern", [
    (lambda a, b: cutefi.gemm_fp8_nt_groupwise(a, b, torch.ones(8, 2), torch.ones(1, 2), "K",
                                               scale_granularity_mnk=(1, 64, 128)), ValueError, "scale_granularity"),
    (lambda a, b: cutefi.gemm_fp8_nt_groupwise(a, b, torch.ones(8, 2), torch.ones(1, 2), "X"), ValueError,
     "scale_major_mode"),
    (lambda a, b: cutefi.gemm_fp8_nt_groupwise(a, b, torch.ones(8, 2), torch.ones(1, 2), "K", mma_sm=3), ValueError,
     "mma_sm"),
    (lambda a, b: cutefi.gemm_fp8_nt_groupwise(a, b, torch.ones(8, 2), torch.ones(1, 2), "K", backend="cutlass"),
     ValueError, "FlashInfer's"),
    (lambda a, b: cutefi.group_gemm_fp8_nt_groupwise(a, b[None], torch.ones(8, 2), torch.ones(1, 1, 2),
                                                     torch.tensor([0, 8]), scale_major_mode="K", backend="trtllm"),
     ValueError, "FlashInfer's"),
    (lambda a, b: cutefi.gemm_fp8_nt_groupwise(a.float(), b, torch.ones(8, 2), torch.ones(1, 2), "K"), TypeError,
     "a must be torch.float8"),
    (lambda a, b: cutefi.gemm_fp8_nt_groupwise(a, b[:, :128], torch.ones(8, 2), torch.ones(1, 2), "K"), ValueError,
     "K must match"),
    (lambda a, b: cutefi.gemm_fp8_nt_groupwise(a, b, torch.ones(8, 2), torch.ones(1, 2), "K", out_dtype=torch.float32),
     TypeError, "bfloat16 or torch.float16"),
    (lambda a, b: cutefi.group_gemm_fp8_nt_groupwise(a, b[None], torch.ones(8, 2), torch.ones(1, 1, 2),
                                                     torch.tensor([0, 8], dtype=torch.int32),
                                                     scale_granularity_mnk=(128, 128, 128)), ValueError, "(1, 128, 128)"),
    (lambda a, b: cutefi.group_gemm_fp8_nt_groupwise(a, b[None], torch.ones(8, 2), torch.ones(1, 1, 2),
                                                     torch.tensor([0, 4, 8], dtype=torch.int32)), ValueError,
     "experts \\+ 1 = 2 entries"),
])
def test_fp8_gemm_arguments_refused_before_the_device(call, exc, pattern):
    a = torch.zeros(8, 256, dtype=torch.float8_e4m3fn)
    b = torch.zeros(64, 256, dtype=torch.float8_e4m3fn)
    with pytest.raises(exc, match=pattern):
        call(a, b)


def test_segment_gemm_arguments_refused_before_the_device():
    wrapper = cutefi.SegmentGEMMWrapper(torch.empty(16, dtype=torch.int8))
    x, w = torch.zeros(8, 128, dtype=torch.bfloat16), torch.zeros(2, 64, 128, dtype=torch.bfloat16)
    with pytest.raises(ValueError, match=r"batch_size \(segments\) must be in \[1, 1024\]"):
        wrapper.run(x, w, 0, True, seg_lens=torch.tensor([8]))
    with pytest.raises(TypeError, match="bfloat16 or float16"):
        wrapper.run(x, w.half(), 2, True, seg_lens=torch.tensor([4, 4]))
    with pytest.raises(ValueError, match="d_in and d_out must be multiples of 8"):
        wrapper.run(x[:, :124], w[:, :, :124], 2, True, seg_lens=torch.tensor([4, 4]))
    with pytest.raises(ValueError, match="must be on a CUDA device"):
        wrapper.run(x, w, 2, True, seg_lens=torch.tensor([4, 4]))
    with pytest.raises(ValueError, match="backend must be"):
        cutefi.SegmentGEMMWrapper(torch.empty(16, dtype=torch.int8), backend="sm90")


def test_grouped_fp8_takes_the_swapped_builds_for_experts_of_few_tokens():
    """Experts of 32 tokens or fewer on average: the weight as A in 32-token tiles; up to 64:
    64-token tiles; more: the row form (128 x 256, or 128 x 128 below 0.8 of a wave)."""
    import importlib

    importlib.import_module("cutefi.gemm.api")  # (the family first: it imports segment_api in order)
    from cutefi.gemm.launch import Sm90Config
    from cutefi.gemm.segment_api import _config

    assert _config(8 * 4, 4096, 8, 132, swapped=True) == Sm90Config(128, 32, 1, True)
    assert _config(256 * 32, 4096, 256, 132, swapped=True) == Sm90Config(128, 32, 1, True)
    assert _config(8 * 33, 4096, 8, 132, swapped=True) == Sm90Config(128, 64, 1, True)
    assert _config(8 * 64, 4096, 8, 132, swapped=True) == Sm90Config(128, 64, 1, True)
    assert _config(8 * 65, 4096, 8, 132, swapped=True) == Sm90Config(128, 256, 1)
    assert _config(8 * 4, 4096, 8, 132) == Sm90Config(128, 256, 1)  # (16 bits: no swapped grouped build)
