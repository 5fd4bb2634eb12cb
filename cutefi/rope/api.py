"""Rotary position embeddings: FlashInfer's RoPE API on the CuTe DSL kernel (``rope_kernel.py``).

q and k are ragged ``[nnz, heads, head_dim]`` fp16/bf16 tensors (any token and head stride
that is a multiple of 8 elements, e.g. views into a fused qkv buffer); both are rotated in one
launch. Positions come from ``pos_ids``, from a ragged batch (``indptr``, ``offsets``), or, for
``apply_rope_with_cos_sin_cache``, index a precomputed fp32 cos|sin cache.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch

from .._checks import require_cuda, require_dtype, require_same_device, require_tensor
from .._plans import PlanCache, signature
from ..dtypes import name_of
from ..jit.loader import Kernel
from ..jit.lookup import get_kernel
from . import launch

_INPUT_DTYPES = (torch.bfloat16, torch.float16)
_INDEX_DTYPES = (torch.int32, torch.int64)
_I32_MAX = 2**31 - 1


def _check_heads(name: str, tensor: torch.Tensor) -> None:
    require_tensor(name, tensor)
    if tensor.dim() != 3:
        raise ValueError(f"{name} must be 3-D [nnz, heads, head_dim]; got shape {tuple(tensor.shape)}")
    if tensor.shape[1] and tensor.shape[0] and tensor.stride(2) != 1:
        raise ValueError(f"{name} must be contiguous in head_dim; got strides {tuple(tensor.stride())}")
    if any(_stride(tensor, d) % launch.VEC for d in (0, 1)) or tensor.data_ptr() % 16:
        raise ValueError(f"{name} needs 16-byte aligned rows: token and head strides a multiple of 8 "
                         f"elements and a 16-byte aligned start; got strides {tuple(tensor.stride())}")


def _stride(tensor: torch.Tensor, dim: int) -> int:
    """The stride the kernel sees: 0 for a dimension of size 1 (its stride is arbitrary in torch)."""
    return tensor.stride(dim) if tensor.shape[dim] > 1 else 0


def _check_index(name: str, tensor: torch.Tensor, length: int | None) -> None:
    require_tensor(name, tensor)
    if tensor.dtype not in _INDEX_DTYPES:
        require_dtype(name, tensor, _INDEX_DTYPES)
    if tensor.dim() != 1 or (length is not None and tensor.shape[0] != length):
        want = f"[{length}]" if length is not None else "1-D"
        raise ValueError(f"{name} must be {want}; got shape {tuple(tensor.shape)}")
    if tensor.stride(0) != 1 and tensor.shape[0] > 1:
        raise ValueError(f"{name} must be contiguous")


class _Plan(NamedTuple):
    kernel: Kernel | None  # None: nothing to do
    device: int
    grid: tuple[int, int, int]
    sizes: dict[str, int]  # nnz, batch, heads, head_dim, rotary_dim, heads_per_cta, strides


_PLANS = PlanCache()


def _launch(q: torch.Tensor, k: torch.Tensor, q_out: torch.Tensor, k_out: torch.Tensor, positions: str,
            pos: torch.Tensor, offsets: torch.Tensor | None, cache: torch.Tensor | None,
            rotary_dim: int | None, interleave: bool, scalars: tuple[float, float, float, float],
            names: tuple[str, str] = ("q", "k")) -> None:
    try:
        key = (positions, rotary_dim, bool(interleave), names, signature(q), signature(k), signature(pos),
               q_out is q or signature(q_out), k_out is k or signature(k_out), signature(offsets),
               signature(cache))
    except AttributeError:  # not tensors: the full check names the argument
        key = None
    plan = _PLANS.get(key)
    if plan is None:
        plan = _PLANS.put(key, _check_and_plan(q, k, q_out, k_out, positions, pos, offsets, cache, rotary_dim,
                                               interleave, names))
    if plan.kernel is None:
        return
    pointers = (q.data_ptr(), k.data_ptr(), q_out.data_ptr(), k_out.data_ptr())
    if (pointers[0] | pointers[1] | pointers[2] | pointers[3]) & 15:
        _check_and_plan(q, k, q_out, k_out, positions, pos, offsets, cache, rotary_dim, interleave, names)
    pos_ptr = pos.data_ptr()
    rcp_scale, log2_theta, smooth_a, smooth_b = scalars
    plan.kernel.launch(plan.grid, plan.device, q=pointers[0], k=pointers[1], q_out=pointers[2], k_out=pointers[3],
                       pos=pos_ptr, offsets=offsets.data_ptr() if offsets is not None else pos_ptr,
                       cos_sin_cache=cache.data_ptr() if cache is not None else pos_ptr, **plan.sizes,
                       rcp_scale=rcp_scale, log2_theta=log2_theta, smooth_a=smooth_a, smooth_b=smooth_b)


def _check_and_plan(q: torch.Tensor, k: torch.Tensor, q_out: torch.Tensor, k_out: torch.Tensor, positions: str,
                    pos: torch.Tensor, offsets: torch.Tensor | None, cache: torch.Tensor | None,
                    rotary_dim: int | None, interleave: bool, names: tuple[str, str]) -> _Plan:
    q_name, k_name = names
    device = require_cuda(q_name, q)
    _check_heads(q_name, q)
    _check_heads(k_name, k)
    if q.dtype not in _INPUT_DTYPES:
        require_dtype(q_name, q, _INPUT_DTYPES)
    if k.dtype != q.dtype:
        raise TypeError(f"{k_name} dtype {k.dtype} must match {q_name} dtype {q.dtype}")
    nnz, num_q_heads, head_dim = q.shape
    num_k_heads = k.shape[1]
    if k.shape[0] != nnz or k.shape[2] != head_dim:
        raise ValueError(f"{q_name} {tuple(q.shape)} and {k_name} {tuple(k.shape)} must agree on nnz and head_dim")
    if head_dim % launch.SLOT or not launch.SLOT <= head_dim <= launch.MAX_HEAD_DIM:
        raise ValueError(f"head_dim must be a multiple of 16 in [16, {launch.MAX_HEAD_DIM}]; got {head_dim}")
    rotary_dim = head_dim if rotary_dim is None else rotary_dim
    if not isinstance(rotary_dim, int) or rotary_dim % launch.SLOT or not 0 < rotary_dim <= head_dim:
        raise ValueError(f"rotary_dim must be a multiple of 16 in [16, head_dim={head_dim}]; got {rotary_dim}")
    heads = num_q_heads + num_k_heads
    if nnz > _I32_MAX // max(1, heads):
        raise ValueError(f"too many tokens: {nnz}")
    named = [(q_name, q), (k_name, k), ("positions" if positions == "cache" else "pos_ids", pos)]
    named += [("offsets", offsets)] if offsets is not None else []
    named += [("cos_sin_cache", cache)] if cache is not None else []
    named += [("output", t) for t, src in ((q_out, q), (k_out, k)) if t is not src]
    require_same_device(*named)
    for out, src in ((q_out, q), (k_out, k)):
        if out is not src:
            _check_heads("output", out)
    batch = 0
    if positions == "indptr":
        batch = pos.shape[0] - 1
        if batch < 1 and nnz:
            raise ValueError("indptr must hold at least one request ([batch + 1] entries, batch >= 1)")
    elif positions == "cache":
        batch = cache.shape[0]
    if nnz == 0 or heads == 0:
        return _Plan(None, device, (0, 0, 0), {})
    spec = launch.ROPE_SPECS[(name_of(q.dtype), positions, name_of(pos.dtype), bool(interleave))]
    heads_per_cta = launch.pick_heads_per_cta(nnz, head_dim, heads)
    sizes = dict(nnz=nnz, batch=batch, num_q_heads=num_q_heads, num_k_heads=num_k_heads, head_dim=head_dim,
                 rotary_dim=rotary_dim, heads_per_cta=heads_per_cta,
                 **dict(zip(launch.STRIDES, (_stride(t, d) for t in (q, k, q_out, k_out) for d in (0, 1)))),
                 cache_row_stride=cache.stride(0) if cache is not None else 0)
    kernel = get_kernel(spec, device)
    return _Plan(kernel, device, kernel.contract.grid(sizes), sizes)


def _rope_scalars(rope_scale: float, rope_theta: float) -> tuple[float, float, float, float]:
    if rope_scale <= 0 or rope_theta <= 1:
        raise ValueError(f"rope_scale must be > 0 and rope_theta > 1; got {rope_scale}, {rope_theta}")
    return 1.0 / rope_scale, math.log2(rope_theta), 0.0, 0.0


def _llama31_scalars(rope_scale: float, rope_theta: float, low_freq_factor: float, high_freq_factor: float,
                     old_context_len: float) -> tuple[float, float, float, float]:
    rcp_scale, log2_theta, _, _ = _rope_scalars(rope_scale, rope_theta)
    if not 0 < low_freq_factor < high_freq_factor or old_context_len <= 0:
        raise ValueError("llama31 RoPE needs 0 < low_freq_factor < high_freq_factor and old_context_len > 0; "
                         f"got {low_freq_factor}, {high_freq_factor}, {old_context_len}")
    smooth_a = old_context_len / (2 * math.pi * high_freq_factor - 2 * math.pi * low_freq_factor)
    smooth_b = -1.0 / (high_freq_factor / low_freq_factor - 1.0)
    return rcp_scale, log2_theta, smooth_a, smooth_b


def _outputs(q: torch.Tensor, k: torch.Tensor, inplace: bool) -> tuple[torch.Tensor, torch.Tensor]:
    if inplace:
        return q, k
    # empty_like with an explicit format: the cheapest allocation call (q may be a strided view)
    return (torch.empty_like(require_tensor("q", q), memory_format=torch.contiguous_format),
            torch.empty_like(require_tensor("k", k), memory_format=torch.contiguous_format))


def _ragged(q, k, indptr, offsets, rotary_dim, interleave, scalars, inplace):
    _check_index("indptr", indptr, None)
    _check_index("offsets", offsets, indptr.shape[0] - 1)
    if offsets.dtype != indptr.dtype:
        raise TypeError(f"offsets dtype {offsets.dtype} must match indptr dtype {indptr.dtype}")
    q_out, k_out = _outputs(q, k, inplace)
    _launch(q, k, q_out, k_out, "indptr", indptr, offsets, None, rotary_dim, interleave, scalars)
    return None if inplace else (q_out, k_out)


def _by_pos_ids(q, k, pos_ids, rotary_dim, interleave, scalars, inplace):
    _check_index("pos_ids", pos_ids, require_tensor("q", q).shape[0])
    q_out, k_out = _outputs(q, k, inplace)
    _launch(q, k, q_out, k_out, "pos_ids", pos_ids, None, None, rotary_dim, interleave, scalars)
    return None if inplace else (q_out, k_out)


def apply_rope(q, k, indptr, offsets, rotary_dim=None, interleave=False, rope_scale=1.0, rope_theta=1e4):
    """RoPE on a ragged batch; token ``i`` of request ``b`` sits at ``offsets[b] + i - indptr[b]``.

    Returns new ``(q_rope, k_rope)``. indptr ``[batch + 1]`` and offsets ``[batch]``: int32 or int64.
    """
    return _ragged(q, k, indptr, offsets, rotary_dim, interleave, _rope_scalars(rope_scale, rope_theta), False)


def apply_rope_inplace(q, k, indptr, offsets, rotary_dim=None, interleave=False, rope_scale=1.0, rope_theta=1e4):
    """In-place :func:`apply_rope`."""
    return _ragged(q, k, indptr, offsets, rotary_dim, interleave, _rope_scalars(rope_scale, rope_theta), True)


def apply_rope_pos_ids(q, k, pos_ids, rotary_dim=None, interleave=False, rope_scale=1.0, rope_theta=1e4):
    """RoPE with one position per token (``pos_ids`` ``[nnz]``, int32 or int64). Returns new (q, k)."""
    return _by_pos_ids(q, k, pos_ids, rotary_dim, interleave, _rope_scalars(rope_scale, rope_theta), False)


def apply_rope_pos_ids_inplace(q, k, pos_ids, rotary_dim=None, interleave=False, rope_scale=1.0,
                               rope_theta=1e4):
    """In-place :func:`apply_rope_pos_ids`."""
    return _by_pos_ids(q, k, pos_ids, rotary_dim, interleave, _rope_scalars(rope_scale, rope_theta), True)


def apply_llama31_rope(q, k, indptr, offsets, rotary_dim=None, interleave=False, rope_scale=8, rope_theta=5e5,
                       low_freq_factor=1, high_freq_factor=4, old_context_len=8192):
    """Llama 3.1 RoPE (frequency-band scaling) on a ragged batch. Returns new (q, k)."""
    scalars = _llama31_scalars(rope_scale, rope_theta, low_freq_factor, high_freq_factor, old_context_len)
    return _ragged(q, k, indptr, offsets, rotary_dim, interleave, scalars, False)


def apply_llama31_rope_inplace(q, k, indptr, offsets, rotary_dim=None, interleave=False, rope_scale=8,
                               rope_theta=5e5, low_freq_factor=1, high_freq_factor=4, old_context_len=8192):
    """In-place :func:`apply_llama31_rope`."""
    scalars = _llama31_scalars(rope_scale, rope_theta, low_freq_factor, high_freq_factor, old_context_len)
    return _ragged(q, k, indptr, offsets, rotary_dim, interleave, scalars, True)


def apply_llama31_rope_pos_ids(q, k, pos_ids, rotary_dim=None, interleave=False, rope_scale=8, rope_theta=5e5,
                               low_freq_factor=1, high_freq_factor=4, old_context_len=8192):
    """Llama 3.1 RoPE with one position per token. Returns new (q, k)."""
    scalars = _llama31_scalars(rope_scale, rope_theta, low_freq_factor, high_freq_factor, old_context_len)
    return _by_pos_ids(q, k, pos_ids, rotary_dim, interleave, scalars, False)


def apply_llama31_rope_pos_ids_inplace(q, k, pos_ids, rotary_dim=None, interleave=False, rope_scale=8,
                                       rope_theta=5e5, low_freq_factor=1, high_freq_factor=4,
                                       old_context_len=8192):
    """In-place :func:`apply_llama31_rope_pos_ids`."""
    scalars = _llama31_scalars(rope_scale, rope_theta, low_freq_factor, high_freq_factor, old_context_len)
    return _by_pos_ids(q, k, pos_ids, rotary_dim, interleave, scalars, True)


def _with_cache(positions, query, key, head_size, cos_sin_cache, is_neox, inplace):
    require_tensor("query", query)
    require_tensor("key", key)
    require_tensor("cos_sin_cache", cos_sin_cache)
    if cos_sin_cache.dtype != torch.float32:
        raise TypeError(f"cos_sin_cache must be float32 [max_position, rotary_dim]; got {cos_sin_cache.dtype}")
    if cos_sin_cache.dim() != 2 or cos_sin_cache.stride(1) != 1 or cos_sin_cache.stride(0) % 4 \
            or cos_sin_cache.data_ptr() % 16:
        raise ValueError("cos_sin_cache must be 2-D [max_position, rotary_dim] with contiguous, 16-byte "
                         f"aligned rows; got shape {tuple(cos_sin_cache.shape)} strides {tuple(cos_sin_cache.stride())}")
    if cos_sin_cache.shape[0] < 1:
        raise ValueError("cos_sin_cache has no rows")
    _check_index("positions", positions, query.shape[0] if query.dim() else None)

    def heads(name, tensor):
        if tensor.dim() == 3 and tensor.shape[2] == head_size:
            return tensor
        if tensor.dim() == 2 and head_size > 0 and tensor.shape[1] % head_size == 0 and tensor.stride(-1) == 1:
            return tensor.view(tensor.shape[0], tensor.shape[1] // head_size, head_size)
        raise ValueError(f"{name} must be [nnz, heads * head_size] or [nnz, heads, head_size] with "
                         f"head_size={head_size}; got shape {tuple(tensor.shape)}")

    q, k = heads("query", query), heads("key", key)
    if inplace:
        q_out, k_out, result = q, k, None
    else:
        query_out = torch.empty_like(query, memory_format=torch.contiguous_format)
        key_out = torch.empty_like(key, memory_format=torch.contiguous_format)
        q_out, k_out, result = heads("query", query_out), heads("key", key_out), (query_out, key_out)
    _launch(q, k, q_out, k_out, "cache", positions, None, cos_sin_cache, cos_sin_cache.shape[1],
            not is_neox, (1.0, 0.0, 0.0, 0.0), names=("query", "key"))
    return result


def apply_rope_with_cos_sin_cache(positions, query, key, head_size, cos_sin_cache, is_neox=True):
    """vLLM/SGLang-style RoPE from a precomputed fp32 cache (row p = ``cat(cos, sin)`` of width
    rotary_dim). query/key ``[nnz, heads * head_size]`` (or 3-D). Returns new (query, key)."""
    return _with_cache(positions, query, key, head_size, cos_sin_cache, is_neox, False)


def apply_rope_with_cos_sin_cache_inplace(positions, query, key, head_size, cos_sin_cache, is_neox=True):
    """In-place :func:`apply_rope_with_cos_sin_cache`."""
    return _with_cache(positions, query, key, head_size, cos_sin_cache, is_neox, True)
