"""RMSNorm family: specs and the public API (FlashInfer's names).

Kernel: ``norm_kernel.py`` (one CuTe DSL class shared with LayerNorm; specialised on dtype,
hidden-size class and the fused-add / gemma flags); launch contract: ``norm_launch.py``. Rows (M), the hidden size N within its class, row strides
and eps are runtime arguments: no new build for a new batch or sequence length.
"""

from __future__ import annotations

import torch

from .._checks import require_tensor
from .common import launch_norm


def _normalize(input: torch.Tensor, weight: torch.Tensor, eps: float, out: torch.Tensor | None,
               gemma: bool) -> torch.Tensor:
    if out is None:
        out = torch.empty_like(require_tensor("input", input))
    launch_norm("rms", input, weight, None, out, None, eps, gemma)
    return out


def rmsnorm(input: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6,
            out: torch.Tensor | None = None) -> torch.Tensor:
    """``out = input / sqrt(mean(input**2, -1) + eps) * weight``.

    input: ``[rows, hidden]`` or ``[tokens, heads, head_dim]`` (per-head, qk-norm), fp16 or
    bf16, last dimension contiguous, rows a multiple of 8 elements apart; hidden a multiple
    of 8 in [8, 32768]. weight: ``[hidden]``, same dtype. fp32 accumulation. ``out`` may be
    ``input`` (in place).
    """
    return _normalize(input, weight, eps, out, gemma=False)


def fused_add_rmsnorm(input: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor,
                      eps: float = 1e-6) -> None:
    """In place: ``residual += input``, then ``input = rmsnorm(residual) * weight``."""
    launch_norm("rms", input, weight, None, input, require_tensor("residual", residual), eps, False)


def gemma_rmsnorm(input: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6,
                  out: torch.Tensor | None = None) -> torch.Tensor:
    """Gemma's RMSNorm: like :func:`rmsnorm` with the weight applied as ``1 + weight``."""
    return _normalize(input, weight, eps, out, gemma=True)


def gemma_fused_add_rmsnorm(input: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor,
                            eps: float = 1e-6) -> None:
    """Gemma's fused add + RMSNorm, in place (weight applied as ``1 + weight``)."""
    launch_norm("rms", input, weight, None, input, require_tensor("residual", residual), eps, True)
