"""rmsnorm_quant, fused_add_rmsnorm_quant and layernorm_quant routines (memory bound).

The output is float8_e4m3fn (the format does not change the traffic). Bytes: the 16-bit input
read (and for the fused add the residual read and written) plus one byte per output element
and the parameters. Peers: torch eager and torch.compile of the same math (norm, times
1/scale, clamp, cast), and FlashInfer's ops when it imports.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

import cutefi

from .base import Backend, Cost, compiled as _compiled, flashinfer_module, randn
from .norm import EPS, _RowNorm, _rms_reference

FP8 = torch.float8_e4m3fn
FP8_MAX = torch.finfo(FP8).max  # (448)
SCALE = 0.5


def _to_fp8(y: torch.Tensor) -> torch.Tensor:
    return (y.float() * (1.0 / SCALE)).clamp(-FP8_MAX, FP8_MAX).to(FP8)


def _torch_rmsnorm_quant(out: torch.Tensor, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    return _to_fp8(F.rms_norm(x.float(), (x.shape[-1],), weight.float(), EPS))


def _torch_fused_add_quant(out: torch.Tensor, x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor):
    s = x.float() + residual.float()
    residual.copy_(s)
    return _to_fp8(F.rms_norm(s, (x.shape[-1],), weight.float(), EPS)), residual


def _torch_layernorm_quant(out: torch.Tensor, x: torch.Tensor, gamma: torch.Tensor, beta: torch.Tensor):
    return _to_fp8(F.layer_norm(x.float(), (x.shape[-1],), gamma, beta, EPS))


def _quantised_reference(y: torch.Tensor) -> torch.Tensor:
    return (y * (1.0 / SCALE)).clamp(-FP8_MAX, FP8_MAX)


class _QuantNorm(_RowNorm):
    # one FP8 step is 1/8 of a value (e4m3): outputs may round the other way where y differs
    atol, rtol = 2e-2, 0.13
    optional_backends = ("flashinfer",)
    op = ""

    def _with_flashinfer(self, found: dict[str, Backend], call: Any) -> dict[str, Backend]:
        flashinfer = flashinfer_module()
        if flashinfer is not None and hasattr(flashinfer, self.op):
            found["flashinfer"] = call(getattr(flashinfer, self.op))
        return found


class RmsNormQuant(_QuantNorm):
    name = op = "rmsnorm_quant"
    help = "out (fp8 e4m3) = rmsnorm(x) / scale (FlashInfer's rmsnorm_quant)"

    def backends(self) -> dict[str, Backend]:
        def run(fn):
            def call(out, x, w):
                fn(out, x, w, SCALE, EPS)
                return out
            return call

        found = {"cutefi": run(cutefi.rmsnorm_quant), "torch": _torch_rmsnorm_quant,
                 "torch.compile": _compiled(_torch_rmsnorm_quant)}
        return self._with_flashinfer(found, run)

    def make_inputs(self, shape: dict[str, int], dtype: torch.dtype) -> tuple[Any, ...]:
        rows, hidden = shape["rows"], shape["hidden"]
        return (torch.empty(rows, hidden, device="cuda", dtype=FP8), randn(rows, hidden, dtype=dtype),
                randn(hidden, dtype=dtype))

    def reference(self, inputs: tuple[Any, ...], shape: dict[str, int]) -> tuple[torch.Tensor, ...]:
        _, x, weight = inputs
        return (_quantised_reference(_rms_reference(x, weight)),)

    def cost(self, shape: dict[str, int], dtype: torch.dtype) -> Cost:
        elem = torch.empty((), dtype=dtype).element_size()
        return Cost(bytes=shape["rows"] * shape["hidden"] * (elem + 1) + shape["hidden"] * elem)


class FusedAddRmsNormQuant(_QuantNorm):
    name = op = "fused_add_rmsnorm_quant"
    help = "residual += x; out (fp8 e4m3) = rmsnorm(residual) / scale (FlashInfer's fused_add_rmsnorm_quant)"

    def backends(self) -> dict[str, Backend]:
        def run(fn):
            def call(out, x, residual, w):
                fn(out, x, residual, w, SCALE, EPS)
                return out, residual
            return call

        found = {"cutefi": run(cutefi.fused_add_rmsnorm_quant), "torch": _torch_fused_add_quant,
                 "torch.compile": _compiled(_torch_fused_add_quant)}
        return self._with_flashinfer(found, run)

    def make_inputs(self, shape: dict[str, int], dtype: torch.dtype) -> tuple[Any, ...]:
        rows, hidden = shape["rows"], shape["hidden"]
        return (torch.empty(rows, hidden, device="cuda", dtype=FP8), randn(rows, hidden, dtype=dtype),
                randn(rows, hidden, dtype=dtype), randn(hidden, dtype=dtype))

    def reference(self, inputs: tuple[Any, ...], shape: dict[str, int]) -> tuple[torch.Tensor, ...]:
        _, x, residual, weight = inputs
        s = x.float() + residual.float()
        return _quantised_reference(_rms_reference(s, weight)), s.to(residual.dtype).float()

    def cost(self, shape: dict[str, int], dtype: torch.dtype) -> Cost:
        elem = torch.empty((), dtype=dtype).element_size()
        return Cost(bytes=shape["rows"] * shape["hidden"] * (3 * elem + 1) + shape["hidden"] * elem)


class LayerNormQuant(_QuantNorm):
    name = op = "layernorm_quant"
    help = "out (fp8 e4m3) = layernorm(x) / scale, fp32 gamma/beta (FlashInfer's layernorm_quant)"

    def backends(self) -> dict[str, Backend]:
        def run(fn):
            def call(out, x, gamma, beta):
                fn(out, x, gamma, beta, SCALE, EPS)
                return out
            return call

        found = {"cutefi": run(cutefi.layernorm_quant), "torch": _torch_layernorm_quant,
                 "torch.compile": _compiled(_torch_layernorm_quant)}
        return self._with_flashinfer(found, run)

    def make_inputs(self, shape: dict[str, int], dtype: torch.dtype) -> tuple[Any, ...]:
        rows, hidden = shape["rows"], shape["hidden"]
        return (torch.empty(rows, hidden, device="cuda", dtype=FP8), randn(rows, hidden, dtype=dtype),
                randn(hidden, dtype=torch.float32), randn(hidden, dtype=torch.float32))

    def reference(self, inputs: tuple[Any, ...], shape: dict[str, int]) -> tuple[torch.Tensor, ...]:
        _, x, gamma, beta = inputs
        y = F.layer_norm(x.double(), (x.shape[-1],), gamma.double(), beta.double(), EPS).float()
        return (_quantised_reference(y),)

    def cost(self, shape: dict[str, int], dtype: torch.dtype) -> Cost:
        elem = torch.empty((), dtype=dtype).element_size()
        return Cost(bytes=shape["rows"] * shape["hidden"] * (elem + 1) + 2 * shape["hidden"] * 4)
