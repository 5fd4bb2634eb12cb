"""bmm_fp8 routine: ``A [b, m, k] @ B [b, k, n]`` in FP8 e4m3 with per-tensor float32 scales
(B the transposed view of an ``[n, k]`` weight), output in ``--dtype`` (bf16 or fp16), against
``torch._scaled_mm`` (cuBLASLt's FP8 GEMM; one matrix a call, so a Python loop for b > 1) and
FlashInfer when installed. FLOPs 2bmnk; bytes: one byte an input element, the output's size.
torch._scaled_mm runs with its default, promoted (more accurate) accumulation; cutefi's sums
are the FP8 tensor cores' own (see cutefi/gemm/fp8_api.py)."""

from __future__ import annotations

import math
from typing import Any

import torch

import cutefi

from .base import Backend, BenchInputError, Cost, Routine, ShapeFlag, flashinfer_module

_FP8 = torch.float8_e4m3fn


def _quantised(*shape: int) -> tuple[torch.Tensor, torch.Tensor]:
    x = torch.randn(*shape, device="cuda")
    scale = (x.abs().amax() / torch.finfo(_FP8).max).reshape(1)
    return (x / scale).clamp(torch.finfo(_FP8).min, torch.finfo(_FP8).max).to(_FP8), scale.float()


def _scaled_mm(a: torch.Tensor, b: torch.Tensor, scale_a: torch.Tensor, scale_b: torch.Tensor,
               out_dtype: torch.dtype) -> torch.Tensor:
    return torch.stack([torch._scaled_mm(a[i], b[i], scale_a=scale_a, scale_b=scale_b, out_dtype=out_dtype)
                        for i in range(a.shape[0])])


class BmmFp8(Routine):
    name = "bmm_fp8"
    help = "bmm_fp8: FP8 e4m3 A [batch, m, k] @ B [batch, k, n] (B column-major), per-tensor scales, out --dtype"
    optional_backends = ("flashinfer",)
    flags = (ShapeFlag("batch", (1,), (1,), "matrices"),
             ShapeFlag("m", (64, 256, 1024, 4096, 8192), (4096,), "rows of each A (tokens)"),
             ShapeFlag("n", (4096, 14336, 8192), (4096,), "columns of each B (output features)"),
             ShapeFlag("k", (4096, 14336, 8192), (4096,), "the contracted size"))
    bound = "compute"

    def backends(self) -> dict[str, Backend]:
        found: dict[str, Backend] = {
            "cutefi": lambda a, b, sa, sb, dtype: cutefi.bmm_fp8(a, b, sa, sb, dtype),
            "cublas": _scaled_mm,
        }
        flashinfer = flashinfer_module()
        function = getattr(flashinfer, "bmm_fp8", None) if flashinfer is not None else None
        if function is not None:
            found["flashinfer"] = lambda a, b, sa, sb, dtype: function(a, b, sa, sb, dtype)
        return found

    def check_shape(self, shape: dict[str, int]) -> None:
        if shape["k"] % 16 or shape["n"] % 16:
            raise BenchInputError(f"--n {shape['n']} --k {shape['k']}: bmm_fp8 takes N and K in multiples of 16")

    def make_inputs(self, shape: dict[str, int], dtype: torch.dtype) -> tuple[Any, ...]:
        a, scale_a = _quantised(shape["batch"], shape["m"], shape["k"])
        w, scale_b = _quantised(shape["batch"], shape["n"], shape["k"])
        return a, w.transpose(-2, -1), scale_a, scale_b, dtype

    def reference(self, inputs: tuple[Any, ...], shape: dict[str, int]) -> tuple[torch.Tensor, ...]:
        a, b, scale_a, scale_b, _ = inputs
        return ((a.float() * scale_a) @ (b.float() * scale_b),)

    def tolerance(self, shape: dict[str, int], dtype: torch.dtype) -> tuple[float, float]:
        # (cutefi's FP8 sums are the tensor cores' own, like cuBLAS's fast accumulation: at
        # K = 14336 its largest error measured 3.4x cuBLAS's promoted sums', 6.9 against 2.0)
        return 6e-2 * math.sqrt(shape["k"]), 2e-2

    def cost(self, shape: dict[str, int], dtype: torch.dtype) -> Cost:
        b, m, n, k = shape["batch"], shape["m"], shape["n"], shape["k"]
        out = torch.empty((), dtype=dtype).element_size()
        return Cost(bytes=b * (m * k + k * n + m * n * out), flops=2 * b * m * n * k)
