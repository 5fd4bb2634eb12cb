"""CPU tier: LayerNorm's gamma and beta in 16 bits (FlashInfer's CuTe LayerNorm takes them), past a
stubbed device check: the call runs once, on fp32 copies holding the same values (read back from
the pointers the launch gets); fp32 ones go to the kernel as they are, with no copy."""

from __future__ import annotations

import ctypes
from types import SimpleNamespace

import pytest
import torch

import cutefi
from cutefi._plans import PlanCache
from cutefi.norm import api, plan

BF16, FP16, FP32 = torch.bfloat16, torch.float16, torch.float32


class _Recorder:
    def __init__(self, hidden: int):
        self.hidden = hidden
        self.calls = []

    def launch(self, grid, device, stream, pdl, **params):
        # the fp32 copies live for the call only: read them now
        read = (ctypes.c_float * self.hidden).from_address
        self.calls.append((params, list(read(params["weight"])), list(read(params["bias"]))))


@pytest.fixture
def recorder(monkeypatch):
    kernel = _Recorder(256)
    monkeypatch.setattr(plan, "require_cuda", lambda name, tensor: 0)
    monkeypatch.setattr(plan, "require_same_device", lambda *named: None)
    monkeypatch.setattr(plan, "get_kernel", lambda spec, device: kernel)
    monkeypatch.setattr(plan, "device_info", lambda device: SimpleNamespace(sms=132))
    monkeypatch.setattr(api, "_PLANS", PlanCache())
    return kernel


@pytest.mark.parametrize("gamma_dtype, beta_dtype", [(BF16, BF16), (FP16, FP16), (BF16, FP32), (FP32, FP16)])
def test_16bit_params_run_on_fp32_copies(recorder, gamma_dtype, beta_dtype):
    x = torch.randn(4, 256).to(BF16)
    gamma, beta = torch.randn(256).to(gamma_dtype), torch.randn(256).to(beta_dtype)
    cutefi.layernorm(x, gamma, beta)
    (params, weights, biases), = recorder.calls
    assert params["x"] == x.data_ptr() and params["M"] == 4 and params["N"] == 256
    assert weights == gamma.float().tolist() and biases == beta.float().tolist()
    # an fp32 one is passed as it is
    assert (params["weight"] == gamma.data_ptr()) == (gamma_dtype == FP32)
    assert (params["bias"] == beta.data_ptr()) == (beta_dtype == FP32)


def test_fp32_params_take_no_copy(recorder):
    x, gamma, beta = torch.randn(4, 256).to(BF16), torch.randn(256), torch.randn(256)
    for _ in range(2):  # (the second call from the kept plan)
        cutefi.layernorm(x, gamma, beta)
    assert [(p["weight"], p["bias"]) for p, _, _ in recorder.calls] == [(gamma.data_ptr(), beta.data_ptr())] * 2


def test_the_plan_says_when_params_are_widened(recorder):
    x, out = torch.randn(4, 256).to(BF16), torch.empty(4, 256, dtype=BF16)
    for dtype, widened in ((BF16, True), (FP16, True), (FP32, False)):
        chosen = plan.check_and_plan("layer", x, torch.ones(256, dtype=dtype), torch.zeros(256), out, None, False,
                                     "gamma", False, plan.POINTERS_ALIGNED)
        assert chosen.widen_params == widened and (chosen.kernel is None) == widened
    # RMSNorm's weight still has the input dtype only
    with pytest.raises(TypeError, match="^weight dtype must be bfloat16; got float32"):
        plan.check_and_plan("rms", x, torch.ones(256), None, out, None, False, "weight", False,
                            plan.POINTERS_ALIGNED)


def test_no_rows_no_copy(recorder):
    cutefi.layernorm(torch.empty(0, 256, dtype=BF16), torch.ones(256, dtype=BF16), torch.zeros(256, dtype=BF16))
    assert recorder.calls == []
