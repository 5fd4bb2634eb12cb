"""Grouped GEMM routines (one launch for many row segments, each times its own weight):

- ``segment_gemm``: SegmentGEMMWrapper (bf16/fp16, nn.Linear weights), ``--segments`` segments
  of ``--rows`` rows, against a Python loop of torch.matmul (cuBLAS) over the segments and
  FlashInfer's wrapper when installed;
- ``group_gemm_fp8``: group_gemm_fp8_nt_groupwise (FP8 e4m3, DeepSeek-V3 block scales, MoE
  experts), against a loop of cuBLAS's block-scaled GEMM over the experts (the dense rate a
  grouped launch aims at: ``gemm_fp8_groupwise`` with ``--m`` the experts' rows together, in
  the same run).

FLOPs 2 * rows * n * k over all segments; bytes: inputs, weights (all of them), output."""

from __future__ import annotations

import math
from typing import Any

import torch

import cutefi

from .base import Backend, Cost, Routine, ShapeFlag, flashinfer_module, randn
from .gemm_fp8 import _Blockwise, _dequantised

_WORKSPACE: dict[int, torch.Tensor] = {}


def _wrapper(device: torch.device) -> Any:
    found = _WORKSPACE.get(device.index)
    if found is None:
        found = _WORKSPACE[device.index] = torch.empty(1 << 20, dtype=torch.int8, device=device)
    return cutefi.SegmentGEMMWrapper(found)


def _loop(x: torch.Tensor, weights: torch.Tensor, indptr: list[int], out: torch.Tensor) -> torch.Tensor:
    for s in range(len(indptr) - 1):
        torch.matmul(x[indptr[s]:indptr[s + 1]], weights[s].t(), out=out[indptr[s]:indptr[s + 1]])
    return out


class SegmentGemm(Routine):
    name = "segment_gemm"
    help = "SegmentGEMMWrapper: --segments segments of --rows rows of x [rows, k], each @ its own [n, k] weight"
    optional_backends = ("flashinfer",)
    flags = (ShapeFlag("segments", (8,), (8,), "segments (LoRA adapters, experts)"),
             ShapeFlag("rows", (16, 128, 512), (512,), "rows a segment"),
             ShapeFlag("n", (4096,), (4096,), "output features"),
             ShapeFlag("k", (4096,), (4096,), "input features"))
    bound = "compute"

    def backends(self) -> dict[str, Backend]:
        found: dict[str, Backend] = {
            "cutefi": lambda x, w, lens, indptr, out: _wrapper(x.device).run(x, w, w.shape[0], True, out=out,
                                                                             seg_lens=lens),
            "cublas": lambda x, w, lens, indptr, out: _loop(x, w, indptr, out),
        }
        flashinfer = flashinfer_module()
        wrapper = getattr(flashinfer, "SegmentGEMMWrapper", None) if flashinfer is not None else None
        if wrapper is not None:
            instance = wrapper(torch.empty(128 << 20, dtype=torch.int8, device="cuda"))
            found["flashinfer"] = lambda x, w, lens, indptr, out: instance.run(x, w, w.shape[0], True, out=out,
                                                                               seg_lens=lens)
        return found

    def make_inputs(self, shape: dict[str, int], dtype: torch.dtype) -> tuple[Any, ...]:
        segments, rows = shape["segments"], shape["rows"]
        x = randn(segments * rows, shape["k"], dtype=dtype)
        weights = randn(segments, shape["n"], shape["k"], dtype=dtype, scale=shape["k"] ** -0.5)
        lens = torch.full((segments,), rows, dtype=torch.int64, device="cuda")
        out = torch.empty(segments * rows, shape["n"], dtype=dtype, device="cuda")
        return x, weights, lens, [rows * s for s in range(segments + 1)], out

    def reference(self, inputs: tuple[Any, ...], shape: dict[str, int]) -> tuple[torch.Tensor, ...]:
        x, weights, _, indptr, _ = inputs
        return (torch.cat([x[indptr[s]:indptr[s + 1]].float() @ weights[s].float().t()
                           for s in range(len(indptr) - 1)]),)

    def tolerance(self, shape: dict[str, int], dtype: torch.dtype) -> tuple[float, float]:
        return 2e-2, 2e-2

    def cost(self, shape: dict[str, int], dtype: torch.dtype) -> Cost:
        rows, n, k = shape["segments"] * shape["rows"], shape["n"], shape["k"]
        size = torch.empty((), dtype=dtype).element_size()
        return Cost(bytes=size * (rows * k + shape["segments"] * n * k + rows * n), flops=2 * rows * n * k)


