"""GPU tier: the GEMV builds (``gemm/gemv_kernel.py``) forced and by the default plan, against
a float32 reference written in ``test_gpu_gemm`` (outputs poisoned; nothing written outside
``out``): 1-4 tokens, one to hundreds of CTAs, K not a multiple of a step (and shorter than one),
bias, fp16 and bf16 outputs, strided tokens and weight rows."""

from __future__ import annotations

import pytest
import torch

import cutefi
from cutefi.gemm import gemv_launch, plan
from cutefi.gemm.plan import GemvPlan, launch_plan, override

from test_gpu_gemm import _graph_side_stream_pdl, assert_gemm, poisoned, reference, weight_t

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("tokens", gemv_launch.GEMV_TOKENS)
@pytest.mark.parametrize("m,n,k", [(1, 8, 8), (1, 4104, 1000), (2, 1000, 4104), (3, 88, 3000), (4, 8192, 1024),
                                   (1, 24, 16), (2, 16, 9000)])
@pytest.mark.parametrize("dtype,out_dtype", [(torch.bfloat16, torch.bfloat16), (torch.float16, torch.float16),
                                             (torch.bfloat16, torch.float16)])
def test_gemv_forced(tokens, m, n, k, dtype, out_dtype):
    if m > tokens:
        pytest.skip("a build takes at most its tokens")
    torch.manual_seed(m * 7 + n + k + tokens)
    a = torch.randn(m, k, device="cuda", dtype=dtype)
    b = weight_t(k, n, dtype)
    bias = torch.randn(n, device="cuda", dtype=dtype)
    mm = cutefi.mm_bf16 if dtype == torch.bfloat16 else cutefi.mm_fp16
    for with_bias in (None, bias):
        out_buf = poisoned((m + 2, n + 16), out_dtype)
        out = out_buf[1:m + 1, 8:8 + n]
        with override(config=f"v{tokens}"):
            mm(a, b, bias=with_bias, out=out, out_dtype=out_dtype)
        assert_gemm(out, reference(a, b, with_bias), dtype, out_dtype)
        outside = torch.ones_like(out_buf, dtype=torch.bool)
        outside[1:m + 1, 8:8 + n] = False
        assert torch.isnan(out_buf[outside]).all(), "a write landed outside out"


def test_gemv_strided_tokens_and_weight_rows():
    """Token rows and weight rows further apart than K (views of wider buffers)."""
    torch.manual_seed(5)
    k, n = 2056, 304
    a = torch.randn(2, k + 24, device="cuda", dtype=torch.bfloat16)[:, :k]
    w = torch.randn(n, k + 40, device="cuda", dtype=torch.bfloat16)[:, :k]
    with override(config="v2"):
        out = cutefi.mm_bf16(a, w.t())
    assert_gemm(out, reference(a, w.t(), None), torch.bfloat16, torch.bfloat16)


@pytest.mark.parametrize("m,n,k", [(1, 14336, 4096), (2, 4096, 14336), (1, 1024, 8192)])
def test_default_plan_takes_gemv(m, n, k):
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    if torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("the plan takes the GEMV builds on Hopper")
    assert isinstance(launch_plan(m, n, k, 1, sms, True), GemvPlan) == (plan.GEMV and m <= plan.GEMV_MAX_M)
    torch.manual_seed(m + n)
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    b = weight_t(k, n, torch.bfloat16)
    out = poisoned((m, n), torch.bfloat16)
    cutefi.mm_bf16(a, b, out=out)
    assert_gemm(out, reference(a, b, None), torch.bfloat16, torch.bfloat16)


def test_gemv_graph_side_stream_pdl():
    """The GEMV build replayed from a CUDA graph, on a side stream and with PDL: all equal to
    the plain call."""
    torch.manual_seed(23)
    a = torch.randn(2, 8192, device="cuda", dtype=torch.bfloat16)
    b = weight_t(8192, 3000, torch.bfloat16)
    with override(config="v2"):
        _graph_side_stream_pdl(a, b, split_k=False)
