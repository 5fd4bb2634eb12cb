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
    outs = [torch._scaled_mm(a[i], b[i], scale_a=scale_a, scale_b=scale_b, out_dtype=out_dtype)
            for i in range(a.shape[0])]
    # (one matrix: no stack, whose copy kernel would be timed as cuBLAS's: 6.7 against 8.6 µs at 64 x 4096^2)
    return outs[0].unsqueeze(0) if len(outs) == 1 else torch.stack(outs)


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


def _blockwise_scaled_mm() -> Any:
    """cuBLASLt's block-scaled FP8 GEMM through ``torch._scaled_mm`` (1 x 128 activation, 128 x 128
    weight scales; torch >= 2.9 on Hopper), as a function of the routine's inputs, or None where
    this torch or GPU has none. Its scale layouts are found by trying them on a small problem
    against the dequantised reference."""
    m, n, k = 256, 256, 512
    a, a_scale = cutefi.quantize_fp8(torch.randn(m, k, device="cuda"), group_shape=(1, 128))
    w, w_scale = cutefi.quantize_fp8(torch.randn(n, k, device="cuda"), group_shape=(128, 128))
    ref = _dequantised(a, a_scale, 1) @ _dequantised(w, w_scale, 128).t()
    layouts = (lambda sa, sb: (sa.t().contiguous().t(), sb.t()), lambda sa, sb: (sa.t().contiguous().t(), sb),
               lambda sa, sb: (sa, sb.t()), lambda sa, sb: (sa, sb))
    for layout in layouts:
        try:
            sa, sb = layout(a_scale, w_scale)
            out = torch._scaled_mm(a, w.t(), scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16)
            torch.cuda.synchronize()
        except (RuntimeError, ValueError, TypeError):
            continue
        if ((out.float() - ref).norm() / ref.norm()).item() < 1e-2:
            return lambda a, w, a_scale, w_scale, dtype: torch._scaled_mm(
                a, w.t(), scale_a=layout(a_scale, w_scale)[0], scale_b=layout(a_scale, w_scale)[1], out_dtype=dtype)
    return None


class _Blockwise:
    """The cuBLAS peer, found on its first call (listing the routine touches no GPU)."""

    def __init__(self) -> None:
        self.found: Any = None

    def __call__(self, *inputs: Any) -> torch.Tensor:
        if self.found is None:
            self.found = _blockwise_scaled_mm() or False
        if self.found is False:
            raise RuntimeError("torch._scaled_mm has no block-scaled (1x128, 128x128) FP8 GEMM here")
        return self.found(*inputs)


def _dequantised(values: torch.Tensor, scales: torch.Tensor, rows: int) -> torch.Tensor:
    m, k = values.shape
    return values.float() * scales.repeat_interleave(rows, 0)[:m].repeat_interleave(128, 1)[:, :k]


class GemmFp8Groupwise(Routine):
    name = "gemm_fp8_groupwise"
    help = ("gemm_fp8_nt_groupwise: FP8 e4m3 a [m, k] @ b [n, k].T with DeepSeek-V3 scales (1 x 128 activation "
            "groups, 128 x 128 weight blocks), out --dtype")
    optional_backends = ("cublas", "flashinfer")
    flags = (ShapeFlag("m", (64, 4096), (4096,), "rows of a (tokens)"),
             ShapeFlag("n", (7168, 4096, 2112), (7168,), "rows of b (output features)"),
             ShapeFlag("k", (2048, 7168, 18432), (2048,), "the contracted size"))
    bound = "compute"

    def backends(self) -> dict[str, Backend]:
        found: dict[str, Backend] = {
            "cutefi": lambda a, w, sa, sw, dtype: cutefi.gemm_fp8_nt_groupwise(a, w, sa, sw, "K", out_dtype=dtype),
        }
        found["cublas"] = _Blockwise()
        flashinfer = flashinfer_module()
        function = getattr(flashinfer, "gemm_fp8_nt_groupwise", None) if flashinfer is not None else None
        if function is not None:
            found["flashinfer"] = lambda a, w, sa, sw, dtype: function(a, w, sa, sw, "K", out_dtype=dtype)
        return found

    def check_shape(self, shape: dict[str, int]) -> None:
        if shape["k"] % 16 or shape["n"] % 16:
            raise BenchInputError(f"--n {shape['n']} --k {shape['k']}: the FP8 GEMM takes N and K in multiples of 16")

    def make_inputs(self, shape: dict[str, int], dtype: torch.dtype) -> tuple[Any, ...]:
        a, a_scale = cutefi.quantize_fp8(torch.randn(shape["m"], shape["k"], device="cuda"), group_shape=(1, 128))
        w, w_scale = cutefi.quantize_fp8(torch.randn(shape["n"], shape["k"], device="cuda"), group_shape=(128, 128))
        return a, w, a_scale, w_scale, dtype

    def reference(self, inputs: tuple[Any, ...], shape: dict[str, int]) -> tuple[torch.Tensor, ...]:
        a, w, a_scale, w_scale, _ = inputs
        return (_dequantised(a, a_scale, 1) @ _dequantised(w, w_scale, 128).t(),)

    def tolerance(self, shape: dict[str, int], dtype: torch.dtype) -> tuple[float, float]:
        return 2e-2 * math.sqrt(shape["k"]), 2e-2  # (block scales: sums promoted every 128 of K)

    def cost(self, shape: dict[str, int], dtype: torch.dtype) -> Cost:
        m, n, k = shape["m"], shape["n"], shape["k"]
        out = torch.empty((), dtype=dtype).element_size()
        return Cost(bytes=m * k + k * n + m * n * out, flops=2 * m * n * k)
