"""GPU tier: FP8 GEMM with DeepSeek-style block scales (gemm_fp8_nt_groupwise,
gemm_fp8_nt_blockscaled) on Hopper, against a float32 reference written here: each operand
dequantised block by block (``a.float() * a_scale`` expanded over its 1 x 128 or 128 x 128
groups, ``b`` over its 128 x 128 blocks), then one fp32 matmul. Scales vary per row and block
(a wrong index is a visible error), inputs fresh, outputs poisoned (NaN) first. The scales are
applied to each 128-element K block's sums before they are added up, as the reference does in
exact arithmetic: only the summation order and the output's one rounding differ."""

from __future__ import annotations

import pytest
import torch

import cutefi
from cutefi.gemm.plan import override

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(
    not torch.cuda.is_available() or torch.cuda.get_device_capability() != (9, 0), reason="FP8 GEMM: Hopper only")]

FORMATS = [torch.float8_e4m3fn, torch.float8_e5m2]
REL = {torch.bfloat16: 6e-3, torch.float16: 3e-3}


def _ceil(x: int, y: int) -> int:
    return -(-x // y)


def random_scaled(m: int, k: int, fp8: torch.dtype, rows: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(FP8 values, float32 scales [ceil(m / rows), ceil(k / 128)] in 0.5 .. 2 / fp8 range):
    random values over the format's range and random positive scales per group."""
    gen = torch.Generator(device="cuda").manual_seed(seed)
    limit = torch.finfo(fp8).max
    values = (torch.rand(m, k, device="cuda", generator=gen) * 2 - 1) * limit
    scales = (torch.rand(_ceil(m, rows), _ceil(k, 128), device="cuda", generator=gen) * 1.5 + 0.5) / limit
    return values.to(fp8), scales


def dequantised(values: torch.Tensor, scales: torch.Tensor, rows: int) -> torch.Tensor:
    m, k = values.shape
    full = scales.repeat_interleave(rows, 0)[:m].repeat_interleave(128, 1)[:, :k]
    return values.float() * full


def check(out: torch.Tensor, ref: torch.Tensor) -> float:
    assert not torch.isnan(out).any(), "NaN: an element was never written"
    rel = ((out.float() - ref).norm() / ref.norm()).item()
    assert rel < REL[out.dtype], f"relative error {rel:.2e}"
    torch.testing.assert_close(out.float(), ref, rtol=2e-2, atol=2e-2 * ref.abs().max().item())
    return rel


@pytest.mark.parametrize("fp8", FORMATS)
@pytest.mark.parametrize("m,n,k", [(1, 128, 128), (7, 264, 1040), (64, 4096, 4096), (128, 2112, 7168),
                                   (300, 1000, 1008), (1000, 7168, 2048), (4096, 4096, 7168), (129, 136, 16)])
def test_groupwise(fp8, m, n, k):
    """1 x 128 activation groups, 128 x 128 weight blocks, every scale layout FlashInfer names."""
    a, a_scale = random_scaled(m, k, fp8, 1, m + k)
    b, b_scale = random_scaled(n, k, fp8, 128, n)
    ref = dequantised(a, a_scale, 1) @ dequantised(b, b_scale, 128).t()
    for mode, sa, sb in (("K", a_scale, b_scale), ("MN", a_scale.t().contiguous(), b_scale.t().contiguous()),
                         (None, a_scale, b_scale.t()), ("MN", a_scale.t(), b_scale.t())):
        for out_dtype in (torch.bfloat16, torch.float16):
            out = torch.full((m, n), float("nan"), device="cuda", dtype=out_dtype)
            result = cutefi.gemm_fp8_nt_groupwise(a, b, sa, sb, scale_major_mode=mode, out=out)
            assert result is out
            check(out, ref)


@pytest.mark.parametrize("m,n,k", [(200, 384, 640), (4096, 7168, 2048), (40, 2112, 1040), (130, 264, 512)])
def test_blockscaled(m, n, k):
    """128 x 128 activation blocks (scale_granularity_mnk (128, 128, 128))."""
    a, a_scale = random_scaled(m, k, torch.float8_e4m3fn, 128, 3)
    b, b_scale = random_scaled(n, k, torch.float8_e4m3fn, 128, 4)
    ref = dequantised(a, a_scale, 128) @ dequantised(b, b_scale, 128).t()
    check(cutefi.gemm_fp8_nt_blockscaled(a, b, a_scale.t().contiguous(), b_scale.t().contiguous()), ref)
    check(cutefi.gemm_fp8_nt_groupwise(a, b, a_scale, b_scale, "K", scale_granularity_mnk=(128, 128, 128),
                                       out_dtype=torch.float16), ref)


@pytest.mark.parametrize("config,splits", [("128x256c1", 1), ("128x256c1", 2), ("128x256c2", 1), ("128x192c1", 1), ("128x192c1", 2),
                                           ("128x128c1", 1), ("128x64c1", 1),
                                           ("128x128c1", 3), ("128x128c1k2", 2),
                                           ("128x128c1k2", 4), ("128x64c1", 5), ("128x64c1t", 1),
                                           ("128x64c1t", 3), ("128x32c1t", 1), ("128x32c1t", 2),
                                           ("128x64c1k2t", 2), ("128x32c1k2t", 4)])
def test_every_build_and_split(config, splits):
    """Each block-scaled build, with K split through the workspace and in clusters (the
    promoted sums meet like any others), on a problem of several tiles a CTA; the swapped
    builds (``t``: the weight's rows as the tile's) on 520 tokens, a partial last token tile."""
    m, n, k = 520, 1032, 3072
    a, a_scale = random_scaled(m, k, torch.float8_e5m2, 1, 11)
    b, b_scale = random_scaled(n, k, torch.float8_e5m2, 128, 12)
    ref = dequantised(a, a_scale, 1) @ dequantised(b, b_scale, 128).t()
    with override(config=config, splits=splits):
        out = torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
        cutefi.gemm_fp8_nt_groupwise(a, b, a_scale, b_scale, "K", out=out)
    check(out, ref)


@pytest.mark.parametrize("config", ["128x192c1", "128x256c1"])
@pytest.mark.parametrize("m,n,k", [(260, 1160, 640), (130, 2112, 1024), (128, 64, 256)])
def test_wide_tiles_across_weight_blocks(config, m, n, k):
    """The 192-wide tiles start at column 0 or 64 of a weight block and take two blocks' scales
    (a loop for each start); a tile past N's last block (1160: the tile from 1152, 2112: from
    1920 / 2048) reads that block's scale again for the columns it drops; one tile narrower than
    the build (N = 64)."""
    a, a_scale = random_scaled(m, k, torch.float8_e4m3fn, 1, 21)
    b, b_scale = random_scaled(n, k, torch.float8_e4m3fn, 128, 22)
    ref = dequantised(a, a_scale, 1) @ dequantised(b, b_scale, 128).t()
    for sa, sb, mode in ((a_scale, b_scale, "K"), (a_scale.t().contiguous(), b_scale.t().contiguous(), "MN")):
        with override(config=config, splits=1):
            out = torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
            cutefi.gemm_fp8_nt_groupwise(a, b, sa, sb, mode, out=out)
        check(out, ref)


@pytest.mark.parametrize("m", [1, 16, 33, 64])
def test_few_tokens_take_the_swapped_builds(m):
    """A few tokens take a swapped build (the weight's 128-row blocks along the tile's rows, each
    token's scales along its columns): every scale layout, both granularities."""
    from cutefi.gemm.plan import block_scaled_plan

    n, k = 2112, 4096  # (2112: the last weight tile straddles a 128-row block's end)
    assert block_scaled_plan(m, n, k, 132).config.swap
    for rows in (1, 128):
        a, a_scale = random_scaled(m, k, torch.float8_e4m3fn, rows, m + rows)
        b, b_scale = random_scaled(n, k, torch.float8_e4m3fn, 128, 7)
        ref = dequantised(a, a_scale, rows) @ dequantised(b, b_scale, 128).t()
        for mode, sa, sb in (("K", a_scale, b_scale), ("MN", a_scale.t().contiguous(), b_scale.t().contiguous())):
            out = torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
            cutefi.gemm_fp8_nt_groupwise(a, b, sa, sb, scale_major_mode=mode, scale_granularity_mnk=(rows, 128, 128),
                                         out=out)
            check(out, ref)


def test_quantize_fp8_round_trip_and_saturation():
    """quantize_fp8's groups dequantise to the input within the format's rounding, and its
    output feeds gemm_fp8_nt_groupwise; values past the range saturate (no inf or NaN)."""
    gen = torch.Generator(device="cuda").manual_seed(5)
    x = torch.randn(333, 1008, device="cuda", generator=gen, dtype=torch.bfloat16)
    w = torch.randn(520, 1008, device="cuda", generator=gen, dtype=torch.bfloat16)
    xq, xs = cutefi.quantize_fp8(x, group_shape=(1, 128))
    wq, ws = cutefi.quantize_fp8(w, group_shape=(128, 128), scale_major_mode="MN")
    assert xs.shape == (333, 8) and ws.shape == (8, 5)
    x_back = dequantised(xq, xs, 1)
    # (e4m3: half a unit of its 3-bit mantissa, or of its subnormal spacing 2^-9 times the scale)
    step = xs.repeat_interleave(128, 1)[:, :1008] * 2**-10
    assert ((x_back - x.float()).abs() <= x.float().abs() * 2**-4 + step * 1.001).all()
    out = cutefi.gemm_fp8_nt_groupwise(xq, wq, xs.t().contiguous(), ws, "MN")
    rel = ((out.float() - x.float() @ w.float().t()).norm() / (x.float() @ w.float().t()).norm()).item()
    assert rel < 0.05, rel  # (FP8 e4m3's own rounding of both inputs)
    q, s = cutefi.quantize_fp8(torch.tensor([1e30, -1e30, 1.0], device="cuda"), torch.float8_e5m2)
    assert torch.isfinite(q.float()).all() and s.shape == (1,)


def test_refusals():
    a = torch.zeros(64, 256, dtype=torch.float8_e4m3fn, device="cuda")
    b = torch.zeros(128, 256, dtype=torch.float8_e4m3fn, device="cuda")
    ones = dict(device="cuda")
    with pytest.raises(ValueError, match=r"a_scale must be float32 of shape \(64, 2\)"):
        cutefi.gemm_fp8_nt_groupwise(a, b, torch.ones(64, 3, **ones), torch.ones(1, 2, **ones), "K")
    with pytest.raises(ValueError, match=r"b_scale must be float32 of shape \(2, 1\)"):
        cutefi.gemm_fp8_nt_groupwise(a, b, torch.ones(2, 64, **ones), torch.ones(1, 2, **ones), "MN")
    with pytest.raises(TypeError, match="share one FP8 format"):
        cutefi.gemm_fp8_nt_groupwise(a, b.view(torch.float8_e5m2), torch.ones(64, 2, **ones), torch.ones(1, 2, **ones),
                                     "K")
    with pytest.raises(ValueError, match="scale_major_mode"):
        cutefi.gemm_fp8_nt_groupwise(a, b, torch.ones(64, 2, **ones), torch.ones(1, 2, **ones), "N")
    with pytest.raises(ValueError, match="rows must be contiguous"):
        cutefi.gemm_fp8_nt_groupwise(a, b.t().contiguous().t(), torch.ones(64, 2, **ones), torch.ones(1, 2, **ones),
                                     "K")
