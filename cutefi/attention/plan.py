"""Argument checks and launch plans of the attention family's kernels: the attention-state
merges (``merge_kernel.py``) and the paged-KV append (``append_kernel.py``).

Every merge is put in one form for the kernel: ``states`` partial outputs of each (position,
head) row, reached from one base pointer with strides per position, state and head (two
separate tensors of ``merge_state`` are one stack whose state stride is the distance between
them), merged into ``v_out``/``s_out``. The kernel moves 128-bit pieces, so rows of ``v``
tensors must start on 16-byte boundaries: ``head_dim`` a multiple of 8 (refused otherwise,
as FlashInfer does), and strides a multiple of 8 elements with 16-byte aligned pointers;
tensors laid out otherwise are merged through contiguous copies ("staged"). Appends move
16-byte pieces too: cache rows must be 16-byte aligned (refused otherwise; caches are not
copied), appended rows that are not go through copies.
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from .._checks import require_cuda, require_dtype, require_same_device, require_tensor
from ..dtypes import name_of
from ..jit.contract import ceil_div
from ..jit.driver import device_info
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


# ---- append_paged_kv_cache ---------------------------------------------------------------------
KV_LAYOUTS = ("NHD", "HND")


class AppendPlan(NamedTuple):
    kernel: Kernel | None  # None: nothing to append
    device: int
    grid: tuple[int, int, int]
    sizes: dict[str, int]


def split_cache(paged_kv_cache: object, kv_layout: str | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """(k_cache, v_cache) from a (k, v) pair or one ``[pages, 2, ...]`` tensor. With the
    ``kv_layout``, FlashInfer's page-size-1 forms too: a pair of 3-D ``[slots, heads, head_dim]``
    tensors or one 4-D ``[slots, 2, heads, head_dim]`` tensor, viewed with the page dimension
    (size 1) where the layout has it (SGLang's token-granular cache)."""
    if isinstance(paged_kv_cache, (tuple, list)) and len(paged_kv_cache) == 2:
        k_cache, v_cache = paged_kv_cache
        require_tensor("paged_kv_cache[0]", k_cache)
        require_tensor("paged_kv_cache[1]", v_cache)
        if kv_layout is not None and k_cache.dim() == 3 and v_cache.dim() == 3:
            page_dim = -3 if kv_layout == "NHD" else -2
            return k_cache.unsqueeze(page_dim), v_cache.unsqueeze(page_dim)
        return k_cache, v_cache
    if isinstance(paged_kv_cache, torch.Tensor) and paged_kv_cache.dim() == 5 and paged_kv_cache.shape[1] == 2:
        return paged_kv_cache[:, 0], paged_kv_cache[:, 1]
    if isinstance(paged_kv_cache, torch.Tensor) and kv_layout is not None and paged_kv_cache.dim() == 4 and \
            paged_kv_cache.shape[1] == 2:
        pages = paged_kv_cache.unsqueeze(-3 if kv_layout == "NHD" else -2)
        return pages[:, 0], pages[:, 1]
    raise TypeError("paged_kv_cache must be a (k_cache, v_cache) pair of 4-D tensors (3-D with page size 1) or one "
                    f"5-D tensor [pages, 2, ...] (4-D with page size 1); got {type(paged_kv_cache).__name__}"
                    + (f" of shape {tuple(paged_kv_cache.shape)}" if isinstance(paged_kv_cache, torch.Tensor) else ""))


def check_i32(name: str, tensor: object, length: int | None = None) -> torch.Tensor:
    if type(tensor) is torch.Tensor and tensor.dtype is torch.int32 and tensor.dim() == 1 and \
            (length is None or tensor.shape[0] == length):  # the common case (decode plan's hot path)
        return tensor
    require_tensor(name, tensor)
    if tensor.dtype != torch.int32:
        raise TypeError(f"{name} must be int32; got {str(tensor.dtype).replace('torch.', '')}")
    if tensor.dim() != 1 or (length is not None and tensor.shape[0] != length):
        raise ValueError(f"{name} must be 1-D{f' [{length}]' if length is not None else ''}; "
                         f"got shape {tuple(tensor.shape)}")
    return tensor


def plan_append(key: torch.Tensor, value: torch.Tensor, batch_indices: torch.Tensor, positions: torch.Tensor,
                k_cache: torch.Tensor, v_cache: torch.Tensor, kv_indices: torch.Tensor, kv_indptr: torch.Tensor,
                kv_last_page_len: torch.Tensor, kv_layout: str) -> AppendPlan:
    """``append_paged_kv_cache``'s plan; ``kv_layout`` "MLA": ``append_paged_mla_kv_cache``'s
    (key, value, caches: the compressed kv and rope rows [nnz, dim], caches [pages, page_size, dim])."""
    if kv_layout == "MLA":
        return _plan_append_mla(key, value, batch_indices, positions, k_cache, v_cache, kv_indices, kv_indptr,
                                kv_last_page_len)
    if kv_layout not in KV_LAYOUTS:
        raise ValueError(f"kv_layout must be 'NHD' or 'HND'; got {kv_layout!r}")
    for name, t in (("append_key", key), ("append_value", value)):
        require_tensor(name, t)
        if t.dim() != 3:
            raise ValueError(f"{name} must be 3-D [nnz, num_kv_heads, head_dim]; got shape {tuple(t.shape)}")
    if value.shape != key.shape or value.dtype != key.dtype:
        raise ValueError(f"append_value {tuple(value.shape)} {value.dtype} must match append_key "
                         f"{tuple(key.shape)} {key.dtype}")
    nnz, heads, head_dim = key.shape
    for name, cache in (("k_cache", k_cache), ("v_cache", v_cache)):
        if cache.dim() != 4:
            raise ValueError(f"{name} must be 4-D ({'[pages, page_size, heads, head_dim]' if kv_layout == 'NHD' else '[pages, heads, page_size, head_dim]'}); "
                             f"got shape {tuple(cache.shape)}")
        if cache.dtype != key.dtype:
            raise TypeError(f"{name} dtype {cache.dtype} must match append_key dtype {key.dtype}")
    if v_cache.shape != k_cache.shape:
        raise ValueError(f"k_cache and v_cache must have one shape; got {tuple(k_cache.shape)} and "
                         f"{tuple(v_cache.shape)}")
    entry_dim, head_dim_index = (1, 2) if kv_layout == "NHD" else (2, 1)
    if k_cache.shape[head_dim_index] != heads or k_cache.shape[3] != head_dim:
        raise ValueError(f"paged_kv_cache ({kv_layout}) {tuple(k_cache.shape)} must hold {heads} heads of "
                         f"head_dim {head_dim}, as append_key {tuple(key.shape)}")
    size = key.element_size()
    if (head_dim * size) % 16:
        raise ValueError(f"a row of head_dim {head_dim} ({head_dim * size} bytes) must be a multiple of 16 bytes")
    for name, cache in (("k_cache", k_cache), ("v_cache", v_cache)):
        _check_cache_rows(name, cache, size)
    order = (0, entry_dim, head_dim_index)  # (page, entry, head)
    return _append_plan(key, value, k_cache.permute(*order, 3), v_cache.permute(*order, 3), batch_indices, positions,
                        kv_indices, kv_indptr, kv_last_page_len, "append_key")


def _plan_append_mla(ckv: torch.Tensor, kpe: torch.Tensor, batch_indices: torch.Tensor, positions: torch.Tensor,
                     ckv_cache: torch.Tensor, kpe_cache: torch.Tensor, kv_indices: torch.Tensor,
                     kv_indptr: torch.Tensor, kv_last_page_len: torch.Tensor) -> AppendPlan:
    """Two row sets of one head: the compressed kv into ckv_cache, its rope part into kpe_cache."""
    for name, t in (("append_ckv", ckv), ("append_kpe", kpe)):
        require_tensor(name, t)
        if t.dim() != 2:
            raise ValueError(f"{name} must be 2-D [nnz, dim]; got shape {tuple(t.shape)}")
    if kpe.shape[0] != ckv.shape[0] or kpe.dtype != ckv.dtype:
        raise ValueError(f"append_kpe {tuple(kpe.shape)} {kpe.dtype} must have append_ckv's nnz and dtype "
                         f"({tuple(ckv.shape)} {ckv.dtype})")
    for name, cache, rows in (("ckv_cache", ckv_cache, ckv), ("kpe_cache", kpe_cache, kpe)):
        require_tensor(name, cache)
        if cache.dim() != 3 or cache.shape[2] != rows.shape[1]:
            raise ValueError(f"{name} must be [pages, page_size, {rows.shape[1]}]; got shape {tuple(cache.shape)}")
        if cache.dtype != ckv.dtype:
            raise TypeError(f"{name} dtype {cache.dtype} must match append_ckv dtype {ckv.dtype}")
        if (rows.shape[1] * rows.element_size()) % 16:
            raise ValueError(f"a row of {name} ({rows.shape[1]} elements) must be a multiple of 16 bytes")
        _check_cache_rows(name, cache, ckv.element_size())
    if kpe_cache.shape[:2] != ckv_cache.shape[:2]:
        raise ValueError(f"ckv_cache {tuple(ckv_cache.shape)} and kpe_cache {tuple(kpe_cache.shape)} must have the "
                         "same pages and page size")
    return _append_plan(ckv.unsqueeze(1), kpe.unsqueeze(1), ckv_cache.unsqueeze(2), kpe_cache.unsqueeze(2),
                        batch_indices, positions, kv_indices, kv_indptr, kv_last_page_len, "append_ckv")


def _check_cache_rows(name: str, cache: torch.Tensor, size: int) -> None:
    if cache.numel() and (cache.stride(-1) != 1 or any((_stride(cache, d) * size) % 16 for d in range(cache.dim() - 1))
                          or cache.data_ptr() % 16):
        raise ValueError(f"{name} rows must start on 16-byte boundaries (contiguous head_dim, strides in "
                         f"multiples of 16 bytes); got strides {cache.stride()}")


def _append_plan(key: torch.Tensor, value: torch.Tensor, k_pages: torch.Tensor, v_pages: torch.Tensor,
                 batch_indices: torch.Tensor, positions: torch.Tensor, kv_indices: torch.Tensor,
                 kv_indptr: torch.Tensor, kv_last_page_len: torch.Tensor, first_name: str) -> AppendPlan:
    """The indices' checks and the kernel's sizes: rows [nnz, heads, dim] and caches viewed as
    [pages, page_size, heads, dim] (page, entry, head strides in that order)."""
    nnz, heads = key.shape[:2]
    num_pages, page_size = k_pages.shape[:2]
    check_i32("batch_indices", batch_indices, nnz)
    check_i32("positions", positions, nnz)
    check_i32("kv_indices", kv_indices, None)
    check_i32("kv_indptr", kv_indptr, None)
    if kv_indptr.shape[0] < 1:
        raise ValueError("kv_indptr must have batch + 1 >= 1 entries")
    batch = kv_indptr.shape[0] - 1
    check_i32("kv_last_page_len", kv_last_page_len, batch)
    named = [("batch_indices", batch_indices), ("positions", positions), ("kv_indices", kv_indices),
             ("kv_indptr", kv_indptr), ("kv_last_page_len", kv_last_page_len)]
    device = require_cuda(first_name, key)
    require_same_device((first_name, key), ("value rows", value), ("k cache", k_pages), ("v cache", v_pages), *named)
    if nnz > _I32_MAX or num_pages > _I32_MAX:
        raise ValueError(f"nnz ({nnz}) and pages ({num_pages}) must each be at most {_I32_MAX}")
    size = key.element_size()
    k_chunks, v_chunks = key.shape[2] * size // 16, value.shape[2] * size // 16
    cache_strides = [_stride(t, d) * size for t in (k_pages, v_pages) for d in range(3)]
    token_pieces = heads * (k_chunks + v_chunks)
    sizes = dict(nnz=nnz, heads=heads, k_row_chunks=k_chunks, v_row_chunks=v_chunks, token_pieces=token_pieces,
                 row_pieces=heads * max(k_chunks, v_chunks), pieces_per_cta=launch.APPEND_THREADS, page_size=page_size,
                 batch=batch,
                 num_indices=kv_indices.shape[0], num_pages=num_pages, **append_row_strides(key, value),
                 **dict(zip(launch.APPEND_STRIDES[4:], cache_strides)))
    sizes |= launch.append_divisors(sizes)
    if nnz == 0 or heads == 0 or num_pages == 0 or batch == 0:
        return AppendPlan(None, device, (0, 0, 0), sizes)
    sms = device_info(device).sms
    pieces = nnz * token_pieces
    sizes["pieces_per_cta"] = launch.append_pieces_per_cta(pieces, sms)
    if ceil_div(pieces, sizes["pieces_per_cta"]) > _I32_MAX:
        raise ValueError(f"{first_name}: {nnz} tokens of {token_pieces} 16-byte pieces each are more than one "
                         "launch covers")
    kernel = get_kernel(launch.APPEND_SPECS[launch.append_by_rows(sizes, sms)], device)
    return AppendPlan(kernel, device, kernel.contract.grid(sizes), sizes)


def append_row_strides(key: torch.Tensor, value: torch.Tensor) -> dict[str, int]:
    """The appended rows' (token, head) strides in bytes (2-D MLA rows: head stride 0)."""
    size = key.element_size()
    rows = [key if key.dim() == 3 else key.unsqueeze(1), value if value.dim() == 3 else value.unsqueeze(1)]
    return dict(zip(launch.APPEND_STRIDES[:4], [_stride(t, d) * size for t in rows for d in (0, 1)]))


def append_rows_aligned(key: torch.Tensor, value: torch.Tensor) -> bool:
    """The appended rows start on 16-byte boundaries (else they are appended from copies)."""
    size = key.element_size()
    return not any((t.data_ptr() % 16) or any((t.stride(d) * size) % 16 for d in range(t.dim() - 1))
                   or (t.shape[-1] > 1 and t.stride(-1) != 1) for t in (key, value))
