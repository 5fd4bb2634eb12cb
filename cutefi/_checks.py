"""Input checks shared by the public ops: each failure names the argument and what is accepted."""

from __future__ import annotations

from typing import Iterable

import torch


def require_tensor(name: str, value: object) -> torch.Tensor:
    if not isinstance(value, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(value).__name__}")
    return value


def require_cuda(name: str, tensor: torch.Tensor) -> int:
    """The CUDA device index of ``tensor``; raises for CPU (or other) tensors."""
    require_tensor(name, tensor)
    if not tensor.is_cuda:
        raise ValueError(f"{name} must be on a CUDA device, got {tensor.device}")
    return tensor.get_device()


def require_dtype(name: str, tensor: torch.Tensor, accepted: Iterable[torch.dtype]) -> None:
    accepted = tuple(accepted)
    if tensor.dtype not in accepted:
        names = ", ".join(str(d).replace("torch.", "") for d in accepted)
        raise TypeError(f"{name} must have dtype {names}; got {str(tensor.dtype).replace('torch.', '')}")


def require_contiguous(name: str, tensor: torch.Tensor) -> None:
    if not tensor.is_contiguous():
        raise ValueError(f"{name} must be contiguous (got strides {tuple(tensor.stride())}); call .contiguous()")


def require_aligned(name: str, tensor: torch.Tensor, alignment: int = 16) -> None:
    if tensor.data_ptr() % alignment:
        raise ValueError(f"{name} must start at a {alignment}-byte aligned address (a view at an odd offset?)")


def require_same_device(*named: tuple[str, torch.Tensor]) -> None:
    first = named[0][1].get_device()
    if any(tensor.get_device() != first for _, tensor in named[1:]):
        listed = ", ".join(f"{name} on {tensor.device}" for name, tensor in named)
        raise ValueError(f"tensors must be on one device: {listed}")

