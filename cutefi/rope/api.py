"""Rotary position embeddings: FlashInfer's RoPE API on the CuTe DSL kernel (``rope_kernel.py``).

q and k are ragged ``[nnz, heads, head_dim]`` fp16/bf16 tensors (any token and head stride
that is a multiple of 8 elements, e.g. views into a fused qkv buffer); both are rotated in one
launch. Positions come from ``pos_ids``, from a ragged batch (``indptr``, ``offsets``), or, for
``apply_rope_with_cos_sin_cache``, index a precomputed fp32 cos|sin cache.

Scalars: ``rotary_dim`` and ``head_size`` are ints (multiples of 16; an interleaved
``rotary_dim`` a multiple of 8; ``rotary_dim`` may be None), ``interleave`` and ``is_neox``
bools; ``rope_scale`` > 0, ``rope_theta`` > 1,
``0 < low_freq_factor < high_freq_factor`` and ``old_context_len`` > 0 are finite real numbers
(int, float or NumPy; not bool or str). Anything else is a TypeError or ValueError naming it.
"""

from __future__ import annotations

import math
import sys
from typing import NamedTuple

import torch

from .._checks import (F32_MAX, require_cuda, require_dtype, require_flag, require_int, require_real,
                       require_same_device, require_tensor)
from .._capability import declare
from .._library import compiling, define
from .._plans import PlanCache, signature
from ..dtypes import name_of
from ..jit.loader import Kernel
from ..jit.logs import api_log
from ..jit.lookup import get_kernel
from ..jit.policy import Family
from . import launch
from .checks import INDEX_DTYPES as _INDEX_DTYPES, check_positions as _check_positions, stride as _stride

_INPUT_DTYPES = (torch.bfloat16, torch.float16)
_I32_MAX = 2**31 - 1
_FAST_REALS = (int, float)  # scalar types the per-call checks take without the full check
_DBL_MAX = sys.float_info.max
_MIN_ROPE_SCALE = 1.0 / F32_MAX  # 1 / rope_scale goes to the kernel as a float32


