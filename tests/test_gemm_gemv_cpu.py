"""GEMV builds (``gemm/gemv_kernel.py``): which problems the plan gives them, the override, the
contract, and (with CuTe DSL) the SASS: cp.async into shared memory, no local memory."""

from __future__ import annotations

import re

import pytest

from cutefi.gemm import gemv_launch, plan
from cutefi.gemm.plan import GemvConfig, GemvPlan, launch_plan, override, parse_config

from conftest import requires_dsl

H200_SMS = 132
H200_L2 = 50 * 1024 * 1024


def _plan(m: int, n: int, k: int, batch: int = 1, k_major: bool = True, wgmma: bool = True, k_tile: int = 64):
    return launch_plan(m, n, k, batch, H200_SMS, k_major, wgmma=wgmma, k_tile=k_tile, l2_bytes=H200_L2)


@pytest.mark.parametrize("m, n, k", [(1, 4096, 14336), (1, 14336, 4096), (1, 8192, 8192), (1, 28672, 8192),
                                     (1, 1024, 8192), (1, 2048, 4096), (1, 128256, 4096), (2, 4096, 14336),
                                     (2, 8192, 28672), (2, 1024, 8192), (2, 2048, 4096)])
def test_hopper_takes_gemv_where_it_measured_faster(m, n, k):
    """One token on every weight but the L2-held one the decode-sized kernel fills the SMs
    with; two where K is 8192 or more or the weight is 16 MB or less (plan.gemv_pays)."""
    got = _plan(m, n, k)
    assert isinstance(got, GemvPlan) and got.config.tokens == m
    assert got.blocks == -(-n // gemv_launch.GEMV_ROWS)


def test_gemv_keeps_off_where_it_measured_slower():
    assert not isinstance(_plan(1, 4096, 4096), GemvPlan)  # the decode-sized kernel, from the L2
    assert not isinstance(_plan(2, 14336, 4096), GemvPlan)  # two tokens, K 4096, a big weight
    assert not isinstance(_plan(2, 6144, 4096), GemvPlan)
    # an L2 too small for the weight: the 4096 x 4096 exception goes too
    assert isinstance(launch_plan(1, 4096, 4096, 1, H200_SMS, True, l2_bytes=16 << 20), GemvPlan)


def test_gemv_only_where_it_fits():
    """More tokens than the rule's, a batch, an N-major weight, FP8, or another GPU: not GEMV."""
    assert not isinstance(_plan(plan.GEMV_MAX_M + 1, 8192, 8192), GemvPlan)
    assert not isinstance(_plan(1, 8192, 8192, batch=2), GemvPlan)
    assert not isinstance(_plan(1, 8192, 8192, k_major=False), GemvPlan)
    assert not isinstance(_plan(1, 8192, 8192, k_tile=128), GemvPlan)
    assert not isinstance(_plan(1, 8192, 8192, wgmma=False), GemvPlan)


def test_gemv_switch_and_override():
    old = plan.GEMV
    plan.GEMV = False
    try:
        assert not isinstance(_plan(1, 8192, 8192), GemvPlan)
    finally:
        plan.GEMV = old
    assert parse_config("v4") == GemvConfig(4) and parse_config("V2").name == "v2"
    with override(config="v4"):  # forced: any GPU, up to its tokens
        forced = _plan(3, 8192, 8192, wgmma=False)
        assert isinstance(forced, GemvPlan) and forced.config.tokens == 4
        with pytest.raises(ValueError, match="M <= 4"):
            _plan(5, 8192, 8192)
        with pytest.raises(ValueError, match="K-major"):
            _plan(1, 8192, 8192, k_major=False)
        with pytest.raises(ValueError, match="16-bit"):
            _plan(1, 8192, 8192, k_tile=128)
    with pytest.raises(ValueError, match="GEMV builds take"):
        GemvConfig(3)


def test_contract():
    for tokens in gemv_launch.GEMV_TOKENS:
        contract = gemv_launch.gemv_contract("bf16", "fp16", tokens)
        assert contract.smem_bytes == gemv_launch.GEMV_STAGES * (gemv_launch.GEMV_ROWS + tokens) * 128 * 16
        assert contract.smem_bytes * contract.min_ctas_per_sm <= 227 * 1024
        assert contract.grid({"n": 4097}) == (-(-4097 // gemv_launch.GEMV_ROWS), 1, 1)
    with pytest.raises(ValueError, match="unsupported GEMV build"):
        gemv_launch.gemv_contract("bf16", "bf16", 3)


@requires_dsl
@pytest.mark.parametrize("tokens", gemv_launch.GEMV_TOKENS)
@pytest.mark.parametrize("sm", ["9.0", "8.0", "12.0a"])
def test_sass_streams_through_shared_memory(tokens, sm):
    from cutefi.jit.compile import build
    from cutefi.jit.sass import disassemble
    from cutefi.jit.targets import Target

    sass = disassemble(build(gemv_launch.GEMV_SPECS[("bf16", "bf16", tokens)], Target.parse(sm)).cubin)
    assert re.search(r"\bLDGSTS\.E\.BYPASS\.128\b", sass)  # cp.async.cg, 16 bytes
    assert re.search(r"\bLDS\.128\b", sass)
    assert not re.search(r"\b(LDL|STL)\b", sass)
