"""RoPE + FP8 quantisation + append to a paged KV cache: FlashInfer's
``rope_quantize_fp8_append_paged_kv_cache``, in one launch of the RoPE quant kernel
(``quant_kernel.RopeQuantAppendKernel``).

q is handled as in :func:`rope_quantize_fp8` (rotary part rotated, both parts times
``quant_scale_q`` in FP8, returned). k (rotary part rotated) and v, times ``quant_scale_kv``
in FP8, are not returned but written into the paged cache at each token's slot: token ``t``
of request ``batch_indices[t]`` at position ``positions[t]`` (e.g. from
``get_batch_indices_positions``) goes to page ``kv_indices[kv_indptr[b] + positions[t] //
page_size]``, entry ``positions[t] % page_size``; RoPE uses ``pos_ids[t]``.

* GQA/MHA (``k_rope`` [nnz, Hk, R]): ``paged_kv_cache = (k_cache, v_cache)``, each
  ``[pages, page_size, Hk, R + N]`` (NHD) or ``[pages, Hk, page_size, R + N]`` (HND); a K row
  holds the rotated part in columns ``[0, R)`` and ``k_nope`` in ``[R, R + N)``; ``v``
  [nnz, Hk, R + N] is required.
* MLA (``k_rope`` [nnz, R], ``k_nope`` [nnz, N]): ``paged_kv_cache = (ckv_cache, kpe_cache)``,
  ``[pages, page_size, N]`` and ``[pages, page_size, R]``; ``v`` must be None.

The caches are FP8 in the quantize dtype. A token whose batch index is negative (padding) or
whose slot or page id is out of range writes no K/V (its q is still written). Index tensors
are int32 (int64 ones are converted first, as FlashInfer does).
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from .._checks import require_cuda, require_same_device, require_tensor
from .._library import compiling, define
from .._plans import PlanCache, signature
from ..dtypes import name_of
from ..jit.loader import Kernel
from ..jit.lookup import get_kernel
from ..jit.logs import api_log
from . import launch
from .checks import stride as _stride
from .quant import (_FP8_DTYPES, _I32_MAX, _heads_view, _quantize_dtype, _rows, check_output, check_parts,
                    nope_parts, scalar_args)

KV_LAYOUTS = ("NHD", "HND")
_INDEX_NAMES = ("kv_indices", "kv_indptr", "batch_indices", "positions")


class _Plan(NamedTuple):
    kernel: Kernel | None  # None: no tokens
    device: int
    grid: tuple[int, int, int]
    sizes: dict[str, int]
    nope_offset: int  # bytes from the K cache's row start to k_nope's columns (GQA: R; MLA: 0)


_PLANS = PlanCache()


def _indices(name: str, tensor: object, at_least: int | None) -> None:
    """A contiguous 1-D int32 tensor (of at least ``at_least`` entries where given)."""
    require_tensor(name, tensor)
    if tensor.dtype != torch.int32:
        raise TypeError(f"{name} must be int32 (or int64, converted); got {str(tensor.dtype).replace('torch.', '')}")
    if tensor.dim() != 1 or not tensor.is_contiguous() or (at_least is not None and tensor.shape[0] < at_least):
        need = f"at least {at_least} entries (one a token)" if at_least is not None else "any length"
        raise ValueError(f"{name} must be a contiguous 1-D tensor of {need}; got shape {tuple(tensor.shape)} "
                         f"strides {tuple(tensor.stride())}")


def _cache(name: str, cache: object, shape: tuple[int, ...], layout: str, dtype: torch.dtype) -> None:
    """An FP8 cache of ``shape`` (its dims' names in ``layout``), 16-byte aligned rows."""
    require_tensor(name, cache)
    if cache.dtype != dtype:
        raise TypeError(f"{name} dtype {cache.dtype} must be the quantize dtype {dtype}")
    if cache.dim() != len(shape) or tuple(cache.shape[1:]) != shape[1:]:
        raise ValueError(f"{name} must be {layout} = [pages, {', '.join(map(str, shape[1:]))}]; got shape "
                         f"{tuple(cache.shape)}")
    if cache.numel() and (cache.stride(-1) != 1 or any(_stride(cache, d) % 16 for d in range(cache.dim() - 1))
                          or cache.data_ptr() % 16):
        raise ValueError(f"{name} rows must start on 16-byte boundaries (a contiguous last dimension, strides in "
                         f"multiples of 16 elements); got strides {tuple(cache.stride())}")


def _check_and_plan(q_rope, k_rope, q_nope, k_nope, v, cos_sin_cache, pos_ids, caches, index_tensors, q_outs,
                    interleave, page_size, kv_layout) -> _Plan:
    nnz, num_q_heads, num_k_heads, rope_dim, nope_dim, mla = check_parts(q_rope, k_rope, q_nope, k_nope,
                                                                         cos_sin_cache, pos_ids)
    out_dtype = q_outs[0].dtype
    for name, out, src in zip(("q_rope_out", "q_nope_out"), q_outs, (q_rope, q_nope)):
        check_output(name, out, src, out_dtype)
    if type(page_size) is not int or page_size < 1:
        raise ValueError(f"page_size must be a positive int; got {page_size!r}")
    if kv_layout not in KV_LAYOUTS:
        raise ValueError(f"kv_layout must be 'NHD' or 'HND'; got {kv_layout!r}")
    first, second = caches
    if mla:
        if v is not None:
            raise ValueError("v must be None for MLA (2-D k_rope): the latent k_nope is the value")
        _cache("ckv_cache (paged_kv_cache[0])", first, (0, page_size, nope_dim), "[pages, page_size, no_rope_dim]",
               out_dtype)
        _cache("kpe_cache (paged_kv_cache[1])", second, (0, page_size, rope_dim), "[pages, page_size, rope_dim]",
               out_dtype)
        if first.shape[0] != second.shape[0]:
            raise ValueError(f"ckv_cache {tuple(first.shape)} and kpe_cache {tuple(second.shape)} must have the same "
                             "number of pages")
        # (k_rope -> kpe_cache, k_nope -> ckv_cache; one head, no V)
        k_rope_dst, k_nope_dst, v_dst, num_v_heads = second.unsqueeze(2), first.unsqueeze(2), None, 0
    else:
        head_dim = rope_dim + nope_dim
        require_tensor("v", v)
        if v.dtype != q_rope.dtype:
            raise TypeError(f"v dtype {v.dtype} must match q_rope dtype {q_rope.dtype}")
        _rows("v", v, True, head_dim, launch.VEC)
        if tuple(v.shape) != (nnz, num_k_heads, head_dim):
            raise ValueError(f"v must be [nnz, num_kv_heads, rope_dim + no_rope_dim] = "
                             f"{[nnz, num_k_heads, head_dim]}; got shape {tuple(v.shape)}")
        shape = (0, page_size, num_k_heads, head_dim) if kv_layout == "NHD" else (0, num_k_heads, page_size, head_dim)
        dims = "[pages, page_size, num_kv_heads, head_dim]" if kv_layout == "NHD" else \
            "[pages, num_kv_heads, page_size, head_dim]"
        for name, cache in (("k_cache (paged_kv_cache[0])", first), ("v_cache (paged_kv_cache[1])", second)):
            _cache(name, cache, shape, dims, out_dtype)
        if first.shape[0] != second.shape[0]:
            raise ValueError(f"k_cache {tuple(first.shape)} and v_cache {tuple(second.shape)} must have the same "
                             "number of pages")
        order = (0, 1, 2) if kv_layout == "NHD" else (0, 2, 1)  # (page, entry, head)
        k_rope_dst = k_nope_dst = first.permute(*order, 3)
        v_dst, num_v_heads = second.permute(*order, 3), num_k_heads
    kv_indices, kv_indptr, batch_indices, positions = index_tensors
    for name, tensor, at_least in zip(_INDEX_NAMES, index_tensors, (None, 1, nnz, nnz)):
        _indices(name, tensor, at_least)
    units = nnz * (num_q_heads + 2 * num_k_heads) * ((rope_dim + nope_dim) // launch.SLOT)
    if units > _I32_MAX or first.shape[0] > _I32_MAX or kv_indices.shape[0] > _I32_MAX:
        raise ValueError(f"too large: nnz {nnz} x heads x dims, the pages and kv_indices must each stay under 2^31")
    device = require_cuda("q_rope", q_rope)
    named = [("q_rope", q_rope), ("k_rope", k_rope), ("q_nope", q_nope), ("k_nope", k_nope),
             ("cos_sin_cache", cos_sin_cache), ("pos_ids", pos_ids), ("paged_kv_cache[0]", first),
             ("paged_kv_cache[1]", second), ("q_rope_out", q_outs[0]), ("q_nope_out", q_outs[1]),
             *zip(_INDEX_NAMES, index_tensors)]
    require_same_device(*named, *([("v", v)] if v is not None else []))
    if nnz == 0:
        return _Plan(None, device, (0, 0, 0), {}, 0)
    spec = launch.APPEND_SPECS[(name_of(q_rope.dtype), name_of(out_dtype), name_of(pos_ids.dtype), interleave)]
    token_head = [_stride(t, d) if t.numel() else 0
                  for t in (q_rope, _heads_view(k_rope), q_nope, _heads_view(k_nope), v) if t is not None
                  for d in (0, 1)]
    token_head += [0, 0] * (v is None)
    token_head += [_stride(t, d) if t.numel() else 0 for t in q_outs for d in (0, 1)]
    cache_strides = [_stride(dst, d) if dst is not None and dst.numel() else 0
                     for dst in (k_rope_dst, k_nope_dst, v_dst) for d in (0, 1, 2)]
    sizes = dict(nnz=nnz, num_q_heads=num_q_heads, num_k_heads=num_k_heads, num_v_heads=num_v_heads,
                 rope_dim=rope_dim, nope_dim=nope_dim, cache_rows=cos_sin_cache.shape[0], page_size=page_size,
                 batch=kv_indptr.shape[0] - 1, num_indices=kv_indices.shape[0], num_pages=first.shape[0],
                 cache_row_stride=cos_sin_cache.stride(0),
                 **dict(zip(launch.APPEND_STRIDES, token_head + cache_strides)))
    kernel = get_kernel(spec, device)
    return _Plan(kernel, device, kernel.contract.grid(sizes), sizes, 0 if mla else rope_dim)


def _run(q_rope, k_rope, q_nope, k_nope, v, cos_sin_cache, pos_ids, caches, index_tensors, q_outs, interleave,
         scale_q, scale_kv, page_size, kv_layout, pdl) -> None:
    tensors = (q_rope, k_rope, q_nope, k_nope, v, cos_sin_cache, pos_ids, *caches, *index_tensors, *q_outs)
    try:
        key = (interleave, page_size, kv_layout, *(signature(t) if t is not None else None for t in tensors))
    except AttributeError:  # not tensors: the full check names the argument
        key = None
    plan = _PLANS.get(key)
    if plan is None:
        plan = _PLANS.put(key, _check_and_plan(q_rope, k_rope, q_nope, k_nope, v, cos_sin_cache, pos_ids, caches,
                                               index_tensors, q_outs, interleave, page_size, kv_layout))
    if plan.kernel is None:
        return
    rows = [t for t in (q_rope, k_rope, q_nope, k_nope, v, *caches, *q_outs, cos_sin_cache) if t is not None]
    if any(t.data_ptr() & 15 for t in rows if t.numel()):  # (a plan is per layout, not per address)
        _check_and_plan(q_rope, k_rope, q_nope, k_nope, v, cos_sin_cache, pos_ids, caches, index_tensors, q_outs,
                        interleave, page_size, kv_layout)
    first, second = caches
    mla = plan.sizes["num_v_heads"] == 0
    kv_indices, kv_indptr, batch_indices, positions = index_tensors
    plan.kernel.launch(
        plan.grid, plan.device, None, pdl, q_rope=q_rope.data_ptr(), k_rope=k_rope.data_ptr(),
        q_nope=q_nope.data_ptr(), k_nope=k_nope.data_ptr(), v=0 if v is None else v.data_ptr(),
        q_rope_out=q_outs[0].data_ptr(), q_nope_out=q_outs[1].data_ptr(),
        k_rope_cache=second.data_ptr() if mla else first.data_ptr(),
        k_nope_cache=first.data_ptr() + plan.nope_offset, v_cache=0 if mla else second.data_ptr(),
        pos=pos_ids.data_ptr(), batch_indices=batch_indices.data_ptr(), positions=positions.data_ptr(),
        kv_indptr=kv_indptr.data_ptr(), kv_indices=kv_indices.data_ptr(), cos_sin_cache=cos_sin_cache.data_ptr(),
        **plan.sizes, scale_q=scale_q, scale_kv=scale_kv)


@api_log
def rope_quantize_fp8_append_paged_kv_cache(q_rope, k_rope, q_nope, k_nope, v, cos_sin_cache, pos_ids, paged_kv_cache,
                                            kv_indices, kv_indptr, batch_indices, positions, is_neox=True,
                                            quantize_dtype=None, quant_scale_q=1.0, quant_scale_kv=1.0,
                                            page_size=16, kv_layout="NHD", q_rope_out=None, q_nope_out=None,
                                            enable_pdl=False):
    """RoPE, FP8 and the K/V append in one launch (module docstring). Returns
    ``(q_rope_out, q_nope_out)``. ``quantize_dtype`` None: the given q output's dtype, else the
    cache's (FlashInfer: else e4m3)."""
    interleave, scale_q, scale_kv, pdl = scalar_args(is_neox, quant_scale_q, quant_scale_kv, enable_pdl)
    if not isinstance(paged_kv_cache, (tuple, list)) or len(paged_kv_cache) != 2:
        raise TypeError("paged_kv_cache must be a tuple of 2 tensors: (k_cache, v_cache), or MLA's "
                        f"(ckv_cache, kpe_cache); got {type(paged_kv_cache).__name__}")
    caches = tuple(paged_kv_cache)
    for i, cache in enumerate(caches):
        require_tensor(f"paged_kv_cache[{i}]", cache)
    if quantize_dtype is None and q_rope_out is None and q_nope_out is None and caches[0].dtype in _FP8_DTYPES:
        quantize_dtype = caches[0].dtype
    quantize_dtype = _quantize_dtype(quantize_dtype, (q_rope_out, q_nope_out))
    for name, out in (("q_rope_out", q_rope_out), ("q_nope_out", q_nope_out)):
        if isinstance(out, torch.Tensor) and out.dtype != quantize_dtype:
            raise TypeError(f"{name} dtype {out.dtype} must be the quantize dtype {quantize_dtype}")
    q_nope, k_nope = nope_parts(q_rope, k_rope, q_nope, k_nope)
    q_outs = [out if out is not None else torch.empty(src.shape, dtype=quantize_dtype, device=src.device)
              for out, src in ((q_rope_out, q_rope), (q_nope_out, q_nope))]
    index_tensors = [t.int() if isinstance(t, torch.Tensor) and t.dtype is torch.int64 else t
                     for t in (kv_indices, kv_indptr, batch_indices, positions)]
    if compiling():  # torch.compile traces this: one cutefi op in the graph (see _library)
        _OP(q_rope, k_rope, q_nope, k_nope, v, cos_sin_cache, pos_ids, *caches, *index_tensors, *q_outs, interleave,
            scale_q, scale_kv, page_size, kv_layout, pdl)
    else:
        _run(q_rope, k_rope, q_nope, k_nope, v, cos_sin_cache, pos_ids, caches, index_tensors, q_outs, interleave,
             scale_q, scale_kv, page_size, kv_layout, pdl)
    return q_outs[0], q_outs[1]


# ---- torch.compile: the op Dynamo records (the q outputs and both caches written) -------------
def _op_impl(q_rope, k_rope, q_nope, k_nope, v, cos_sin_cache, pos_ids, cache_0, cache_1, kv_indices, kv_indptr,
             batch_indices, positions, q_rope_out, q_nope_out, interleave, scale_q, scale_kv, page_size, kv_layout,
             pdl) -> None:
    _run(q_rope, k_rope, q_nope, k_nope, v, cos_sin_cache, pos_ids, (cache_0, cache_1),
         (kv_indices, kv_indptr, batch_indices, positions), (q_rope_out, q_nope_out), interleave, scale_q, scale_kv,
         page_size, kv_layout, pdl)


def _no_output(*args: object) -> None:
    return None


_OP = define("rope_quantize_fp8_append_paged_kv_cache(Tensor q_rope, Tensor k_rope, Tensor q_nope, Tensor k_nope, "
             "Tensor? v, Tensor cos_sin_cache, Tensor pos_ids, Tensor(a!) cache_0, Tensor(b!) cache_1, "
             "Tensor kv_indices, Tensor kv_indptr, Tensor batch_indices, Tensor positions, Tensor(c!) q_rope_out, "
             "Tensor(d!) q_nope_out, bool interleave, float scale_q, float scale_kv, int page_size, str kv_layout, "
             "bool pdl) -> ()", _op_impl, _no_output)
