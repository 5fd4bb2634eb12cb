"""Argument checks and launch plans of the attention-state merges (``merge_kernel.py``).

Every merge is put in one form for the kernel: ``states`` partial outputs of each (position,
head) row, reached from one base pointer with strides per position, state and head (two
separate tensors of ``merge_state`` are one stack whose state stride is the distance between
them), merged into ``v_out``/``s_out``. The kernel moves 128-bit pieces, so rows of ``v``
tensors must start on 16-byte boundaries: ``head_dim`` a multiple of 8 (refused otherwise,
as FlashInfer does), and strides a multiple of 8 elements with 16-byte aligned pointers;
tensors laid out otherwise are merged through contiguous copies ("staged").
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from .._checks import require_cuda, require_dtype, require_same_device, require_tensor
from ..dtypes import name_of
from ..jit.loader import Kernel
from ..jit.lookup import get_kernel
from . import launch

V_DTYPES = (torch.bfloat16, torch.float16)
MASK_DTYPES = (torch.bool, torch.uint8)
_I32_MAX = 2**31 - 1


class MergePlan(NamedTuple):
    kernel: Kernel | None  # None: nothing to launch (empty), or ``staged``
    device: int
    grid: tuple[int, int, int]
    sizes: dict[str, int]  # seq_len, states, heads, head_dim, the (position, head) strides
    staged: bool  # some v layout is not 16-byte aligned: merge contiguous copies


def check_v(name: str, v: torch.Tensor, dims: int) -> None:
    require_tensor(name, v)
    shape = "[seq_len, num_states, num_heads, head_dim]" if dims == 4 else "[seq_len, num_heads, head_dim]"
    if v.dim() != dims:
        raise ValueError(f"{name} must be {dims}-D {shape}; got shape {tuple(v.shape)}")
    if v.dtype not in V_DTYPES:
        require_dtype(name, v, V_DTYPES)
    head_dim = v.shape[-1]
    if head_dim % launch.VEC or not launch.VEC <= head_dim <= launch.MAX_HEAD_DIM:
        raise ValueError(f"{name}: head_dim must be a multiple of 8 in [8, {launch.MAX_HEAD_DIM}]; got {head_dim}")
    if v.numel() and v.stride(-1) != 1:
        raise ValueError(f"{name} must be contiguous in head_dim; got strides {tuple(v.stride())}")


def check_s(name: str, s: torch.Tensor, v_name: str, v: torch.Tensor) -> None:
    require_tensor(name, s)
    if s.dtype != torch.float32:
        raise TypeError(f"{name} (log-sum-exp, base 2) must be float32; got {str(s.dtype).replace('torch.', '')}")
    if tuple(s.shape) != tuple(v.shape[:-1]):
        raise ValueError(f"{name} must have shape {tuple(v.shape[:-1])} ({v_name}'s without head_dim); "
                         f"got {tuple(s.shape)}")


def check_pair(a_name: str, a: torch.Tensor, b_name: str, b: torch.Tensor) -> None:
    if b.dtype != a.dtype:
        raise TypeError(f"{b_name} dtype {b.dtype} must match {a_name} dtype {a.dtype}")
    if b.shape != a.shape:
        raise ValueError(f"{b_name} shape {tuple(b.shape)} must match {a_name} shape {tuple(a.shape)}")


def check_mask(mask: torch.Tensor, seq_len: int) -> None:
    require_tensor("mask", mask)
    if mask.dtype not in MASK_DTYPES:
        require_dtype("mask", mask, MASK_DTYPES)
    if mask.dim() != 1 or mask.shape[0] != seq_len:
        raise ValueError(f"mask must be [seq_len] = [{seq_len}]; got shape {tuple(mask.shape)}")


def _stride(t: torch.Tensor, dim: int) -> int:
    return t.stride(dim) if t.shape[dim] > 1 else 0  # a size-1 dimension's stride is arbitrary


def rows_aligned(*tensors: torch.Tensor) -> bool:
    """Every row of every ``v`` tensor starts on a 16-byte boundary (strides in elements)."""
    for t in tensors:
        if t.data_ptr() % 16 or any(_stride(t, d) % launch.VEC for d in range(t.dim() - 1)):
            return False
    return True


def plan_merge(v: torch.Tensor, s: torch.Tensor, v_out: torch.Tensor, s_out: torch.Tensor, stacked: bool,
               named: list[tuple[str, torch.Tensor]], staged: bool) -> MergePlan:
    """The launch of a merge whose states are ``v``'s dim 1 (``stacked``) or a pair (v, and
    another at a per-call distance); ``named`` are every tensor of the call (device check)."""
    device = require_cuda(named[0][0], named[0][1])
    require_same_device(*named)
    seq_len, heads, head_dim = v.shape[0], v.shape[-2], v.shape[-1]
    if seq_len * heads > _I32_MAX:
        raise ValueError(f"too many rows: seq_len * num_heads = {seq_len * heads} (at most {_I32_MAX})")
    lanes, chunks = launch.merge_shape(head_dim)
    sizes = dict(seq_len=seq_len, states=v.shape[1] if stacked else 2, heads=heads, head_dim=head_dim,
                 v_stride_pos=_stride(v, 0), v_stride_head=_stride(v, v.dim() - 2),
                 v_stride_state=_stride(v, 1) if stacked else 0,
                 s_stride_pos=_stride(s, 0), s_stride_head=_stride(s, s.dim() - 1),
                 s_stride_state=_stride(s, 1) if stacked else 0,
                 v_out_stride_pos=_stride(v_out, 0), v_out_stride_head=_stride(v_out, 1),
                 s_out_stride_pos=_stride(s_out, 0), s_out_stride_head=_stride(s_out, 1))
    if seq_len == 0 or heads == 0 or staged:
        return MergePlan(None, device, (0, 0, 0), sizes, staged and seq_len * heads > 0)
    spec = launch.MERGE_SPECS[(name_of(v.dtype), lanes, chunks, launch.states_in_flight(sizes["states"]))]
    kernel = get_kernel(spec, device)
    return MergePlan(kernel, device, kernel.contract.grid(sizes), sizes, False)
