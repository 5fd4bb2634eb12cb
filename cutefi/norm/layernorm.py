"""LayerNorm (FlashInfer's ``layernorm``): 16-bit input, fp32 gamma and beta.

Same CuTe DSL kernel as RMSNorm (``norm_kernel.py``, kind "layer"): the row stays in
registers, so mean and variance are two exact passes over registers, one read of the input.
"""

from __future__ import annotations

import torch

from .._checks import require_tensor
from .common import launch_norm


def layernorm(input: torch.Tensor, gemma: torch.Tensor, beta: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """``(input - mean) / sqrt(var + eps) * gemma + beta`` over the last dimension.

    input: ``[rows, hidden]`` fp16 or bf16, last dimension contiguous, rows a multiple of 8
    elements apart; hidden a multiple of 8 in [8, 32768]. gemma (gamma, FlashInfer's name) and
    beta: fp32 ``[hidden]``. Returns a new tensor with the input's dtype and shape.
    """
    require_tensor("input", input)
    if input.dim() != 2:
        raise ValueError(f"input must be 2-D [rows, hidden]; got shape {tuple(input.shape)}")
    out = torch.empty_like(input, memory_format=torch.contiguous_format)
    launch_norm("layer", input, gemma, require_tensor("beta", beta), out, None, eps, False, weight_name="gamma")
    return out
