"""GPU tier: ``fused_rmsnorm_silu`` (FlashInfer's RMSNorm + SiLU) against a float64 reference.

``out = silu(x * rsqrt(mean(x**2) + eps) * w)`` with ``silu(y) = y / (1 + exp(-y))``, computed
here in float64 from the bf16 inputs and rounded once to the output: bf16, or FP8 e4m3
saturated to +-448 (FlashInfer's FP8 output, no scale). Outputs are poisoned first. Covers the
builds a call can take: aligned and shifted (odd hidden sizes, offset views) class builds, the
latency builds (few rows), the long-row ones (hidden above 32768), 3-D views with uneven row
spacing, in place (``out=input``) and CUDA-graph replay.
"""

import pytest
import torch

import cutefi
from test_gpu_norm_quant import assert_fp8_matches

pytestmark = pytest.mark.gpu

BF16 = torch.bfloat16
E4M3 = torch.float8_e4m3fn


def reference(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    x64 = x.double()
    y = x64 * torch.rsqrt(x64.pow(2).mean(-1, keepdim=True) + eps) * weight.double()
    return y / (1.0 + torch.exp(-y))


def poisoned(shape, dtype):
    out = torch.empty(shape, device="cuda", dtype=dtype)
    if dtype == E4M3:
        out.view(torch.uint8).fill_(0x7F)  # NaN
    else:
        out.fill_(float("nan"))
    return out


def assert_bf16_matches(out: torch.Tensor, ref: torch.Tensor) -> float:
    """Within one bf16 rounding of the float64 value (and 1e-6 absolute for values near zero,
    where the kernel's approximate exp and reciprocal move the last fp32 bits); returns the
    relative L2 error."""
    assert out.dtype == BF16 and not torch.isnan(out).any(), "unwritten (poisoned) or NaN elements"
    err = (out.double() - ref).abs()
    bound = ref.abs() * 2.0 ** -8 * 1.01 + 1e-6
    assert (err <= bound).all(), f"max error {err.max().item():.3e} at {err.argmax().item()}"
    return ((out.double() - ref).norm() / ref.norm()).item()


def inputs(rows: int, hidden: int, seed: int = 0):
    gen = torch.Generator(device="cuda").manual_seed(seed)
    x = (torch.randn(rows, hidden, device="cuda", generator=gen) * 2.0).to(BF16)
    weight = (torch.rand(hidden, device="cuda", generator=gen) * 1.5 + 0.5).to(BF16)
    return x, weight


@pytest.mark.parametrize("hidden", [1, 7, 64, 111, 129, 500, 2048, 4095, 4096, 8192, 16384, 32768, 40000])
@pytest.mark.parametrize("rows", [1, 3, 257, 4096])
def test_bf16_output(rows, hidden):
    if rows * hidden > 2**25:
        pytest.skip("large enough at fewer rows")
    x, weight = inputs(rows, hidden)
    out = poisoned(x.shape, BF16)
    assert cutefi.fused_rmsnorm_silu(x, weight, 1e-6, out=out) is out
    assert_bf16_matches(out, reference(x, weight))
    # the default output: a new bf16 tensor, the same values
    assert torch.equal(cutefi.fused_rmsnorm_silu(x, weight), out)


@pytest.mark.parametrize("hidden", [1, 7, 129, 500, 2048, 4095, 4096, 16384, 32768, 40000])
@pytest.mark.parametrize("rows", [1, 257])
@pytest.mark.parametrize("spread", [1.0, 300.0], ids=["plain", "saturating"])
def test_fp8_output(rows, hidden, spread):
    x, weight = inputs(rows, hidden, seed=1)
    weight = (weight.float() * spread).to(BF16)  # |y| up to ~1000 x spread: a share saturates to 448
    out = poisoned(x.shape, E4M3)
    assert cutefi.fused_rmsnorm_silu(x, weight, out=out) is out
    expected = reference(x, weight).float().clamp(-448.0, 448.0).to(E4M3)
    # (hidden 1: every |y| is about w, the same few values in every row: see test_rmsnorm_quant)
    assert_fp8_matches(out, expected, max_mismatch=1.0 if hidden < 8 else 0.01)
    if spread > 1.0 and hidden > 7:
        assert (out.float() == 448.0).any()


@pytest.mark.parametrize("hidden", [128, 129, 4096])
def test_views_and_in_place(hidden):
    """A slice of a fused q/k buffer ([tokens, heads, head_dim] rows unevenly spaced), a column
    offset (rows off 16-byte boundaries), and out = input."""
    buffer = (torch.randn(33, 6, hidden, device="cuda") * 3).to(BF16)
    weight = (torch.rand(hidden, device="cuda") + 0.5).to(BF16)
    view = buffer[:, :4, :]
    out = poisoned(view.shape, BF16)
    cutefi.fused_rmsnorm_silu(view, weight, out=out)
    assert_bf16_matches(out, reference(view, weight))
    shifted = buffer.view(33 * 6, hidden)[:, 1:]
    out = poisoned(shifted.shape, BF16)
    cutefi.fused_rmsnorm_silu(shifted, weight[1:], out=out)
    assert_bf16_matches(out, reference(shifted, weight[1:]))
    x = buffer.view(33 * 6, hidden).clone()
    expected = reference(x, weight)
    assert cutefi.fused_rmsnorm_silu(x, weight, out=x) is x
    assert_bf16_matches(x, expected)


def test_eps_and_l2_norm_equivalence():
    """FlashInfer's use for an L2 norm: RMSNorm with eps / C is sqrt(C) times it."""
    x, weight = inputs(64, 512, seed=2)
    eps = 1e-6
    l2 = x.double() / torch.sqrt(x.double().pow(2).sum(-1, keepdim=True) + eps) * 512 ** 0.5 * weight.double()
    expected = l2 / (1.0 + torch.exp(-l2))
    out = cutefi.fused_rmsnorm_silu(x, weight, eps / 512)
    assert_bf16_matches(out, expected)


def test_cuda_graph_replay_reads_new_inputs():
    x, weight = inputs(200, 4096, seed=3)
    out = poisoned(x.shape, BF16)
    cutefi.fused_rmsnorm_silu(x, weight, out=out)  # plan and load outside the capture
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        cutefi.fused_rmsnorm_silu(x, weight, out=out)
    fresh, _ = inputs(200, 4096, seed=4)
    x.copy_(fresh)
    out.fill_(float("nan"))
    graph.replay()
    torch.cuda.synchronize()
    assert_bf16_matches(out, reference(fresh, weight))
