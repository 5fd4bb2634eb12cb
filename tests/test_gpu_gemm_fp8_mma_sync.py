"""GPU tier: FP8 GEMM with per-tensor scales (bmm_fp8, mm_fp8) on the mma.sync builds, the
path of every GPU from sm_89 on other than Hopper (sm_89 and sm_120a run FP8 mma.sync in
hardware; ptxas emulates it on sm_90a and sm_100a). On a Hopper the builds are forced with
``override`` (its own plan takes wgmma), so the H200 runs the same kernel source.

Against the float32 reference of the dequantised inputs (``test_gpu_gemm_fp8``'s helpers),
fresh random inputs, outputs poisoned (NaN) first, writes outside ``out`` checked."""

from __future__ import annotations

import contextlib

import pytest
import torch
from test_gpu_gemm_fp8 import FORMATS, assert_close, assert_graph_and_side_stream_match, quantised, reference, weight_t

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
