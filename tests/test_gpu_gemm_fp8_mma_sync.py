"""GPU tier: FP8 GEMM with per-tensor scales (bmm_fp8, mm_fp8) and block scales
(gemm_fp8_nt_groupwise) on the mma.sync builds, the path of every GPU from sm_89 on other than
Hopper (sm_89 and sm_120a run FP8 mma.sync in hardware; ptxas emulates it on sm_90a and
sm_100a). On a Hopper the builds are forced with ``override`` (its own plan takes wgmma), so
the H200 runs the same kernel source.

Against float32 references of the dequantised inputs (``test_gpu_gemm_fp8``'s and
``test_gpu_gemm_groupwise``'s helpers), fresh random inputs, outputs poisoned (NaN) first,
writes outside ``out`` checked."""

from __future__ import annotations

import contextlib

import pytest
import torch
from test_gpu_gemm_fp8 import (
    FORMATS, MIXED, assert_close, assert_graph_and_side_stream_match, quantised, reference, weight_t,
)
from test_gpu_gemm_groupwise import check, dequantised, random_scaled

import cutefi
from cutefi.gemm import launch
from cutefi.gemm.plan import override

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(
    not torch.cuda.is_available() or torch.cuda.get_device_capability() < (8, 9),
    reason="FP8 mma.sync: sm_89 and newer")]

HOPPER = torch.cuda.is_available() and torch.cuda.get_device_capability() == (9, 0)
CONFIGS = [c.name for c in launch.SM80_FP8_CONFIGS]


def forced(config: str | None):
    """``config`` forced; with None, the plan's own choice (on a Hopper: the 64 x 64 build)."""
    if config is None:
        return override(config=CONFIGS[2]) if HOPPER else contextlib.nullcontext()
    return override(config=config)


@pytest.mark.parametrize("fp8", FORMATS)
@pytest.mark.parametrize("config", CONFIGS)
def test_every_fp8_mma_sync_config(config, fp8):
    """Each build: partial tiles in M, N and K (K's remainder is the first K tile), K of one
    16-byte row, M = 1, strided rows of a and out; nothing written outside out; bf16 and fp16."""
    for m, n, k in [(77, 1160, 1040), (40, 4104, 16), (1, 264, 4096), (300, 136, 528)]:
        a_full, a_scale = quantised((m, k + 32), fp8, m + k)
        a = a_full[:, 16:16 + k]
        b, b_scale = weight_t(None, k, n, fp8, n)
        ref = reference(a, a_scale, b, b_scale)
        for out_dtype in (torch.bfloat16, torch.float16):
            buf = torch.full((m + 2, n + 16), float("nan"), device="cuda", dtype=out_dtype)
            out = buf[1:m + 1, 8:8 + n]
            with forced(config):
                result = cutefi.mm_fp8(a, b, a_scale * b_scale, out_dtype=out_dtype, out=out)
            assert result is out
            assert_close(out, ref, out_dtype)
            outside = torch.ones_like(buf, dtype=torch.bool)
            outside[1:m + 1, 8:8 + n] = False
            assert torch.isnan(buf[outside]).all(), "a write landed outside out"


@pytest.mark.parametrize("fp8", FORMATS)
@pytest.mark.parametrize("batch,m,n,k", [(3, 7, 1000, 1040), (2, 64, 264, 512), (4, 129, 136, 16),
                                         (1, 1000, 1000, 1008)])
