"""CPU tier: LayerNorm's gamma and beta in 16 bits (FlashInfer's CuTe LayerNorm takes them), past a
stubbed device check: both in the input's dtype go as they are to a 16-bit-parameter build; other
mixes (and 16-bit ones on the long-row builds) run once, on fp32 copies holding the same values
(read back from the pointers the launch gets); fp32 ones go to the kernel as they are, no copy."""

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
    """Launches, with the parameter values read back as the build's parameter dtype."""

    def __init__(self, hidden: int):
        self.hidden = hidden
        self.calls = []
        self.specs = []

    def kernel(self, spec, device):
        self.specs.append(spec)
        return self

    def launch(self, grid, device, stream, pdl, **params):
        # (the fp32 copies live for the call only: read them now)
        options = self.specs[-1].option_dict
        if options.get("params16"):  # (16-bit: the bits as int16, viewed as the build's dtype)
            read = (ctypes.c_int16 * self.hidden).from_address
            dtype = BF16 if options["dtype_name"] == "bf16" else FP16
            values = [torch.tensor(list(read(params[name])), dtype=torch.int16).view(dtype).float().tolist()
                      for name in ("weight", "bias")]
        else:
            read = (ctypes.c_float * self.hidden).from_address
            values = [list(read(params[name])) for name in ("weight", "bias")]
        self.calls.append((params, *values))


@pytest.fixture
def recorder(monkeypatch):
    kernel = _Recorder(256)
    monkeypatch.setattr(plan, "require_cuda", lambda name, tensor: 0)
    monkeypatch.setattr(plan, "require_same_device", lambda *named: None)
    monkeypatch.setattr(plan, "get_kernel", kernel.kernel)
    monkeypatch.setattr(plan, "device_info", lambda device: SimpleNamespace(sms=132))
    monkeypatch.setattr(api, "_PLANS", PlanCache())
    return kernel


@pytest.mark.parametrize("x_dtype, gamma_dtype, beta_dtype", [
    (BF16, BF16, BF16), (FP16, FP16, FP16), (BF16, FP16, FP16), (BF16, BF16, FP32), (BF16, FP32, FP16)])
def test_16bit_params(recorder, x_dtype, gamma_dtype, beta_dtype):
    """Both in the input's dtype: passed as they are, to a build that reads them so; else fp32
    copies of the same values."""
    x = torch.randn(4, 256).to(x_dtype)
    gamma, beta = torch.randn(256).to(gamma_dtype), torch.randn(256).to(beta_dtype)
    cutefi.layernorm(x, gamma, beta)
    (params, weights, biases), = recorder.calls
    assert params["x"] == x.data_ptr() and params["M"] == 4 and params["N"] == 256
    assert weights == gamma.float().tolist() and biases == beta.float().tolist()
    native = gamma_dtype == beta_dtype == x_dtype
    assert bool(recorder.specs[-1].option_dict.get("params16")) == native
    assert recorder.specs[-1].name == ("norm.layernorm_params16" if native else "norm.layernorm")
    # as they are where native, or fp32 already; else a copy
    assert (params["weight"] == gamma.data_ptr()) == (native or gamma_dtype == FP32)
    assert (params["bias"] == beta.data_ptr()) == (native or beta_dtype == FP32)


def test_fp32_params_take_no_copy(recorder):
    x, gamma, beta = torch.randn(4, 256).to(BF16), torch.randn(256), torch.randn(256)
    for _ in range(2):  # (the second call from the kept plan)
        cutefi.layernorm(x, gamma, beta)
    assert [(p["weight"], p["bias"]) for p, _, _ in recorder.calls] == [(gamma.data_ptr(), beta.data_ptr())] * 2


def test_the_plan_says_when_params_are_widened(recorder):
    x, out = torch.randn(4, 256).to(BF16), torch.empty(4, 256, dtype=BF16)
    for gamma_dtype, beta_dtype, widened in ((BF16, FP32, True), (FP16, FP16, True), (FP32, FP32, False),
                                             (BF16, BF16, False)):
        chosen = plan.check_and_plan("layer", x, torch.ones(256, dtype=gamma_dtype), torch.zeros(256, dtype=beta_dtype),
                                     out, None, False, "gamma", False, plan.POINTERS_ALIGNED)
        assert chosen.widen_params == widened and (chosen.kernel is None) == widened
    # 16-bit ones on the long-row builds (hidden > 32768): widened
    wide = torch.randn(2, 40000).to(BF16)
    chosen = plan.check_and_plan("layer", wide, torch.ones(40000, dtype=BF16), torch.zeros(40000, dtype=BF16),
                                 torch.empty_like(wide), None, False, "gamma", False, plan.POINTERS_ALIGNED)
    assert chosen.widen_params
    # RMSNorm's weight still has the input dtype only
    with pytest.raises(TypeError, match="^weight dtype must be bfloat16; got float32"):
        plan.check_and_plan("rms", x, torch.ones(256), None, out, None, False, "weight", False,
                            plan.POINTERS_ALIGNED)


def test_no_rows_no_copy(recorder):
    cutefi.layernorm(torch.empty(0, 256, dtype=BF16), torch.ones(256, dtype=BF16), torch.zeros(256, dtype=BF16))
    assert recorder.calls == []
