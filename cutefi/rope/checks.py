"""Checks the RoPE family's API modules share (``api.py``, ``quant.py``): host-side only, so
no kernel's source key depends on them."""

from __future__ import annotations

import torch

from .._checks import require_dtype, require_tensor

INDEX_DTYPES = (torch.int32, torch.int64)


def stride(tensor: torch.Tensor, dim: int) -> int:
    """The stride the kernel sees: 0 for a dimension of size 1 (its stride is arbitrary in torch)."""
    return tensor.stride(dim) if tensor.shape[dim] > 1 else 0


def check_positions(name: str, tensor: torch.Tensor, nnz: int) -> None:
    """One position a token: FlashInfer reads the first ``nnz`` entries of any contiguous index
    tensor (``[nnz]``, a padded CUDA-graph buffer, ``[1, nnz]``), and so does cutefi's kernel."""
    require_tensor(name, tensor)
    if tensor.dtype not in INDEX_DTYPES:
        require_dtype(name, tensor, INDEX_DTYPES)
    if tensor.numel() < nnz or not tensor.is_contiguous():
        raise ValueError(f"{name} must be a contiguous tensor of at least nnz = {nnz} positions (one a token, "
                         f"e.g. [nnz]); got shape {tuple(tensor.shape)} strides {tuple(tensor.stride())}")
