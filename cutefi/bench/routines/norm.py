"""rmsnorm, fused_add_rmsnorm and layernorm routines (memory bound: GB/s against copy bandwidth).

Bytes: rmsnorm reads input + weight and writes output; fused_add_rmsnorm reads input and
residual and writes both (plus the weight); layernorm reads input + gamma and beta
(fp32, or with ``--param-bits 16`` in the input's dtype, as a bf16 model stores them) and writes output.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

import cutefi
from cutefi.norm.long_rows import MAX_N as MAX_HIDDEN

from .base import Backend, BenchInputError, Cost, Routine, ShapeFlag, compiled, flashinfer_module, poisoned, randn

EPS = 1e-6
ROWS = ShapeFlag("rows", (1, 128, 4096, 16384, 65536), (128, 16384), "rows (tokens) M")
HIDDEN = ShapeFlag("hidden", (2048, 4096, 8192, 16384), (4096,), "hidden size N")
PARAM_BITS = ShapeFlag("param_bits", (32,), (32,), "layernorm's gamma/beta: 32 (float32) or 16 (the input's dtype)",
                       minimum=16)


def _torch_rmsnorm(x: torch.Tensor, weight: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    # `out` is the preallocated buffer cutefi writes into; torch allocates its own
    return F.rms_norm(x, (x.shape[-1],), weight, EPS)


def _torch_fused_add(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor):
    residual.add_(x)
    x.copy_(F.rms_norm(residual, (x.shape[-1],), weight, EPS))
    return x, residual


def _torch_layernorm(x: torch.Tensor, gamma: torch.Tensor, beta: torch.Tensor, *low_precision) -> torch.Tensor:
    # computed in fp32, as cutefi.layernorm does (16-bit parameters widened: free for fp32 ones)
    return F.layer_norm(x.float(), (x.shape[-1],), gamma.float(), beta.float(), EPS).to(x.dtype)


def _torch_layernorm_eager(x: torch.Tensor, gamma: torch.Tensor, beta: torch.Tensor, gamma_low: torch.Tensor,
                           beta_low: torch.Tensor) -> torch.Tensor:
    # eager's fused CUDA kernel wants gamma/beta in the input dtype (no mixed-type path on CUDA):
    # given copies converted once beforehand, as a model would store them
    return F.layer_norm(x, (x.shape[-1],), gamma_low, beta_low, EPS)


def _rms_reference(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    x = x.float()
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + EPS) * weight.float()


def out_param_peers(op: str, torch_fn: Backend) -> dict[str, Backend]:
    """The backends of a norm called ``op(x, w, EPS, out=out)``: cutefi's, FlashInfer's (where it
    imports and has ``op``), and ``torch_fn(x, w, out)`` eager and compiled."""
    ours = getattr(cutefi, op)
    found: dict[str, Backend] = {"cutefi": lambda x, w, out: ours(x, w, EPS, out=out), "torch": torch_fn,
                                 "torch.compile": compiled(torch_fn)}
    flashinfer = flashinfer_module()
    if flashinfer is not None and hasattr(flashinfer, op):
        theirs = getattr(flashinfer, op)
        found["flashinfer"] = lambda x, w, out: theirs(x, w, EPS, out=out)
    return found


class _RowNorm(Routine):
    flags = (ROWS, HIDDEN)
    # a flag of a few accepted values: (name, values, what they mean); the first value, the
    # default, is left out of the case labels (the rows read as before the flag was added)
    choice: tuple[str, tuple[int, ...], str] | None = None

    def check_shape(self, shape: dict[str, int]) -> None:
        if not 1 <= shape["hidden"] <= MAX_HIDDEN:
            raise BenchInputError(f"--hidden {shape['hidden']}: {self.name} takes hidden sizes in [1, {MAX_HIDDEN}]")
        if self.choice is not None and shape[self.choice[0]] not in self.choice[1]:
            name, _, meaning = self.choice
            raise BenchInputError(f"--{name.replace('_', '-')} {shape[name]}: {meaning}")

    def label(self, shape: dict[str, int]) -> str:
        if self.choice is None:
            return super().label(shape)
        name, values, _ = self.choice
        return super().label({k: v for k, v in shape.items() if k != name or v != values[0]})


class RmsNorm(_RowNorm):
    name = "rmsnorm"
    help = "y = x / rms(x) * w over [rows, hidden] (FlashInfer's rmsnorm)"
    optional_backends = ("flashinfer",)

    def backends(self) -> dict[str, Backend]:
        return out_param_peers("rmsnorm", _torch_rmsnorm)

    def make_inputs(self, shape: dict[str, int], dtype: torch.dtype) -> tuple[Any, ...]:
        rows, hidden = shape["rows"], shape["hidden"]
        return randn(rows, hidden, dtype=dtype), randn(hidden, dtype=dtype), poisoned(rows, hidden, dtype=dtype)

    def reference(self, inputs: tuple[Any, ...], shape: dict[str, int]) -> tuple[torch.Tensor, ...]:
        x, weight, _ = inputs
        return (_rms_reference(x, weight),)

    def cost(self, shape: dict[str, int], dtype: torch.dtype) -> Cost:
        elem = torch.empty((), dtype=dtype).element_size()
        return Cost(bytes=(2 * shape["rows"] + 1) * shape["hidden"] * elem)


class FusedAddRmsNorm(_RowNorm):
    name = "fused_add_rmsnorm"
    help = "in place: residual += x; x = rmsnorm(residual) (FlashInfer's fused_add_rmsnorm)"
    optional_backends = ("flashinfer",)

    def backends(self) -> dict[str, Backend]:
        def cutefi_fused(x, residual, w):
            cutefi.fused_add_rmsnorm(x, residual, w, EPS)
            return x, residual

        found: dict[str, Backend] = {"cutefi": cutefi_fused, "torch": _torch_fused_add,
                                     "torch.compile": compiled(_torch_fused_add)}
        flashinfer = flashinfer_module()
        if flashinfer is not None:
            def flashinfer_fused(x, residual, w):
                flashinfer.fused_add_rmsnorm(x, residual, w, EPS)
                return x, residual

            found["flashinfer"] = flashinfer_fused
        return found

    def make_inputs(self, shape: dict[str, int], dtype: torch.dtype) -> tuple[Any, ...]:
        rows, hidden = shape["rows"], shape["hidden"]
        return randn(rows, hidden, dtype=dtype), randn(rows, hidden, dtype=dtype), randn(hidden, dtype=dtype)

    def reference(self, inputs: tuple[Any, ...], shape: dict[str, int]) -> tuple[torch.Tensor, ...]:
        x, residual, weight = inputs
        # the sum is rounded to the residual's dtype first, as every implementation stores it
        summed = (residual.float() + x.float()).to(residual.dtype).float()
        return _rms_reference(summed, weight), summed

    def cost(self, shape: dict[str, int], dtype: torch.dtype) -> Cost:
        elem = torch.empty((), dtype=dtype).element_size()
        return Cost(bytes=(4 * shape["rows"] + 1) * shape["hidden"] * elem)


class LayerNorm(_RowNorm):
    name = "layernorm"
    help = "y = (x - mean) / std * gamma + beta, gamma/beta fp32 or 16-bit (FlashInfer's layernorm)"
    flags = (ROWS, HIDDEN, PARAM_BITS)
    choice = ("param_bits", (32, 16), "32 (float32) or 16 (the input's dtype)")

    def backends(self) -> dict[str, Backend]:
        return {
            "cutefi": lambda x, gamma, beta, *low_precision: cutefi.layernorm(x, gamma, beta, EPS),
            "torch": _torch_layernorm_eager,
            "torch.compile": compiled(_torch_layernorm),
        }

    def make_inputs(self, shape: dict[str, int], dtype: torch.dtype) -> tuple[Any, ...]:
        rows, hidden = shape["rows"], shape["hidden"]
        gamma, beta = randn(hidden, dtype=torch.float32), randn(hidden, dtype=torch.float32)
        if shape["param_bits"] == 16:  # (what every backend gets: values exact in the dtype)
            gamma, beta = gamma.to(dtype), beta.to(dtype)
        return randn(rows, hidden, dtype=dtype), gamma, beta, gamma.to(dtype), beta.to(dtype)

    def reference(self, inputs: tuple[Any, ...], shape: dict[str, int]) -> tuple[torch.Tensor, ...]:
        x, gamma, beta = inputs[:3]
        return (F.layer_norm(x.double(), (x.shape[-1],), gamma.double(), beta.double(), EPS).float(),)

    def cost(self, shape: dict[str, int], dtype: torch.dtype) -> Cost:
        elem = torch.empty((), dtype=dtype).element_size()
        return Cost(bytes=2 * shape["rows"] * shape["hidden"] * elem + 2 * shape["hidden"] * shape["param_bits"] // 8)