def _check_heads(name: str, tensor: torch.Tensor) -> None:
    require_tensor(name, tensor)
    if tensor.dim() != 3:
        raise ValueError(f"{name} must be 3-D [nnz, heads, head_dim]; got shape {tuple(tensor.shape)}")
    if tensor.shape[1] and tensor.shape[0] and tensor.stride(2) != 1:
        raise ValueError(f"{name} must be contiguous in head_dim; got strides {tuple(tensor.stride())}")
    if any(_stride(tensor, d) % launch.VEC for d in (0, 1)) or tensor.data_ptr() % 16:
        raise ValueError(f"{name} needs 16-byte aligned rows: token and head strides a multiple of 8 "
                         f"elements and a 16-byte aligned start; got strides {tuple(tensor.stride())}")


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
    if (rotary_dim is not None and type(rotary_dim) is not int) or (interleave is not True and interleave is not False):
        rotary_dim, interleave = _check_rotary(rotary_dim, interleave)
    if compiling():  # torch.compile traces this: one cutefi op in the graph (see _library)
        return _record_op(q, k, q_out, k_out, positions, pos, offsets, cache, rotary_dim, interleave, scalars, names)
    try:
        key = (positions, rotary_dim, interleave, names, signature(q), signature(k), signature(pos),
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
    # types, dimensions, shapes and layouts first (CPU tensors reach these too); devices last
    q_name, k_name = names
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
    rotary_dim = head_dim if rotary_dim is None else rotary_dim  # an int: _launch checked it
    _check_rotary_dim("rotary_dim", rotary_dim, interleave, "head_dim", head_dim)
    for out, src in ((q_out, q), (k_out, k)):
        if out is not src:
            _check_heads("output", out)
    pos_name = {"pos_ids": "pos_ids", "indptr": "indptr", "cache": "positions"}[positions]
    batch = 0
    if positions == "indptr":
        _check_index("indptr", pos, None)
        batch = pos.shape[0] - 1
        _check_index("offsets", offsets, batch)
        if offsets.dtype != pos.dtype:
            raise TypeError(f"offsets dtype {offsets.dtype} must match indptr dtype {pos.dtype}")
        if batch < 1 and nnz:
            raise ValueError("indptr must hold at least one request ([batch + 1] entries, batch >= 1)")
    else:
        _check_positions(pos_name, pos, nnz)
        if positions == "cache":
            batch = cache.shape[0]
    heads = num_q_heads + num_k_heads
    if nnz > _I32_MAX // max(1, heads):
        raise ValueError(f"too many tokens: {nnz}")
    device = require_cuda(q_name, q)
    named = [(q_name, q), (k_name, k), (pos_name, pos)]
    named += [("offsets", offsets)] if offsets is not None else []
    named += [("cos_sin_cache", cache)] if cache is not None else []
    named += [("output", t) for t, src in ((q_out, q), (k_out, k)) if t is not src]
    require_same_device(*named)
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


def _check_rotary_dim(name: str, rotary_dim: int, interleave: bool, limit_name: str, limit: int) -> None:
    """Interleaved (GPT-J) pairs sit in one 8-element vector: any multiple of 8, as FlashInfer
    takes; NeoX pairs element i with i + R/2, whose vectors line up only for multiples of 16
    (FlashInfer's kernel would load them misaligned)."""
    step = launch.VEC if interleave else launch.SLOT
    if rotary_dim % step or not 0 < rotary_dim <= limit:
        style = "interleaved" if interleave else "non-interleaved (NeoX)"
        raise ValueError(f"{name} must be a multiple of {step} in [{step}, {limit_name}={limit}] for {style} "
                         f"RoPE; got {rotary_dim}")


def _check_rotary(rotary_dim: object, interleave: object) -> tuple[int | None, bool]:
    """rotary_dim an int or None, interleave a bool (its range is checked with the head_dim)."""
    if rotary_dim is not None:
        rotary_dim = require_int("rotary_dim", rotary_dim, "an int (a multiple of 16) or None")
    return rotary_dim, require_flag("interleave", interleave)


def _rope_scalars(rope_scale: float, rope_theta: float) -> tuple[float, float, float, float]:
    # every call: the cheap test first (an int or float in range), then the full check
    if not (type(rope_scale) in _FAST_REALS and type(rope_theta) in _FAST_REALS
            and _MIN_ROPE_SCALE <= rope_scale <= _DBL_MAX and 1 < rope_theta <= _DBL_MAX):
        rope_scale, rope_theta = _check_rope_scalars(rope_scale, rope_theta)
    return 1.0 / rope_scale, math.log2(rope_theta), 0.0, 0.0


def _check_rope_scalars(rope_scale: object, rope_theta: object) -> tuple[float, float]:
    scale, theta = require_real("rope_scale", rope_scale), require_real("rope_theta", rope_theta)
    if scale <= 0:
        raise ValueError(f"rope_scale must be a finite number > 0; got {rope_scale!r}")
    if scale < _MIN_ROPE_SCALE:
        raise ValueError(f"rope_scale must be at least {_MIN_ROPE_SCALE:.4g} (1 / rope_scale must fit in float32); "
                         f"got {rope_scale!r}")
    if theta <= 1:
        raise ValueError(f"rope_theta must be a finite number > 1; got {rope_theta!r}")
    return scale, theta


def _llama31_scalars(rope_scale: float, rope_theta: float, low_freq_factor: float, high_freq_factor: float,
                     old_context_len: float) -> tuple[float, float, float, float]:
    rcp_scale, log2_theta, _, _ = _rope_scalars(rope_scale, rope_theta)
    if not (type(low_freq_factor) in _FAST_REALS and type(high_freq_factor) in _FAST_REALS
            and type(old_context_len) in _FAST_REALS
            and 0 < low_freq_factor < high_freq_factor <= _DBL_MAX and 0 < old_context_len <= _DBL_MAX):
        low_freq_factor, high_freq_factor, old_context_len = _check_llama31_scalars(
            low_freq_factor, high_freq_factor, old_context_len)
    smooth_a = old_context_len / (2 * math.pi * high_freq_factor - 2 * math.pi * low_freq_factor)
    smooth_b = -1.0 / (high_freq_factor / low_freq_factor - 1.0)
    if not (-F32_MAX <= smooth_a <= F32_MAX and -F32_MAX <= smooth_b <= F32_MAX):  # also NaN
        raise ValueError("llama31 RoPE: old_context_len / (2*pi*(high_freq_factor - low_freq_factor)) and "
                         "1 / (high_freq_factor / low_freq_factor - 1) must fit in float32; got "
                         f"low_freq_factor={low_freq_factor!r}, high_freq_factor={high_freq_factor!r}, "
                         f"old_context_len={old_context_len!r}")
    return rcp_scale, log2_theta, smooth_a, smooth_b


def _check_llama31_scalars(low_freq_factor: object, high_freq_factor: object,
                           old_context_len: object) -> tuple[float, float, float]:
    low = require_real("low_freq_factor", low_freq_factor)
    high = require_real("high_freq_factor", high_freq_factor)
    old = require_real("old_context_len", old_context_len)
    if low <= 0:
        raise ValueError(f"low_freq_factor must be a finite number > 0; got {low_freq_factor!r}")
    if high <= low:
        raise ValueError(f"high_freq_factor must be a finite number > low_freq_factor ({low_freq_factor!r}); "
                         f"got {high_freq_factor!r}")
    if old <= 0:
        raise ValueError(f"old_context_len must be a finite number > 0; got {old_context_len!r}")
    return low, high, old


def _outputs(q: torch.Tensor, k: torch.Tensor, inplace: bool) -> tuple[torch.Tensor, torch.Tensor]:
    if inplace:
        return q, k
    # empty_like with an explicit format: the cheapest allocation call (q may be a strided view)
    return (torch.empty_like(require_tensor("q", q), memory_format=torch.contiguous_format),
            torch.empty_like(require_tensor("k", k), memory_format=torch.contiguous_format))


def _ragged(q, k, indptr, offsets, rotary_dim, interleave, scalars, inplace):
    q_out, k_out = _outputs(q, k, inplace)
    _launch(q, k, q_out, k_out, "indptr", indptr, offsets, None, rotary_dim, interleave, scalars)
    return None if inplace else (q_out, k_out)


def _by_pos_ids(q, k, pos_ids, rotary_dim, interleave, scalars, inplace):
    q_out, k_out = _outputs(q, k, inplace)
    _launch(q, k, q_out, k_out, "pos_ids", pos_ids, None, None, rotary_dim, interleave, scalars)
    return None if inplace else (q_out, k_out)


@api_log
def apply_rope(q, k, indptr, offsets, rotary_dim=None, interleave=False, rope_scale=1.0, rope_theta=1e4):
    """RoPE on a ragged batch; token ``i`` of request ``b`` sits at ``offsets[b] + i - indptr[b]``.

    Returns new ``(q_rope, k_rope)``. indptr ``[batch + 1]`` and offsets ``[batch]``: int32 or int64.
    """
    return _ragged(q, k, indptr, offsets, rotary_dim, interleave, _rope_scalars(rope_scale, rope_theta), False)


@api_log
def apply_rope_inplace(q, k, indptr, offsets, rotary_dim=None, interleave=False, rope_scale=1.0, rope_theta=1e4):
    """In-place :func:`apply_rope`."""
    return _ragged(q, k, indptr, offsets, rotary_dim, interleave, _rope_scalars(rope_scale, rope_theta), True)


@api_log
def apply_rope_pos_ids(q, k, pos_ids, rotary_dim=None, interleave=False, rope_scale=1.0, rope_theta=1e4):
    """RoPE with one position per token (``pos_ids`` ``[nnz]``, int32 or int64). Returns new (q, k)."""
    return _by_pos_ids(q, k, pos_ids, rotary_dim, interleave, _rope_scalars(rope_scale, rope_theta), False)


@api_log
def apply_rope_pos_ids_inplace(q, k, pos_ids, rotary_dim=None, interleave=False, rope_scale=1.0,
                               rope_theta=1e4):
    """In-place :func:`apply_rope_pos_ids`."""
    return _by_pos_ids(q, k, pos_ids, rotary_dim, interleave, _rope_scalars(rope_scale, rope_theta), True)


@api_log
def apply_llama31_rope(q, k, indptr, offsets, rotary_dim=None, interleave=False, rope_scale=8, rope_theta=5e5,
                       low_freq_factor=1, high_freq_factor=4, old_context_len=8192):
    """Llama 3.1 RoPE (frequency-band scaling) on a ragged batch. Returns new (q, k)."""
    scalars = _llama31_scalars(rope_scale, rope_theta, low_freq_factor, high_freq_factor, old_context_len)
    return _ragged(q, k, indptr, offsets, rotary_dim, interleave, scalars, False)


@api_log
def apply_llama31_rope_inplace(q, k, indptr, offsets, rotary_dim=None, interleave=False, rope_scale=8,
                               rope_theta=5e5, low_freq_factor=1, high_freq_factor=4, old_context_len=8192):
    """In-place :func:`apply_llama31_rope`."""
    scalars = _llama31_scalars(rope_scale, rope_theta, low_freq_factor, high_freq_factor, old_context_len)
    return _ragged(q, k, indptr, offsets, rotary_dim, interleave, scalars, True)


@api_log
def apply_llama31_rope_pos_ids(q, k, pos_ids, rotary_dim=None, interleave=False, rope_scale=8, rope_theta=5e5,
                               low_freq_factor=1, high_freq_factor=4, old_context_len=8192):
    """Llama 3.1 RoPE with one position per token. Returns new (q, k)."""
    scalars = _llama31_scalars(rope_scale, rope_theta, low_freq_factor, high_freq_factor, old_context_len)
    return _by_pos_ids(q, k, pos_ids, rotary_dim, interleave, scalars, False)


@api_log
def apply_llama31_rope_pos_ids_inplace(q, k, pos_ids, rotary_dim=None, interleave=False, rope_scale=8,
                                       rope_theta=5e5, low_freq_factor=1, high_freq_factor=4,
                                       old_context_len=8192):
    """In-place :func:`apply_llama31_rope_pos_ids`."""
    scalars = _llama31_scalars(rope_scale, rope_theta, low_freq_factor, high_freq_factor, old_context_len)
    return _by_pos_ids(q, k, pos_ids, rotary_dim, interleave, scalars, True)


def _with_cache(positions, query, key, head_size, cos_sin_cache, is_neox, inplace):
    # scalars, then tensors (positions: in _launch's checked plan); devices last
    if type(head_size) is not int:
        head_size = require_int("head_size", head_size)
    if head_size % launch.SLOT or not launch.SLOT <= head_size <= launch.MAX_HEAD_DIM:
        raise ValueError(f"head_size must be a multiple of 16 in [16, {launch.MAX_HEAD_DIM}]; got {head_size}")
    if is_neox is not True and is_neox is not False:
        is_neox = require_flag("is_neox", is_neox)

    def heads(name, tensor):
        require_tensor(name, tensor)
        if tensor.dim() == 3 and tensor.shape[2] == head_size:
            return tensor
        if tensor.dim() == 2 and tensor.shape[1] % head_size == 0:
            if tensor.stride(1) != 1 and tensor.shape[1] > 1:
                raise ValueError(f"{name} must be contiguous in its last dimension; "
                                 f"got strides {tuple(tensor.stride())}")
            return tensor.view(tensor.shape[0], tensor.shape[1] // head_size, head_size)
        raise ValueError(f"{name} must be [nnz, heads * head_size] or [nnz, heads, head_size] with "
                         f"head_size={head_size}; got shape {tuple(tensor.shape)}")

    q, k = heads("query", query), heads("key", key)
    require_tensor("cos_sin_cache", cos_sin_cache)
    if cos_sin_cache.dtype != torch.float32:
        raise TypeError(f"cos_sin_cache must be float32 [max_position, rotary_dim]; got {cos_sin_cache.dtype}")
    if cos_sin_cache.dim() != 2 or cos_sin_cache.stride(1) != 1 or cos_sin_cache.stride(0) % 4 \
            or cos_sin_cache.data_ptr() % 16:
        raise ValueError("cos_sin_cache must be 2-D [max_position, rotary_dim] with contiguous, 16-byte "
                         f"aligned rows; got shape {tuple(cos_sin_cache.shape)} strides {tuple(cos_sin_cache.stride())}")
    if cos_sin_cache.shape[0] < 1:
        raise ValueError("cos_sin_cache has no rows")
    rotary_dim = cos_sin_cache.shape[1]
    _check_rotary_dim("cos_sin_cache [max_position, rotary_dim]: rotary_dim", rotary_dim, not is_neox,
                      "head_size", head_size)
    if inplace:
        q_out, k_out, result = q, k, None
    else:
        query_out = torch.empty_like(query, memory_format=torch.contiguous_format)
        key_out = torch.empty_like(key, memory_format=torch.contiguous_format)
        q_out, k_out, result = heads("query", query_out), heads("key", key_out), (query_out, key_out)
    _launch(q, k, q_out, k_out, "cache", positions, None, cos_sin_cache, rotary_dim,
            not is_neox, (1.0, 0.0, 0.0, 0.0), names=("query", "key"))
    return result


@api_log
def apply_rope_with_cos_sin_cache(positions, query, key, head_size, cos_sin_cache, is_neox=True):
    """vLLM/SGLang-style RoPE from a precomputed fp32 cache (row p = ``cat(cos, sin)`` of width
    rotary_dim). query/key ``[nnz, heads * head_size]`` (or 3-D). Returns new (query, key)."""
    return _with_cache(positions, query, key, head_size, cos_sin_cache, is_neox, False)


@api_log
def apply_rope_with_cos_sin_cache_inplace(positions, query, key, head_size, cos_sin_cache, is_neox=True):
    """In-place :func:`apply_rope_with_cos_sin_cache`."""
    return _with_cache(positions, query, key, head_size, cos_sin_cache, is_neox, True)


# ---- torch.compile: the ops Dynamo records (in place, or into fresh outputs) --------------
_ROPE_ARGS = ("str positions, Tensor pos, Tensor? offsets, Tensor? cos_sin_cache, int? rotary_dim, bool interleave, "
              "float[] scalars, str q_name, str k_name")


def _no_output(*args: object) -> None:
    return None


def _run_inplace(q, k, positions, pos, offsets, cache, rotary_dim, interleave, scalars, q_name, k_name):
    _launch(q, k, q, k, positions, pos, offsets, cache, rotary_dim, interleave, tuple(scalars), (q_name, k_name))


def _run_out(q, k, q_out, k_out, positions, pos, offsets, cache, rotary_dim, interleave, scalars, q_name, k_name):
    _launch(q, k, q_out, k_out, positions, pos, offsets, cache, rotary_dim, interleave, tuple(scalars),
            (q_name, k_name))


_INPLACE = define(f"rope_inplace(Tensor(a!) q, Tensor(b!) k, {_ROPE_ARGS}) -> ()", _run_inplace, _no_output)
_OUT = define(f"rope_out(Tensor q, Tensor k, Tensor(a!) q_out, Tensor(b!) k_out, {_ROPE_ARGS}) -> ()",
              _run_out, _no_output)


def _record_op(q, k, q_out, k_out, positions, pos, offsets, cache, rotary_dim, interleave, scalars, names) -> None:
    scalars = [float(value) for value in scalars]
    if q_out is q and k_out is k:
        _INPLACE(q, k, positions, pos, offsets, cache, rotary_dim, interleave, scalars, *names)
    else:
        _OUT(q, k, q_out, k_out, positions, pos, offsets, cache, rotary_dim, interleave, scalars, *names)


for _public in (apply_rope, apply_rope_inplace, apply_rope_pos_ids, apply_rope_pos_ids_inplace, apply_llama31_rope, apply_llama31_rope_inplace, apply_llama31_rope_pos_ids, apply_llama31_rope_pos_ids_inplace, apply_rope_with_cos_sin_cache, apply_rope_with_cos_sin_cache_inplace):
    declare(_public, (Family.SIMT,), launch.DTYPES)

# RoPE + FP8 quantisation (FlashInfer's rope_quantize_fp8, and with the append to a paged cache):
# defined beside, public from here
from .append_quant import rope_quantize_fp8_append_paged_kv_cache  # noqa: E402
from .quant import mla_rope_quantize_fp8, rope_quantize_fp8  # noqa: E402

for _public in (rope_quantize_fp8, mla_rope_quantize_fp8, rope_quantize_fp8_append_paged_kv_cache):
    declare(_public, (Family.SIMT,), launch.DTYPES)
