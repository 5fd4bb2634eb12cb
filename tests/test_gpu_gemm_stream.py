"""GPU tier: swapped GEMM builds streaming a weight (``plan.stream_weight``): the weight's L2
cache policy and the K rotation of its tiles, forced on every such build and shape edge, and
the default plan past the L2, against a float32 reference written here (outputs poisoned)."""

from __future__ import annotations

import pytest
import torch

import cutefi
from cutefi.gemm import launch, plan
from cutefi.gemm.plan import K_ROTATION, launch_plan, override

from test_gpu_gemm import assert_gemm, poisoned, reference, weight_t

pytestmark = pytest.mark.gpu

STREAMING = [c.name for c in launch.CONFIGS if launch.streams_weight(c, False, False)]


@pytest.fixture(autouse=True)
def _no_gemv(monkeypatch):
    """One or two tokens go to the GEMV builds on Hopper (``plan.takes_gemv``); these tests
    are about the swapped builds' rule, which still serves them with the GEMV builds off."""
    monkeypatch.setattr(plan, "GEMV", False)


@pytest.mark.parametrize("config", STREAMING)
@pytest.mark.parametrize("rotation", [K_ROTATION, 5])
def test_every_streaming_build_rotated_and_evict_first(config, rotation):
    """Rotated K steps wrap around a partial last K tile, split-K (workspace or cluster) sums
    rotated halves, the weight multicast keeps both CTAs on the same steps; nothing written
    outside out."""
    for m, n, k in [(17, 1000, 1032), (1, 8, 8), (64, 4104, 4096), (33, 8192, 1024)]:
        torch.manual_seed(m + n + rotation)
        a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        b = weight_t(k, n, torch.bfloat16)
        bias = torch.randn(n, device="cuda", dtype=torch.bfloat16)
        with override(config=config, weight_policy=launch.EVICT_FIRST, k_rotation=rotation):
            out_buf = poisoned((m + 2, n + 16), torch.bfloat16)
            out = out_buf[1:m + 1, 8:8 + n]
            cutefi.mm_bf16(a, b, bias=bias, out=out)
        assert_gemm(out, reference(a, b, bias), torch.bfloat16, torch.bfloat16)
        outside = torch.ones_like(out_buf, dtype=torch.bool)
        outside[1:m + 1, 8:8 + n] = False
        assert torch.isnan(out_buf[outside]).all(), "a write landed outside out"


@pytest.mark.parametrize("m,n,k,rotated", [(1, 14336, 4096, True), (64, 8192, 8192, True),
                                           (16, 28672, 8192, False)])
def test_default_plan_past_the_l2(m, n, k, rotated):
    """A weight larger than the L2 (117-470 MB): evict-first, rotated where the tiles take one
    wave; the result matches the reference."""
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    if n * k * 2 <= l2:
        pytest.skip(f"the weight fits this GPU's {l2 >> 20} MiB L2")
    plan = launch_plan(m, n, k, 1, torch.cuda.get_device_properties(0).multi_processor_count, True, l2_bytes=l2)
    if not plan.config.swap:
        pytest.skip(f"this GPU's plan for {m} x {n} x {k} is not a swapped build")
    assert plan.weight_policy == launch.EVICT_FIRST and (plan.k_rotation == K_ROTATION) == rotated
    torch.manual_seed(m)
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    b = weight_t(k, n, torch.bfloat16)
    out = poisoned((m, n), torch.bfloat16)
    cutefi.mm_bf16(a, b, out=out)
    assert_gemm(out, reference(a, b), torch.bfloat16, torch.bfloat16)


@pytest.mark.parametrize("config", [c.name for c in launch.FP8_CONFIGS if launch.streams_weight(c, False, False)])
def test_fp8_streaming_builds(config):
    """bmm_fp8's swapped builds with the policy and a rotation forced, per-tensor scales."""
    torch.manual_seed(7)
    m, n, k = 33, 1000, 1040
    a = (torch.randn(m, k, device="cuda") * 0.5).to(torch.float8_e4m3fn)
    w = (torch.randn(n, k, device="cuda") * 0.5).to(torch.float8_e4m3fn)
    scale_a = torch.tensor(0.5, device="cuda")
    scale_b = torch.tensor(2.0, device="cuda")
    with override(config=config, weight_policy=launch.EVICT_FIRST, k_rotation=K_ROTATION):
        out = cutefi.bmm_fp8(a.unsqueeze(0), w.t().unsqueeze(0), scale_a, scale_b, torch.bfloat16)[0]
    ref = a.float() @ w.float().t()
    rel = ((out.float() - ref).norm() / ref.norm()).item()
    assert rel < 6e-3, f"relative error {rel:.2e}"


@pytest.mark.parametrize("m", [9, 16])
def test_9_16_tokens_on_a_long_k(m):
    """9-16 tokens, K past 8192, on 4096 weight rows: the swapped 64 x 32 build in cluster
    pairs (not the decode-sized kernel) on 132 SMs; the result matches the reference."""
    torch.manual_seed(m)
    n, k = 4096, 10240
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    plan = launch_plan(m, n, k, 1, sms, True, l2_bytes=torch.cuda.get_device_properties(0).L2_cache_size)
    if sms == 132:
        assert plan.config == launch.Sm90Config(64, 32, 1, True, 2)
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    b = weight_t(k, n, torch.bfloat16)
    bias = torch.randn(n, device="cuda", dtype=torch.bfloat16)
    out = poisoned((m, n), torch.bfloat16)
    cutefi.mm_bf16(a, b, bias=bias, out=out)
    assert_gemm(out, reference(a, b, bias), torch.bfloat16, torch.bfloat16)