def test_bmm_fp8_mma_sync(fp8, batch, m, n, k):
    """bmm_fp8 with both scales, through the plan's choice (forced 64 x 64 on a Hopper)."""
    a, a_scale = quantised((batch, m, k), fp8, m + k)
    b, b_scale = weight_t(batch, k, n, fp8, n)
    out = torch.full((batch, m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
    with forced(None):
        cutefi.bmm_fp8(a, b, a_scale, b_scale, torch.bfloat16, out=out)
    assert_close(out, reference(a, a_scale, b, b_scale), torch.bfloat16)


@pytest.mark.parametrize("config", CONFIGS)
@pytest.mark.parametrize("a_format,b_format", MIXED, ids=["e4m3xe5m2", "e5m2xe4m3"])
def test_mixed_formats_mma_sync(config, a_format, b_format):
    """A and B in different FP8 formats on each mma.sync build (the MMA's .atype/.btype)."""
    for m, n, k in [(77, 1160, 1040), (1, 264, 4096)]:
        a, a_scale = quantised((m, k), a_format, m)
        b, b_scale = weight_t(None, k, n, b_format, n)
        with forced(config):
            out = cutefi.mm_fp8(a, b, a_scale * b_scale)
        assert_close(out, reference(a, a_scale, b, b_scale), torch.bfloat16)


def test_fp8_mma_sync_without_alpha_and_graph_and_side_stream():
    """mm_fp8 without alpha (1.0); captured in a CUDA graph; on a side stream: identical bits."""
    a, a_scale = quantised((48, 2048), torch.float8_e4m3fn, 1)
    b, b_scale = weight_t(None, 2048, 1024, torch.float8_e4m3fn, 2)
    with forced(None):
        plain = cutefi.mm_fp8(a, b)
        assert_close(plain, reference(a, 1.0, b, 1.0), torch.bfloat16)
        alpha = a_scale * b_scale
        eager = cutefi.mm_fp8(a, b, alpha)
        assert_graph_and_side_stream_match(lambda out=None: cutefi.mm_fp8(a, b, alpha, out=out), eager)


BLOCK_SCALED = [c.name for c in launch.SM80_BLOCK_SCALED_CONFIGS]


@pytest.mark.parametrize("fp8", FORMATS)
@pytest.mark.parametrize("config", BLOCK_SCALED)
def test_groupwise_mma_sync(config, fp8):
    """gemm_fp8_nt_groupwise on the block-scaled mma.sync builds: 1 x 128 and 128 x 128
    activation scales, every scale layout FlashInfer names, M, N and K off the 128 blocks (the
    last K tile ends past K: zero-filled), M = 1; bf16 and fp16 out, writes outside out checked."""
    for m, n, k, rows in [(7, 264, 1040, 1), (300, 1000, 1008, 1), (1, 128, 128, 1), (129, 136, 16, 1),
                          (200, 384, 640, 128), (1000, 2112, 2048, 1)]:
        a, a_scale = random_scaled(m, k, fp8, rows, m + k)
        b, b_scale = random_scaled(n, k, fp8, 128, n)
        ref = dequantised(a, a_scale, rows) @ dequantised(b, b_scale, 128).t()
        for mode, sa, sb in (("K", a_scale, b_scale), ("MN", a_scale.t().contiguous(), b_scale.t().contiguous()),
                             (None, a_scale, b_scale.t())):
            for out_dtype in (torch.bfloat16, torch.float16):
                buf = torch.full((m + 2, n + 16), float("nan"), device="cuda", dtype=out_dtype)
                out = buf[1:m + 1, 8:8 + n]
                with forced(config):
                    cutefi.gemm_fp8_nt_groupwise(a, b, sa, sb, scale_major_mode=mode,
                                                 scale_granularity_mnk=(rows, 128, 128), out=out)
                check(out, ref)
                outside = torch.ones_like(buf, dtype=torch.bool)
                outside[1:m + 1, 8:8 + n] = False
                assert torch.isnan(buf[outside]).all(), "a write landed outside out"


def test_groupwise_mma_sync_default_plan_graph_and_side_stream():
    """The plan's own block-scaled choice (forced to the mma.sync builds on a Hopper), in a CUDA
    graph and on a side stream."""
    a, a_scale = random_scaled(512, 2048, torch.float8_e4m3fn, 1, 1)
    b, b_scale = random_scaled(1024, 2048, torch.float8_e4m3fn, 128, 2)
    with forced(BLOCK_SCALED[1] if HOPPER else None):
        eager = cutefi.gemm_fp8_nt_groupwise(a, b, a_scale, b_scale, "K")
        check(eager, dequantised(a, a_scale, 1) @ dequantised(b, b_scale, 128).t())
        assert_graph_and_side_stream_match(
            lambda out=None: cutefi.gemm_fp8_nt_groupwise(a, b, a_scale, b_scale, "K", out=out), eager)
