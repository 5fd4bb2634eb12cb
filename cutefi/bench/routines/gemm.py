"""mm_bf16 / mm_fp16 and bmm_bf16 / bmm_fp16 routines (compute bound for large M, weight-bandwidth bound for small M):
``a [m, k] @ w.t()`` with ``w`` an ``[n, k]`` nn.Linear weight. FLOPs 2mnk; bytes: read a and
the weight, write the output (GB/s is the decode-sized figure of merit)."""

from __future__ import annotations

from typing import Any

import torch

import cutefi

from .base import Backend, BenchInputError, Cost, Routine, ShapeFlag, compiled, flashinfer_module, randn
from .ceilings import Matmul


def _matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.matmul(a, b)


def _cutefi_mm(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    if a.dtype == torch.bfloat16:
        return cutefi.mm_bf16(a, b)
    return cutefi.mm_fp16(a, b, out_dtype=torch.float16)


class MmBf16(Routine):
    name = "mm_bf16"
    help = "mm_bf16 / mm_fp16 (by --dtype): a [m, k] @ w.t(), w an [n, k] nn.Linear weight"
    optional_backends = ("flashinfer",)
    flags = (ShapeFlag("m", (1, 16, 64, 256, 1024, 4096, 16384), (16, 4096), "rows of a (tokens)"),
             ShapeFlag("n", (4096, 14336), (4096,), "output features"),
             ShapeFlag("k", (4096,), (4096,), "input features"))
    bound = "compute"

    # (bmm_bf16 below swaps these two)
    _cutefi = staticmethod(_cutefi_mm)
    _peer = staticmethod(_matmul)

    def backends(self) -> dict[str, Backend]:
        found: dict[str, Backend] = {"cutefi": self._cutefi, "cublas": self._peer,
                                     "torch.compile": compiled(self._peer)}
        flashinfer = flashinfer_module()
        function = getattr(flashinfer, self.name, None) if flashinfer is not None else None
        if function is not None:
            found["flashinfer"] = lambda a, b: function(a, b)
        return found

    def check_shape(self, shape: dict[str, int]) -> None:
        if shape["n"] % 8 or shape["k"] % 8:
            raise BenchInputError(f"--n {shape['n']} --k {shape['k']}: {self.name} takes N and K in multiples of 8")

    def make_inputs(self, shape: dict[str, int], dtype: torch.dtype) -> tuple[Any, ...]:
        weight = randn(shape["n"], shape["k"], dtype=dtype)
        return randn(shape["m"], shape["k"], dtype=dtype), weight.t()

    # (the float32 reference, tolerance and cost are matmul's: the same product)
    reference = Matmul.reference
    tolerance = Matmul.tolerance
    cost = Matmul.cost


def _cutefi_mm_fp32(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    mm = cutefi.mm_bf16 if a.dtype == torch.bfloat16 else cutefi.mm_fp16
    return mm(a, b, out_dtype=torch.float32)


def _matmul_fp32(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.mm(a, b, out_dtype=torch.float32)  # (cuBLAS writing its fp32 sums)


class MmFp32Out(MmBf16):
    name = "mm_bf16_fp32_out"
    help = "mm_bf16 / mm_fp16 (by --dtype) with out_dtype=torch.float32 (e.g. router logits); peer torch.mm(out_dtype=)"
    _cutefi = staticmethod(_cutefi_mm_fp32)
    _peer = staticmethod(_matmul_fp32)

    def backends(self) -> dict[str, Backend]:
        found = super().backends()
        if "flashinfer" in found:
            function = flashinfer_module().mm_bf16
            found["flashinfer"] = lambda a, b: function(a, b, out_dtype=torch.float32)
        return found

    def cost(self, shape: dict[str, int], dtype: torch.dtype) -> Cost:
        one = Matmul.cost(self, shape, dtype)  # (the output's 4 bytes an element, not 2)
        return Cost(bytes=one.bytes + shape["m"] * shape["n"] * 2, flops=one.flops)


def _cutefi_bmm(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    if a.dtype == torch.bfloat16:
        return cutefi.bmm_bf16(a, b)
    return cutefi.bmm_fp16(a, b, out_dtype=torch.float16)


class BmmBf16(MmBf16):
    name = "bmm_bf16"
    help = "bmm_bf16 / bmm_fp16 (by --dtype): A [batch, m, k] @ B [batch, k, n], B the transposed view of [n, k]"
    flags = (ShapeFlag("batch", (1, 8, 64), (8,), "matrices"),
             ShapeFlag("m", (128, 1024), (1024,), "rows of each A"),
             ShapeFlag("n", (1024, 4096), (1024,), "columns of each B"),
             ShapeFlag("k", (1024, 4096), (1024,), "the contracted size"))
    _cutefi = staticmethod(_cutefi_bmm)
    _peer = staticmethod(torch.bmm)

    def make_inputs(self, shape: dict[str, int], dtype: torch.dtype) -> tuple[Any, ...]:
        batch = shape["batch"]
        weight = randn(batch, shape["n"], shape["k"], dtype=dtype)
        return randn(batch, shape["m"], shape["k"], dtype=dtype), weight.transpose(-2, -1)

    def cost(self, shape: dict[str, int], dtype: torch.dtype) -> Cost:
        one = Matmul.cost(self, shape, dtype)
        return Cost(bytes=one.bytes * shape["batch"], flops=one.flops * shape["batch"])
