"""RoPE + FP8 quantisation: FlashInfer's ``rope_quantize_fp8`` and ``mla_rope_quantize_fp8`` on
one CuTe DSL kernel (``quant_kernel.py``).

q and k come split into their rotary part (``q_rope`` [nnz, Hq, R], ``k_rope`` [nnz, Hk, R] or,
MLA, [nnz, R]) and the rest (``q_nope``, ``k_nope`` with N columns, or None). The rotary parts
are rotated by rows of a float32 cos|sin cache ([max_position, R]: cos in the first R/2 columns,
sin in the last) at ``pos_ids``; every element is then multiplied by its scale
(``quant_scale_q`` for q, ``quant_scale_kv`` for k) and converted to ``quantize_dtype``
(``float8_e4m3fn`` or ``float8_e5m2``), saturated to its largest finite value, rounded to nearest
even, as FlashInfer's kernel does. R and N are multiples of 16; inputs fp16/bf16 with rows at any
token and head stride that is a multiple of 8 elements (e.g. the two parts of one fused q
buffer); outputs at strides that are multiples of 16 elements (the ones made here are
contiguous).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch

from .._checks import (require_cuda, require_dtype, require_flag, require_pdl, require_real,
                       require_same_device, require_tensor)
from .._library import compiling, define
from .._plans import PlanCache, signature
from ..dtypes import name_of
from ..jit.loader import Kernel
from ..jit.logs import api_log
from ..jit.lookup import get_kernel
from . import launch
from .checks import check_positions as _check_positions, stride as _stride

_INPUT_DTYPES = (torch.bfloat16, torch.float16)
_FP8_DTYPES = (torch.float8_e4m3fn, torch.float8_e5m2)
_I32_MAX = 2**31 - 1
BACKENDS = ("cuda", "cutefi")  # ("cuda": FlashInfer's default name, taken for cutefi's kernel)
_OUT_NAMES = ("q_rope_out", "k_rope_out", "q_nope_out", "k_nope_out")
_POINTERS = (*launch.QUANT_SETS, *_OUT_NAMES)  # (the kernel's pointer parameters, in the order passed)


class _Plan(NamedTuple):
    kernel: Kernel | None  # None: no tokens
    device: int
    grid: tuple[int, int, int]
    sizes: dict[str, int]


_PLANS = PlanCache()


def _rows(name: str, tensor: torch.Tensor, heads_dim: bool, width: int | None, elems: int) -> None:
    """[nnz, heads, width] (or [nnz, width] without ``heads_dim``), contiguous rows whose token
    and head strides are multiples of ``elems`` elements, starting on a 16-byte boundary."""
    require_tensor(name, tensor)
    rank = 3 if heads_dim else 2
    if tensor.dim() != rank:
        shape = "[nnz, heads, dim]" if heads_dim else "[nnz, dim]"
        raise ValueError(f"{name} must be {rank}-D {shape}; got shape {tuple(tensor.shape)}")
    if width is not None and tensor.shape[-1] != width:
        raise ValueError(f"{name} must have {width} columns; got shape {tuple(tensor.shape)}")
    if not tensor.numel():  # (nothing read or written: an empty nope part, no tokens)
        return
    if tensor.stride(-1) != 1:
        raise ValueError(f"{name} must be contiguous in its last dimension; got strides {tuple(tensor.stride())}")
    if any(_stride(tensor, d) % elems for d in range(rank - 1)) or tensor.data_ptr() % 16:
        raise ValueError(f"{name} needs 16-byte aligned rows: token and head strides a multiple of {elems} "
                         f"elements and a 16-byte aligned start; got strides {tuple(tensor.stride())}")


def _heads_view(tensor: torch.Tensor) -> torch.Tensor:
    """An MLA key [nnz, dim] as [nnz, 1, dim]."""
    return tensor if tensor.dim() == 3 else tensor.unsqueeze(1)


class Parts(NamedTuple):
    """The checked sizes of a call's q and k parts."""
    nnz: int
    num_q_heads: int
    num_k_heads: int
    rope_dim: int
    nope_dim: int
    mla: bool  # k_rope [nnz, R] (one latent key a token), not [nnz, Hk, R]


