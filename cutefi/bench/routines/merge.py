"""merge_states routine (memory bound): merge ``states`` attention states (v, base-2 log-sum-exp)
of each (position, head). Bytes: read every state's v and s, write the merged v and s."""

from __future__ import annotations

from typing import Any

import torch

import cutefi

from .base import Backend, BenchInputError, Cost, Routine, ShapeFlag, compiled, flashinfer_module, randn


def _torch_merge_states(v: torch.Tensor, s: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The merge as a model would write it in torch (fp32 math)."""
    m = s.max(dim=1, keepdim=True).values
    w = torch.exp2(s - m)
    d = w.sum(dim=1)
    merged = (w[..., None] * v.float()).sum(dim=1) / d[..., None]
    return merged.to(v.dtype), m.squeeze(1) + torch.log2(d)


class MergeStates(Routine):
    name = "merge_states"
    help = "merge_states: [seq_len, states, heads, head_dim] attention states (v, base-2 lse) into one a position"
    optional_backends = ("flashinfer",)
    flags = (
        ShapeFlag("seq_len", (1, 64, 1024, 8192), (64, 8192), "positions (tokens)"),
        ShapeFlag("states", (2, 8, 32), (2, 8), "states merged a position"),
        ShapeFlag("heads", (32,), (32,), "heads"),
        ShapeFlag("head_dim", (128,), (128,), "head dimension", minimum=8),
    )

    def backends(self) -> dict[str, Backend]:
        found: dict[str, Backend] = {
            "cutefi": cutefi.merge_states,
            "torch": _torch_merge_states,
            "torch.compile": compiled(_torch_merge_states),
        }
        flashinfer = flashinfer_module()
        if flashinfer is not None:
            found["flashinfer"] = flashinfer.merge_states
        return found

    def check_shape(self, shape: dict[str, int]) -> None:
        if shape["head_dim"] % 8 or shape["head_dim"] > 512:
            raise BenchInputError(f"--head-dim {shape['head_dim']}: merge_states takes multiples of 8 up to 512")

    def make_inputs(self, shape: dict[str, int], dtype: torch.dtype) -> tuple[Any, ...]:
        n, k, h, d = shape["seq_len"], shape["states"], shape["heads"], shape["head_dim"]
        return randn(n, k, h, d, dtype=dtype), randn(n, k, h, dtype=torch.float32, scale=4.0)

    def reference(self, inputs: tuple[Any, ...], shape: dict[str, int]) -> tuple[torch.Tensor, ...]:
        v, s = inputs
        s64 = s.double()
        m = s64.max(dim=1, keepdim=True).values
        w = torch.exp2(s64 - m)
        d = w.sum(dim=1)
        merged = (w[..., None] * v.double()).sum(dim=1) / d[..., None]
        return merged.float(), (m.squeeze(1) + torch.log2(d)).float()

    def cost(self, shape: dict[str, int], dtype: torch.dtype) -> Cost:
        elem = torch.empty((), dtype=dtype).element_size()
        row = shape["head_dim"] * elem + 4  # a row of v and its log-sum-exp
        return Cost(bytes=(shape["states"] + 1) * shape["seq_len"] * shape["heads"] * row)
