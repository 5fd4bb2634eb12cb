"""apply_rope_pos_ids routine (memory bound). Bytes: read q and k, write q and k, read pos_ids."""

from __future__ import annotations

from typing import Any

import torch

import cutefi

from .base import Backend, BenchInputError, Cost, Routine, ShapeFlag, compiled, flashinfer_module, randn

THETA = 1e4
MAX_POSITION = 16384


def _torch_rope(q: torch.Tensor, k: torch.Tensor, pos_ids: torch.Tensor):
    """NeoX-style RoPE as a model would write it in torch (fp32 math, out of place)."""
    d = q.shape[-1]
    inv_freq = THETA ** (-torch.arange(0, d, 2, device=q.device, dtype=torch.float32) / d)
    angle = pos_ids.float()[:, None] * inv_freq[None, :]
    cos, sin = angle.cos()[:, None, :], angle.sin()[:, None, :]

    def rotate(x: torch.Tensor) -> torch.Tensor:
        x1, x2 = x[..., : d // 2].float(), x[..., d // 2 :].float()
        return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], -1).to(x.dtype)

    return rotate(q), rotate(k)


class Rope(Routine):
    name = "rope"
    help = "apply_rope_pos_ids: NeoX RoPE on q [tokens, q_heads, head_dim] and k, out of place"
    optional_backends = ("flashinfer",)
    flags = (
        ShapeFlag("tokens", (1, 128, 4096, 16384, 65536), (128, 16384), "tokens (nnz)"),
        ShapeFlag("q_heads", (32,), (32,), "query heads"),
        ShapeFlag("k_heads", (8,), (8,), "key heads"),
        ShapeFlag("head_dim", (128,), (128,), "head dimension"),
    )
    atol = 5e-2

    def backends(self) -> dict[str, Backend]:
        found: dict[str, Backend] = {
            "cutefi": cutefi.apply_rope_pos_ids,
            "torch": _torch_rope,
            "torch.compile": compiled(_torch_rope),
        }
        flashinfer = flashinfer_module()
        if flashinfer is not None:
            found["flashinfer"] = flashinfer.apply_rope_pos_ids
        return found

    def check_shape(self, shape: dict[str, int]) -> None:
        if shape["head_dim"] % 16 or shape["head_dim"] > 2048:
            raise BenchInputError(f"--head-dim {shape['head_dim']}: rope takes multiples of 16 up to 2048")

    def make_inputs(self, shape: dict[str, int], dtype: torch.dtype) -> tuple[Any, ...]:
        tokens, head_dim = shape["tokens"], shape["head_dim"]
        q = randn(tokens, shape["q_heads"], head_dim, dtype=dtype)
        k = randn(tokens, shape["k_heads"], head_dim, dtype=dtype)
        return q, k, torch.randint(0, MAX_POSITION, (tokens,), device="cuda", dtype=torch.int32)

    def reference(self, inputs: tuple[Any, ...], shape: dict[str, int]) -> tuple[torch.Tensor, ...]:
        q, k, pos_ids = inputs
        d = q.shape[-1]
        inv_freq = THETA ** (-torch.arange(0, d, 2, device=q.device, dtype=torch.float64) / d)
        angle = pos_ids.double()[:, None, None] * inv_freq
        cos, sin = angle.cos(), angle.sin()

        def rotate(x: torch.Tensor) -> torch.Tensor:
            x1, x2 = x[..., : d // 2].double(), x[..., d // 2 :].double()
            return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], -1).float()

        return rotate(q), rotate(k)

    def cost(self, shape: dict[str, int], dtype: torch.dtype) -> Cost:
        elem = torch.empty((), dtype=dtype).element_size()
        heads = shape["q_heads"] + shape["k_heads"]
        return Cost(bytes=2 * shape["tokens"] * heads * shape["head_dim"] * elem + 4 * shape["tokens"])
