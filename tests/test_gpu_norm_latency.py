"""GPU tier: the latency builds (``tuning.LATENCY_BUILDS``: a wider row split for calls of few
rows) against a float32 reference, on both sides of each build's row limit, where the call
switches between the latency build and its class's own."""

import pytest
import torch
import torch.nn.functional as F

import cutefi
from cutefi.norm import launch, tuning
from cutefi.norm.plan import POINTERS_ALIGNED, check_and_plan
from test_gpu_norm_quant import assert_fp8_matches, poisoned, quantise
from test_gpu_rmsnorm import assert_close, reference

pytestmark = pytest.mark.gpu

DTYPES = {torch.bfloat16: "bf16", torch.float16: "fp16"}


def _cases():
    for table, widths in ((tuning.LATENCY_BUILDS, (0, 8 * 37)), (tuning.LATENCY_SHIFTED_BUILDS, (1, 8 * 37 + 3))):
        for (kind, fused, quant), classes in table.items():
            for n_class, (*_, most_rows) in classes.items():
                for rows in (1, 7, most_rows, most_rows + 1):
                    # the class's width and a narrower row (aligned, or shifted: rows that start
                    # at every offset in their 16-byte chunk)
                    for hidden in (n_class - widths[0], n_class - widths[1]):
                        yield pytest.param(kind, fused, quant, n_class, rows, hidden,
                                           id=f"{kind}{'_add' if fused else ''}{'_quant' if quant else ''}"
                                              f"-N{hidden}-M{rows}")


def _entry(kind, x, weight, bias, out, gemma, quant, residual=None):
    plan = check_and_plan(kind, x, weight, bias, out, residual, gemma, "weight", quant, POINTERS_ALIGNED)
    return plan.kernel.contract.entry


@pytest.mark.parametrize("kind, fused, quant, n_class, rows, hidden", list(_cases()))
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPES.values())
def test_latency_build_matches_reference(kind, fused, quant, n_class, rows, hidden, dtype):
    latency = rows <= launch.latency_rows(kind, fused, quant, n_class, hidden % 8 == 0)
    x = torch.randn(rows, hidden, device="cuda", dtype=dtype) * 2 + 0.5
    if fused:  # FlashInfer's numerics: residual = round(x + residual), x = rmsnorm of the fp32 sum
        residual = torch.randn(rows, hidden, device="cuda", dtype=dtype)
        weight = (torch.rand(hidden, device="cuda") + 0.5).to(dtype)
        total = x.float() + residual.float()
        assert _entry(kind, x, weight, None, x, False, False, residual).endswith("_lat") == latency
        cutefi.fused_add_rmsnorm(x, residual, weight, eps=1e-6)
        torch.testing.assert_close(residual, total.to(dtype), rtol=0, atol=0)
        assert_close(x, reference(total, weight, 1e-6), dtype)
        return
    if kind == "layer":
        for param_dtype in (torch.float32, dtype):  # (16-bit gamma and beta: the params16 builds)
            gamma = torch.randn(hidden, device="cuda").to(param_dtype)
            beta = torch.randn(hidden, device="cuda").to(param_dtype)
            entry = _entry(kind, x, gamma, beta, torch.empty_like(x), False, False)
            assert entry.removesuffix("_p16").endswith("_lat") == latency
            out = cutefi.layernorm(x, gamma, beta, eps=1e-6)  # FlashInfer's layernorm has no out=
            assert_close(out, F.layer_norm(x.float(), (hidden,), gamma.float(), beta.float(), 1e-6), dtype)
        return
    weight = (torch.rand(hidden, device="cuda") + 0.5).to(dtype)
    if quant:
        for fp8 in (torch.float8_e4m3fn, torch.float8_e5m2):
            out = poisoned(x.shape, fp8)
            assert _entry(kind, x, weight, None, out, False, True).endswith("_lat") == latency
            cutefi.rmsnorm_quant(out, x, weight, 0.05, eps=1e-6)
            assert_fp8_matches(out, quantise(reference(x, weight, 1e-6), 0.05, fp8))
        return
    for gemma in (False, True):
        out = torch.empty_like(x)
        cutefi.poison_(out)
        assert _entry(kind, x, weight, None, out, gemma, False).endswith("_lat") == latency
        (cutefi.gemma_rmsnorm if gemma else cutefi.rmsnorm)(x, weight, eps=1e-6, out=out)
        assert_close(out, reference(x, weight, 1e-6, gemma), dtype)
