"""Swapped GEMM builds streaming a weight larger than the L2: the plan's cache policy and K
rotation (``plan.stream_weight``), the contract's launch parameters, and the hint in the PTX."""

from __future__ import annotations

import re

import pytest

from cutefi.gemm import launch, plan
from cutefi.gemm.launch import EVICT_FIRST, EVICT_NORMAL, Sm90Config
from cutefi.gemm.plan import K_ROTATION, SkinnyPlan, launch_plan, override, takes_skinny

from conftest import requires_dsl

H200_SMS = 132
H200_L2 = 50 * 1024 * 1024


@pytest.fixture(autouse=True)
def _no_gemv(monkeypatch):
    """One or two tokens go to the GEMV builds on Hopper (``plan.takes_gemv``); these tests
    are about the swapped builds' rule, which still serves them with the GEMV builds off."""
    monkeypatch.setattr(plan, "GEMV", False)


def _stream(m: int, n: int, k: int, l2: int = H200_L2, k_tile: int = 64):
    plan = launch_plan(m, n, k, 1, H200_SMS, True, k_tile=k_tile, l2_bytes=l2)
    return plan.config, plan.weight_policy, plan.k_rotation


def test_weight_past_the_l2_streams_evict_first_and_rotated():
    """A weight larger than the L2 in one wave of swapped tiles: evict-first, rotated K."""
    for m, n, k in ((1, 14336, 4096), (1, 4096, 14336), (16, 8192, 8192), (64, 8192, 8192), (64, 14336, 4096)):
        config, policy, rotation = _stream(m, n, k)
        assert config.swap and (policy, rotation) == (EVICT_FIRST, K_ROTATION), (m, n, k)
    # FP8 (bmm_fp8): a byte an element, so 14336 x 4096 streams and 8192 x 4096 does not
    assert _stream(64, 14336, 4096, k_tile=128)[1:] == (EVICT_FIRST, K_ROTATION)
    assert _stream(64, 8192, 4096, k_tile=128)[1:] == (EVICT_NORMAL, 0)


def test_more_than_a_wave_keeps_the_lockstep():
    """224 tiles on 132 SMs: the second round runs out of step anyway (rotated: 1% slower)."""
    config, policy, rotation = _stream(1, 28672, 8192)
    assert config == Sm90Config(128, 16, 1, True) and (policy, rotation) == (EVICT_FIRST, 0)


def test_weight_in_the_l2_keeps_the_defaults():
    """A weight the L2 holds (warm, the CTAs share the tokens' lines in lockstep), an unknown
    L2, and the builds that do not stream a weight keep the default policy and no rotation."""
    assert _stream(64, 4096, 4096)[1:] == (EVICT_NORMAL, 0)
    assert _stream(1, 14336, 4096, l2=0)[1:] == (EVICT_NORMAL, 0)
    config, policy, rotation = _stream(4096, 14336, 4096)
    assert not config.swap and (policy, rotation) == (EVICT_NORMAL, 0)
    assert isinstance(launch_plan(1, 4096, 4096, 1, H200_SMS, True, l2_bytes=H200_L2), SkinnyPlan)


def test_override_sets_policy_and_rotation():
    with override(weight_policy=EVICT_NORMAL, k_rotation=0):
        assert _stream(1, 14336, 4096)[1:] == (EVICT_NORMAL, 0)
    with override(weight_policy=EVICT_FIRST, k_rotation=5):
        assert _stream(64, 4096, 4096)[1:] == (EVICT_FIRST, 5)
    assert _stream(1, 14336, 4096)[1:] == (EVICT_FIRST, K_ROTATION)


def _params(spec) -> list[str]:
    return [param.name for param in launch.sm90_contract(**dict(spec.options)).params]


def test_only_streaming_builds_take_the_launch_parameters():
    streaming = launch.SM90_SPECS[("bf16", "bf16", "k", Sm90Config(128, 16, 1, True))]
    assert _params(streaming)[-2:] == ["weight_policy", "k_rotation"]
    fp8 = launch.SM90_SPECS[("fp8e4m3", "bf16", "k", Sm90Config(128, 32, 1, True, 1, 2))]
    assert _params(fp8)[-2:] == ["weight_policy", "k_rotation"]
    for spec in (launch.SM90_SPECS[("bf16", "bf16", "k", Sm90Config(128, 256, 2))],
                 launch.BLOCK_SCALED_SPECS[("fp8e4m3", "bf16", Sm90Config(128, 32, 1, True))],
                 launch.GROUPED_SPECS[("fp8e4m3", "bf16", "k", Sm90Config(128, 32, 1, True))]):
        assert "weight_policy" not in _params(spec) and "k_rotation" not in _params(spec)


@requires_dsl
@pytest.mark.parametrize("config, streams", [(Sm90Config(128, 16, 1, True, 2), True), (Sm90Config(128, 128, 1), False)])
def test_weight_loads_take_the_launch_policy(config, streams):
    """The streaming build's weight TMA loads take the policy from the launch; every other
    load keeps the DSL's default (a zero policy register)."""
    from cutefi.jit.compile import build
    from cutefi.jit.targets import Target

    ptx = build(launch.SM90_SPECS[("bf16", "bf16", "k", config)], Target.parse("9.0a")).ptx
    loads = re.findall(r"cp\.async\.bulk\.tensor\.\S+shared::cta\.global\S+ .*, (%rd\d+);", ptx)
    sources = [re.search(rf"(ld\.param\.b64|mov\.b64)\s+{register}, ([^;]+);", ptx).group(1) for register in loads]
    # (the producer's loop is unrolled: a weight load and a token load in each copy of a step)
    assert len(sources) % 2 == 0 and len(sources) >= 2
    assert sorted(set(sources)) == (["ld.param.b64", "mov.b64"] if streams else ["mov.b64"])
    assert sources.count("ld.param.b64") == (len(sources) // 2 if streams else 0)


def test_9_16_tokens_on_a_long_k_take_64row_tiles():
    """9-16 tokens, K past 8192, 64-row tile pairs filling 0.9 of the SMs: the 64 x 32 swapped
    build in cluster pairs, not the decode-sized kernel (which keeps the rest)."""
    for m, n, k in ((16, 4096, 14336), (9, 4096, 14336), (12, 3840, 10240), (16, 4096, 28672)):
        plan = launch_plan(m, n, k, 1, H200_SMS, True, l2_bytes=H200_L2)
        assert plan.config == Sm90Config(64, 32, 1, True, 2) and plan.splits == 2, (m, n, k)
    for m, n, k in ((16, 3584, 14336), (16, 4096, 8192), (16, 2048, 14336), (16, 4096, 4096)):
        assert isinstance(launch_plan(m, n, k, 1, H200_SMS, True, l2_bytes=H200_L2), SkinnyPlan), (m, n, k)
    assert takes_skinny(16, 4096, 1, True, True, 14336) and not takes_skinny(16, 4096, 1, True, True, 14336, H200_SMS)
    # up to 8 tokens on a long K keep the 16-token tiles (at 1 token the 32-token tile's zero rows cost)
    assert launch_plan(8, 4096, 14336, 1, H200_SMS, True).config == Sm90Config(128, 16, 1, True, 2)