class GroupGemmFp8(Routine):
    name = "group_gemm_fp8"
    help = ("group_gemm_fp8_nt_groupwise: --experts segments of --rows rows (FP8 e4m3, 1x128 and 128x128 scales), "
            "each @ its own [n, k] expert weight")
    optional_backends = ("cublas", "flashinfer")
    flags = (ShapeFlag("experts", (8,), (8,), "experts (segments)"),
             ShapeFlag("rows", (64, 512), (512,), "rows an expert"),
             ShapeFlag("n", (4096, 14336), (4096,), "output features"),
             ShapeFlag("k", (14336, 4096), (14336,), "input features"))
    bound = "compute"

    def backends(self) -> dict[str, Backend]:
        blockwise = _Blockwise()

        def loop(a, b, a_scale, b_scale, indptr, lens):
            return torch.cat([blockwise(a[lens[e]:lens[e + 1]], b[e], a_scale[lens[e]:lens[e + 1]], b_scale[e],
                                        torch.bfloat16) for e in range(b.shape[0])])

        found: dict[str, Backend] = {
            "cutefi": lambda a, b, a_scale, b_scale, indptr, lens: cutefi.group_gemm_fp8_nt_groupwise(
                a, b, a_scale, b_scale, indptr, scale_major_mode="K"),
            "cublas": loop,
        }
        flashinfer = flashinfer_module()
        function = getattr(flashinfer, "group_gemm_fp8_nt_groupwise", None) if flashinfer is not None else None
        if function is not None:
            found["flashinfer"] = lambda a, b, a_scale, b_scale, indptr, lens: function(
                a, b, a_scale, b_scale, indptr, scale_major_mode="K")
        return found

    def make_inputs(self, shape: dict[str, int], dtype: torch.dtype) -> tuple[Any, ...]:
        experts, rows, n, k = shape["experts"], shape["rows"], shape["n"], shape["k"]
        a, a_scale = cutefi.quantize_fp8(torch.randn(experts * rows, k, device="cuda"), group_shape=(1, 128))
        pairs = [cutefi.quantize_fp8(torch.randn(n, k, device="cuda"), group_shape=(128, 128)) for _ in range(experts)]
        indptr = torch.arange(0, experts * rows + 1, rows, dtype=torch.int32, device="cuda")
        return (a, torch.stack([q for q, _ in pairs]), a_scale, torch.stack([s for _, s in pairs]), indptr,
                [rows * e for e in range(experts + 1)])

    def reference(self, inputs: tuple[Any, ...], shape: dict[str, int]) -> tuple[torch.Tensor, ...]:
        a, b, a_scale, b_scale, _, lens = inputs
        return (torch.cat([_dequantised(a[lens[e]:lens[e + 1]], a_scale[lens[e]:lens[e + 1]], 1)
                           @ _dequantised(b[e], b_scale[e], 128).t() for e in range(b.shape[0])]),)

    def tolerance(self, shape: dict[str, int], dtype: torch.dtype) -> tuple[float, float]:
        return 2e-2 * math.sqrt(shape["k"]), 2e-2  # (block scales: sums promoted every 128 of K)

    def cost(self, shape: dict[str, int], dtype: torch.dtype) -> Cost:
        rows, n, k = shape["experts"] * shape["rows"], shape["n"], shape["k"]
        return Cost(bytes=rows * k + shape["experts"] * n * k + 2 * rows * n, flops=2 * rows * n * k)
