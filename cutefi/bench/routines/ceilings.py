"""The peers' ceilings as routines: copy (memory), matmul (cuBLAS) and attention (cuDNN / flash SDPA).

They are what cutefi's kernels are measured against: a copy moves the bytes with no math, a
dense bf16 matmul is the tensor-core rate, and SDPA is what a model gets from torch today.
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F

import cutefi

from .base import Backend, BenchInputError, Cost, Routine, ShapeFlag, poisoned, randn


class Copy(Routine):
    name = "copy"
    help = "device-to-device copy of a contiguous buffer: the memory-bandwidth ceiling"
    flags = (ShapeFlag("mib", (1, 16, 256, 2048), (256,), "source size in MiB"),)
    atol = rtol = 0.0

    def backends(self) -> dict[str, Backend]:
        def cutefi_copy(src, dst):
            cutefi.copy_(dst, src)
            return dst

        return {"cutefi": cutefi_copy, "torch": lambda src, dst: dst.copy_(src)}

    def make_inputs(self, shape: dict[str, int], dtype: torch.dtype) -> tuple[Any, ...]:
        numel = shape["mib"] * (1 << 20) // torch.empty((), dtype=dtype).element_size()
        return randn(numel, dtype=dtype), poisoned(numel, dtype=dtype)

    def reference(self, inputs: tuple[Any, ...], shape: dict[str, int]) -> tuple[torch.Tensor, ...]:
        return (inputs[0].float(),)

    def cost(self, shape: dict[str, int], dtype: torch.dtype) -> Cost:
        return Cost(bytes=2 * shape["mib"] << 20)


class Matmul(Routine):
    name = "matmul"
    help = "C = A @ B (row-major, [m, k] x [k, n]): the dense tensor-core ceiling"
    flags = (ShapeFlag("m", (2048, 4096, 8192), (8192,), "rows of A and C"),
             ShapeFlag("n", (8192,), (8192,), "columns of B and C"),
             ShapeFlag("k", (8192,), (8192,), "the reduced dimension"))
    bound = "compute"

    def backends(self) -> dict[str, Backend]:
        return {"cublas": torch.matmul}

    def make_inputs(self, shape: dict[str, int], dtype: torch.dtype) -> tuple[Any, ...]:
        return randn(shape["m"], shape["k"], dtype=dtype), randn(shape["k"], shape["n"], dtype=dtype)

    def reference(self, inputs: tuple[Any, ...], shape: dict[str, int]) -> tuple[torch.Tensor, ...]:
        a, b = inputs
        return (a.float() @ b.float(),)

    def tolerance(self, shape: dict[str, int], dtype: torch.dtype) -> tuple[float, float]:
        # entries grow like sqrt(k); the output's rounding grows with them
        return 1e-2 * math.sqrt(shape["k"]), 1e-2

    def cost(self, shape: dict[str, int], dtype: torch.dtype) -> Cost:
        m, n, k = shape["m"], shape["n"], shape["k"]
        elem = torch.empty((), dtype=dtype).element_size()
        return Cost(bytes=(m * k + k * n + m * n) * elem, flops=2 * m * n * k)


class Attention(Routine):
    name = "attention"
    help = "prefill attention softmax(QK^T/sqrt(d))V, q/k/v [batch, heads, seqlen, head_dim], torch SDPA"
    flags = (ShapeFlag("batch", (1,), (1,), "batch size"),
             ShapeFlag("heads", (32,), (32,), "heads (q = k = v)"),
             ShapeFlag("seqlen", (1024, 4096, 8192), (4096,), "sequence length"),
             ShapeFlag("head_dim", (128,), (128,), "head dimension"),
             ShapeFlag("causal", (1,), (1,), "1: causal mask, 0: none", minimum=0))
    bound = "compute"

    def backends(self) -> dict[str, Backend]:
        from torch.nn.attention import SDPBackend, sdpa_kernel

        def through(kernel):
            def attend(q, k, v, causal):
                with sdpa_kernel(kernel):
                    return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
            return attend

        found = {"torch": through(SDPBackend.FLASH_ATTENTION)}
        if hasattr(SDPBackend, "CUDNN_ATTENTION"):
            found["cudnn"] = through(SDPBackend.CUDNN_ATTENTION)
        return found

    def check_shape(self, shape: dict[str, int]) -> None:
        if shape["head_dim"] % 8 or shape["head_dim"] > 256:
            raise BenchInputError(f"--head-dim {shape['head_dim']}: attention takes multiples of 8 up to 256")
        if shape["causal"] not in (0, 1):
            raise BenchInputError(f"--causal {shape['causal']}: 0 or 1")

    def make_inputs(self, shape: dict[str, int], dtype: torch.dtype) -> tuple[Any, ...]:
        dims = (shape["batch"], shape["heads"], shape["seqlen"], shape["head_dim"])
        return randn(*dims, dtype=dtype), randn(*dims, dtype=dtype), randn(*dims, dtype=dtype), bool(shape["causal"])

    def reference(self, inputs: tuple[Any, ...], shape: dict[str, int]) -> tuple[torch.Tensor, ...]:
        q, k, v, causal = inputs
        from torch.nn.attention import SDPBackend, sdpa_kernel

        with sdpa_kernel(SDPBackend.MATH):
            return (F.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=causal),)

    def cost(self, shape: dict[str, int], dtype: torch.dtype) -> Cost:
        b, h, s, d = shape["batch"], shape["heads"], shape["seqlen"], shape["head_dim"]
        elem = torch.empty((), dtype=dtype).element_size()
        flops = 4 * b * h * s * s * d
        return Cost(bytes=4 * b * h * s * d * elem, flops=flops // 2 if shape["causal"] else flops)