def check_parts(q_rope, k_rope, q_nope, k_nope, cache, pos_ids) -> Parts:
    """The q / k parts, the cos|sin cache and the positions (``rope_quantize_fp8`` and the
    paged-cache variant alike); no device checks."""
    require_tensor("q_rope", q_rope)
    require_tensor("k_rope", k_rope)
    if q_rope.dtype not in _INPUT_DTYPES:
        require_dtype("q_rope", q_rope, _INPUT_DTYPES)
    mla = k_rope.dim() == 2
    _rows("q_rope", q_rope, True, None, launch.VEC)
    nnz, num_q_heads, rope_dim = q_rope.shape
    _rows("k_rope", k_rope, not mla, rope_dim, launch.VEC)
    num_k_heads = 1 if mla else k_rope.shape[1]
    if k_rope.shape[0] != nnz:
        raise ValueError(f"q_rope {tuple(q_rope.shape)} and k_rope {tuple(k_rope.shape)} must have the same nnz")
    if rope_dim % launch.SLOT or not 0 < rope_dim:
        raise ValueError(f"the rotary dim (q_rope's last) must be a positive multiple of 16; got {rope_dim}")
    nope_dim = q_nope.shape[-1] if q_nope.dim() == 3 else 0
    for name, tensor, heads, with_heads in (("q_nope", q_nope, num_q_heads, True),
                                            ("k_nope", k_nope, num_k_heads, not mla)):
        _rows(name, tensor, with_heads, nope_dim, launch.VEC)
        if tensor.shape[0] != nnz or (with_heads and tensor.shape[1] != heads):
            raise ValueError(f"{name} {tuple(tensor.shape)} must match the rotary part's nnz and heads "
                             f"({nnz}, {heads})")
    if nope_dim % launch.SLOT:
        raise ValueError(f"the non-rotary dim (q_nope's last) must be a multiple of 16; got {nope_dim}")
    for name, tensor in (("k_rope", k_rope), ("q_nope", q_nope), ("k_nope", k_nope)):
        if tensor.dtype != q_rope.dtype:
            raise TypeError(f"{name} dtype {tensor.dtype} must match q_rope dtype {q_rope.dtype}")
    require_tensor("cos_sin_cache", cache)
    if cache.dtype != torch.float32:
        raise TypeError(f"cos_sin_cache must be float32 [max_position, {rope_dim}]; got {cache.dtype}")
    if cache.dim() != 2 or cache.shape[1] != rope_dim or cache.shape[0] < 1 or cache.stride(1) != 1 \
            or cache.stride(0) % launch.VEC or cache.data_ptr() % 16:
        raise ValueError(f"cos_sin_cache must be [max_position >= 1, {rope_dim}] (the rotary dim) with contiguous "
                         f"rows at a stride that is a multiple of 8, 16-byte aligned; got shape "
                         f"{tuple(cache.shape)} strides {tuple(cache.stride())}")
    _check_positions("pos_ids", pos_ids, nnz)
    return Parts(nnz, num_q_heads, num_k_heads, rope_dim, nope_dim, mla)


def check_output(name: str, out: object, src: torch.Tensor, out_dtype: torch.dtype) -> None:
    require_tensor(name, out)
    if out.dtype != out_dtype:
        raise TypeError(f"{name} dtype {out.dtype} must be the quantize dtype {out_dtype}")
    if out.shape != src.shape:
        raise ValueError(f"{name} must have shape {tuple(src.shape)}; got {tuple(out.shape)}")
    _rows(name, out, out.dim() == 3, None, launch.SLOT)


