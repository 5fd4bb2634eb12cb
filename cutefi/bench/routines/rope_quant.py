"""rope_quantize_fp8 routine (memory bound), in MLA's absorbed (decode) layout: q [tokens, heads,
576] split into its nope (512) and rope (64) parts, the latent k [tokens, 512] and its rope part;
RoPE from a float32 cos|sin cache, everything times a scale in float8_e4m3fn. Bytes: the 16-bit
parts read, one byte an element written, the positions and the cache rows read. Peers: torch
eager and torch.compile of the same math, and FlashInfer's op when it imports."""

from __future__ import annotations

from typing import Any

import torch

import cutefi

from .base import Backend, Cost, Routine, ShapeFlag, compiled, flashinfer_module, randn

FP8 = torch.float8_e4m3fn
FP8_MAX = torch.finfo(FP8).max  # (448)
MAX_POSITION = 8192
ROPE, NOPE = 64, 512  # (the latent k's width is NOPE too)
SCALE_Q, SCALE_KV = 0.5, 2.0


def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half].float(), x[..., half:].float()
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], -1)


def _fp8(x: torch.Tensor, scale: float) -> torch.Tensor:
    return (x.float() * scale).clamp(-FP8_MAX, FP8_MAX).to(FP8)


def _torch_rope_quantize(q: torch.Tensor, k_rope: torch.Tensor, k_nope: torch.Tensor, cache: torch.Tensor,
                         pos: torch.Tensor):
    """What a model would write in torch: NeoX RoPE in fp32, scale, clamp, cast."""
    rows = cache[pos]
    cos, sin = rows[:, : ROPE // 2], rows[:, ROPE // 2:]
    q_rope = _rotate(q[..., NOPE:], cos[:, None], sin[:, None])
    return (_fp8(q_rope, SCALE_Q), _fp8(_rotate(k_rope, cos, sin), SCALE_KV), _fp8(q[..., :NOPE], SCALE_Q),
            _fp8(k_nope, SCALE_KV))


def _call(fn):
    def run(q, k_rope, k_nope, cache, pos):
        return fn(q[..., NOPE:], k_rope, q[..., :NOPE], k_nope, cache, pos, True, FP8, SCALE_Q, SCALE_KV)
    return run


class RopeQuantizeFp8(Routine):
    name = "rope_quantize_fp8"
    help = "mla_rope_quantize_fp8: RoPE + FP8 e4m3 of MLA's q [tokens, heads, 512 + 64] and k (512 + 64)"
    optional_backends = ("flashinfer",)
    flags = (ShapeFlag("tokens", (1, 32, 1024, 16384), (32, 16384), "tokens (nnz)"),
             ShapeFlag("heads", (16, 128), (128,), "query heads"))
    atol, rtol = 2e-2, 0.13  # (one e4m3 step is 1/8 of a value)

    def backends(self) -> dict[str, Backend]:
        found: dict[str, Backend] = {"cutefi": _call(cutefi.mla_rope_quantize_fp8), "torch": _torch_rope_quantize,
                                     "torch.compile": compiled(_torch_rope_quantize)}
        flashinfer = flashinfer_module()
        function = getattr(getattr(flashinfer, "rope", None), "mla_rope_quantize_fp8", None) if flashinfer else None
        if function is not None:
            found["flashinfer"] = _call(function)
        return found

    def make_inputs(self, shape: dict[str, int], dtype: torch.dtype) -> tuple[Any, ...]:
        tokens = shape["tokens"]
        angle = torch.rand(MAX_POSITION, ROPE // 2, device="cuda") * 6.2831853
        cache = torch.cat([angle.cos(), angle.sin()], -1)
        return (randn(tokens, shape["heads"], NOPE + ROPE, dtype=dtype), randn(tokens, ROPE, dtype=dtype),
                randn(tokens, NOPE, dtype=dtype), cache,
                torch.randint(0, MAX_POSITION, (tokens,), device="cuda"))

    def reference(self, inputs: tuple[Any, ...], shape: dict[str, int]) -> tuple[torch.Tensor, ...]:
        q, k_rope, k_nope, cache, pos = inputs
        rows = cache[pos].double()
        cos, sin = rows[:, : ROPE // 2], rows[:, ROPE // 2:]

        def quantised(x: torch.Tensor, scale: float) -> torch.Tensor:
            return (x.double() * scale).clamp(-FP8_MAX, FP8_MAX).to(FP8).float()

        return (quantised(_rotate(q[..., NOPE:].double(), cos[:, None], sin[:, None]), SCALE_Q),
                quantised(_rotate(k_rope.double(), cos, sin), SCALE_KV), quantised(q[..., :NOPE], SCALE_Q),
                quantised(k_nope, SCALE_KV))

    def cost(self, shape: dict[str, int], dtype: torch.dtype) -> Cost:
        elem = torch.empty((), dtype=dtype).element_size()
        per_token = (shape["heads"] + 1) * (NOPE + ROPE)
        return Cost(bytes=shape["tokens"] * (per_token * (elem + 1) + 8 + ROPE * 4))