def _check_and_plan(q_rope, k_rope, q_nope, k_nope, cache, pos_ids, outs, interleave) -> _Plan:
    nnz, num_q_heads, num_k_heads, rope_dim, nope_dim, _ = check_parts(q_rope, k_rope, q_nope, k_nope, cache,
                                                                        pos_ids)
    out_dtype = outs[0].dtype
    for name, out, src in zip(_OUT_NAMES, outs, (q_rope, k_rope, q_nope, k_nope)):
        check_output(name, out, src, out_dtype)
    units = nnz * (num_q_heads + num_k_heads) * ((rope_dim + nope_dim) // launch.SLOT)
    if units > _I32_MAX:
        raise ValueError(f"too many elements: nnz {nnz} x heads x dims exceeds the kernel's 2^31 units")
    device = require_cuda("q_rope", q_rope)
    require_same_device(("q_rope", q_rope), ("k_rope", k_rope), ("q_nope", q_nope), ("k_nope", k_nope),
                        ("cos_sin_cache", cache), ("pos_ids", pos_ids),
                        *zip(_OUT_NAMES, outs))
    if nnz == 0:
        return _Plan(None, device, (0, 0, 0), {})
    spec = launch.QUANT_SPECS[(name_of(q_rope.dtype), name_of(out_dtype), name_of(pos_ids.dtype), interleave)]
    views = [_heads_view(t) for t in (q_rope, k_rope, q_nope, k_nope, *outs)]
    strides = [_stride(t, d) if t.numel() else 0 for pair in zip(views[:4], views[4:]) for t in pair for d in (0, 1)]
    sizes = dict(nnz=nnz, num_q_heads=num_q_heads, num_k_heads=num_k_heads, rope_dim=rope_dim, nope_dim=nope_dim,
                 cache_rows=cache.shape[0], cache_row_stride=cache.stride(0),
                 **dict(zip(launch.QUANT_STRIDES, strides)))
    kernel = get_kernel(spec, device)
    return _Plan(kernel, device, kernel.contract.grid(sizes), sizes)


def _run(q_rope, k_rope, q_nope, k_nope, cache, pos_ids, outs, interleave, scale_q, scale_kv, pdl) -> None:
    try:
        key = (interleave, *(signature(t) for t in (q_rope, k_rope, q_nope, k_nope, cache, pos_ids, *outs)))
    except AttributeError:  # not tensors: the full check names the argument
        key = None
    plan = _PLANS.get(key)
    if plan is None:
        plan = _PLANS.put(key, _check_and_plan(q_rope, k_rope, q_nope, k_nope, cache, pos_ids, outs, interleave))
    if plan.kernel is None:
        return
    tensors = (q_rope, k_rope, q_nope, k_nope, *outs)
    pointers = [t.data_ptr() for t in tensors]
    if any(p & 15 for p, t in zip(pointers, tensors) if t.numel()) or cache.data_ptr() & 15:  # (the full check)
        _check_and_plan(q_rope, k_rope, q_nope, k_nope, cache, pos_ids, outs, interleave)
    plan.kernel.launch(plan.grid, plan.device, None, pdl, **dict(zip(_POINTERS, pointers)), pos=pos_ids.data_ptr(),
                       cos_sin_cache=cache.data_ptr(), **plan.sizes, scale_q=scale_q, scale_kv=scale_kv)


def _scale(name: str, value: object) -> float:
    if type(value) is float and math.isfinite(value):
        return value
    return require_real(name, value)


def _quantize_dtype(quantize_dtype, outs) -> torch.dtype:
    """FlashInfer's rule: the given dtype, else the first given output's, else e4m3."""
    if quantize_dtype is None:
        quantize_dtype = next((out.dtype for out in outs if isinstance(out, torch.Tensor)), torch.float8_e4m3fn)
    if quantize_dtype not in _FP8_DTYPES:
        raise TypeError(f"quantize_dtype must be torch.float8_e4m3fn or torch.float8_e5m2; got {quantize_dtype}")
    return quantize_dtype


def scalar_args(is_neox, quant_scale_q, quant_scale_kv, enable_pdl) -> tuple[bool, float, float, bool]:
    """(interleave, scale_q, scale_kv, pdl), each checked."""
    interleave = not (is_neox if is_neox is True or is_neox is False else require_flag("is_neox", is_neox))
    scale_q, scale_kv = _scale("quant_scale_q", quant_scale_q), _scale("quant_scale_kv", quant_scale_kv)
    return interleave, scale_q, scale_kv, bool(require_pdl(enable_pdl))


def nope_parts(q_rope, k_rope, q_nope, k_nope) -> tuple[torch.Tensor, torch.Tensor]:
    """The non-rotary parts, None ones as FlashInfer makes them: empty [nnz, heads, 0] (k's
    [nnz, 0] for MLA's 2-D keys)."""
    for name, tensor in (("q_rope", q_rope), ("k_rope", k_rope), ("q_nope", q_nope), ("k_nope", k_nope)):
        if tensor is not None or name.endswith("rope"):
            require_tensor(name, tensor)
    if (q_nope is None) != (k_nope is None) and (q_nope if k_nope is None else k_nope).shape[-1]:
        raise ValueError("q_nope and k_nope must both be given or both be None (FlashInfer takes the "
                         "non-rotary dim from q_nope)")
    if q_nope is None:
        q_nope = q_rope.new_empty((*q_rope.shape[:2], 0))
    if k_nope is None:
        k_nope = k_rope.new_empty((*k_rope.shape[:-1], 0))
    return q_nope, k_nope


@api_log
def rope_quantize_fp8(q_rope, k_rope, q_nope, k_nope, cos_sin_cache, pos_ids, is_neox=True, quantize_dtype=None,
                      quant_scale_q=1.0, quant_scale_kv=1.0, q_rope_out=None, k_rope_out=None, q_nope_out=None,
                      k_nope_out=None, enable_pdl=False, backend="cuda"):
    """RoPE on the rotary parts, then every part times its scale in FP8 (module docstring).
    Returns ``(q_rope_out, k_rope_out, q_nope_out, k_nope_out)``; a None nope part gives an
    empty [nnz, heads, 0] one, as in FlashInfer."""
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS} (cutefi's kernel); got {backend!r}")
    interleave, scale_q, scale_kv, pdl = scalar_args(is_neox, quant_scale_q, quant_scale_kv, enable_pdl)
    outs = [q_rope_out, k_rope_out, q_nope_out, k_nope_out]
    quantize_dtype = _quantize_dtype(quantize_dtype, outs)
    for name, out in zip(_OUT_NAMES, outs):
        if isinstance(out, torch.Tensor) and out.dtype != quantize_dtype:
            raise TypeError(f"{name} dtype {out.dtype} must be the quantize dtype {quantize_dtype}")
    q_nope, k_nope = nope_parts(q_rope, k_rope, q_nope, k_nope)
    for i, src in enumerate((q_rope, k_rope, q_nope, k_nope)):
        if outs[i] is None:
            outs[i] = torch.empty(src.shape, dtype=quantize_dtype, device=src.device)
    if compiling():  # torch.compile traces this: one cutefi op in the graph (see _library)
        _OP(q_rope, k_rope, q_nope, k_nope, cos_sin_cache, pos_ids, *outs, interleave, scale_q, scale_kv, pdl)
    else:
        _run(q_rope, k_rope, q_nope, k_nope, cos_sin_cache, pos_ids, outs, interleave, scale_q, scale_kv, pdl)
    return tuple(outs)


@api_log
def mla_rope_quantize_fp8(q_rope, k_rope, q_nope, k_nope, cos_sin_cache, pos_ids, is_neox=True, quantize_dtype=None,
                          quant_scale_q=1.0, quant_scale_kv=1.0, q_rope_out=None, k_rope_out=None, q_nope_out=None,
                          k_nope_out=None, enable_pdl=False):
    """:func:`rope_quantize_fp8` with MLA's layout (``k_rope`` [nnz, R], ``k_nope`` [nnz, N])."""
    return rope_quantize_fp8(q_rope, k_rope, q_nope, k_nope, cos_sin_cache, pos_ids, is_neox, quantize_dtype,
                             quant_scale_q, quant_scale_kv, q_rope_out, k_rope_out, q_nope_out, k_nope_out,
                             enable_pdl)


# ---- torch.compile: the op Dynamo records (the four outputs written) ------------------------
def _op_impl(q_rope, k_rope, q_nope, k_nope, cache, pos_ids, q_rope_out, k_rope_out, q_nope_out, k_nope_out,
             interleave, scale_q, scale_kv, pdl) -> None:
    _run(q_rope, k_rope, q_nope, k_nope, cache, pos_ids, [q_rope_out, k_rope_out, q_nope_out, k_nope_out],
         interleave, scale_q, scale_kv, pdl)


def _no_output(*args: object) -> None:
    return None


_OP = define("rope_quantize_fp8(Tensor q_rope, Tensor k_rope, Tensor q_nope, Tensor k_nope, Tensor cos_sin_cache, "
             "Tensor pos_ids, Tensor(a!) q_rope_out, Tensor(b!) k_rope_out, Tensor(c!) q_nope_out, "
             "Tensor(d!) k_nope_out, bool interleave, float scale_q, float scale_kv, bool pdl) -> ()",
             _op_impl, _no_output)
