"""Attention family, public API (FlashInfer's names and arguments).

Appending to a paged KV cache (``flashinfer.page``): ``append_paged_kv_cache`` on the CuTe DSL
append kernel (``append_kernel.py``). Merging attention states (``flashinfer.cascade``):
``merge_state``, ``merge_state_in_place`` and
``merge_states`` on the CuTe DSL merge kernel (``merge_kernel.py``; checks and plans:
``plan.py``). A state is a partial attention output ``v`` ``[seq_len, num_heads, head_dim]``
(fp16/bf16) and ``s``, the float32 base-2 log-sum-exp of its scores ``[seq_len, num_heads]``;
states of disjoint KV ranges merge exactly into the state of their union (see
``cutefi.cute.attention_state``). Paged-KV index helpers (``flashinfer.page``):
``get_seq_lens`` and ``get_batch_indices_positions``, in torch ops (no kernel of their own, no
host synchronisation, so they capture into CUDA graphs and trace under torch.compile).
"""

from __future__ import annotations

import torch

from .._capability import declare
from .._checks import require_int, require_tensor
from .._library import compiling, define
from .._plans import PlanCache, signature
from ..jit.logs import api_log
from ..jit.policy import Family
from . import launch
from .decode import BatchDecodeWithPagedKVCacheWrapper  # noqa: F401
from .decode_forms import (CUDAGraphBatchDecodeWithPagedKVCacheWrapper, fast_decode_plan,  # noqa: F401
                           single_decode_with_kv_cache)
from .plan import (MergePlan, append_row_strides, append_rows_aligned, check_mask, check_pair, check_s, check_v,
                   plan_append, plan_merge, rows_aligned, split_cache)

_PLANS = PlanCache()
_INDEX_DTYPES = (torch.int32, torch.int64)
_I64, _F32 = torch.int64, torch.float32


# ---- merges ---------------------------------------------------------------------------------
def _launch(plan: MergePlan, v: torch.Tensor, s: torch.Tensor, v_out: torch.Tensor, s_out: torch.Tensor,
            mask: torch.Tensor | None, v_state: int = 0, s_state: int = 0) -> None:
    sizes = plan.sizes if not v_state and not s_state else {**plan.sizes, "v_stride_state": v_state,
                                                            "s_stride_state": s_state}
    plan.kernel.launch(plan.grid, plan.device, v=v.data_ptr(), v_out=v_out.data_ptr(), s=s.data_ptr(),
                       s_out=s_out.data_ptr(), mask=mask.data_ptr() if mask is not None else s.data_ptr(),
                       has_mask=int(mask is not None), write_lse=1, **sizes)


def _fresh(t: torch.Tensor) -> torch.Tensor:
    """A contiguous copy in a new (aligned) allocation, even where ``t`` is already contiguous."""
    return torch.empty_like(t, memory_format=torch.contiguous_format).copy_(t)


def _merge_pair(v_a: torch.Tensor, s_a: torch.Tensor, v_b: torch.Tensor, s_b: torch.Tensor, v_out: torch.Tensor,
                s_out: torch.Tensor, mask: torch.Tensor | None, names: tuple[str, str, str, str]) -> None:
    """Merge two states into (v_out, s_out), which may be (v_a, s_a): in place."""
    if compiling():  # torch.compile traces this: one cutefi op in the graph (see _library)
        if v_out is v_a and s_out is s_a:
            return _OPS["merge_state_in_place"](v_a, s_a, v_b, s_b, mask)
        return _OPS["merge_state_out"](v_a, s_a, v_b, s_b, v_out, s_out)
    try:  # the layout a plan depends on; the distance between the two states is per call
        aligned = not (v_a.data_ptr() | v_b.data_ptr() | v_out.data_ptr()) & 15
        key = ("pair", signature(v_a), signature(s_a), signature(v_b), signature(s_b),
               None if v_out is v_a else signature(v_out), None if s_out is s_a else signature(s_out),
               signature(mask), aligned)
    except AttributeError:  # not tensors: the checks name the argument
        key, aligned = None, False
    plan = _PLANS.get(key)
    if plan is None:
        plan = _PLANS.put(key, _plan_pair(v_a, s_a, v_b, s_b, v_out, s_out, mask, names, aligned))
    if plan.kernel is not None:
        if mask is not None and mask.stride(0) != 1:
            mask = mask.contiguous()
        _launch(plan, v_a, s_a, v_out, s_out, mask, (v_b.data_ptr() - v_a.data_ptr()) // v_a.element_size(),
                (s_b.data_ptr() - s_a.data_ptr()) // 4)
    elif plan.staged:  # rows off 16-byte boundaries, or the two states laid out differently
        state_v, state_s = _fresh(v_a), _fresh(s_a)
        if v_out is v_a:  # in place: merge into the copies, then write them back
            out_v, out_s = state_v, state_s
        else:
            out_v, out_s = torch.empty_like(state_v), torch.empty_like(state_s)
        _merge_pair(state_v, state_s, _fresh(v_b), _fresh(s_b), out_v, out_s, mask, names)
        v_out.copy_(out_v)
        s_out.copy_(out_s)


def _plan_pair(v_a, s_a, v_b, s_b, v_out, s_out, mask, names, aligned: bool) -> MergePlan:
    va_name, sa_name, vb_name, sb_name = names
    check_v(va_name, v_a, 3)
    check_v(vb_name, v_b, 3)
    check_pair(va_name, v_a, vb_name, v_b)
    check_s(sa_name, s_a, va_name, v_a)
    check_s(sb_name, s_b, vb_name, v_b)
    if mask is not None:
        check_mask(mask, v_a.shape[0])
    named = [(va_name, v_a), (sa_name, s_a), (vb_name, v_b), (sb_name, s_b)]
    named += [("mask", mask)] if mask is not None else []
    if v_out is not v_a:
        named += [("v_out", v_out), ("s_out", s_out)]
    # one stack of two: both states need the same strides (the distance is the state stride)
    staged = (not aligned or not rows_aligned(v_a, v_b, v_out) or v_a.stride() != v_b.stride()
              or s_a.stride() != s_b.stride())
    return plan_merge(v_a, s_a, v_out, s_out, False, named, staged)


def _merge_stack(v: torch.Tensor, s: torch.Tensor, v_out: torch.Tensor, s_out: torch.Tensor) -> None:
    if compiling():
        return _OPS["merge_states_out"](v, s, v_out, s_out)
    try:
        aligned = not (v.data_ptr() | v_out.data_ptr()) & 15
        key = ("stack", signature(v), signature(s), signature(v_out), signature(s_out), aligned)
    except AttributeError:
        key, aligned = None, False
    plan = _PLANS.get(key)
    if plan is None:
        plan = _PLANS.put(key, _plan_stack(v, s, v_out, s_out, aligned))
    if plan.kernel is not None:
        _launch(plan, v, s, v_out, s_out, None)
    elif plan.staged:
        out = torch.empty_like(v_out, memory_format=torch.contiguous_format)
        _merge_stack(_fresh(v), s, out, s_out)
        v_out.copy_(out)


def _plan_stack(v, s, v_out, s_out, aligned: bool) -> MergePlan:
    check_v("v", v, 4)
    check_s("s", s, "v", v)
    staged = not aligned or not rows_aligned(v, v_out)
    return plan_merge(v, s, v_out, s_out, True, [("v", v), ("s", s)], staged)


def _lse32(s: object) -> object:
    """A log-sum-exp in float32: FlashInfer converts 16- and 64-bit float ones (anything else is
    left to the checks, which name it). A float32 one costs an attribute read and a test."""
    dtype = getattr(s, "dtype", None)
    if dtype is _F32 or dtype not in (torch.float16, torch.bfloat16, torch.float64):
        return s
    return s.float()


def _new_state(v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Outputs for a merge of ``v`` ([seq_len, (states,) heads, head_dim]): merged v and s."""
    shape = (v.shape[0], v.shape[-2])
    return (torch.empty((*shape, v.shape[-1]), dtype=v.dtype, device=v.device),
            torch.empty(shape, dtype=torch.float32, device=v.device))


@api_log
def merge_state(v_a, s_a, v_b, s_b):
    """Merge the attention states of two disjoint KV ranges A and B: returns ``(v_merged,
    s_merged)``, the attention output over A ∪ B ``[seq_len, num_heads, head_dim]`` (v_a's
    dtype) and its base-2 log-sum-exp ``[seq_len, num_heads]`` (float32). ``s_a``, ``s_b``:
    float32, or 16-/64-bit floats converted to it (as FlashInfer does)."""
    require_tensor("v_a", v_a)
    check_v("v_a", v_a, 3)
    v_merged, s_merged = _new_state(v_a)
    _merge_pair(v_a, _lse32(s_a), v_b, _lse32(s_b), v_merged, s_merged, None, ("v_a", "s_a", "v_b", "s_b"))
    return v_merged, s_merged


@api_log
def merge_state_in_place(v, s, v_other, s_other, mask=None):
    """Merge the state ``(v_other, s_other)`` into ``(v, s)`` in place; ``mask`` (bool or uint8
    ``[seq_len]``, optional) leaves the positions where it is 0 untouched (fixed shapes for
    CUDA graphs). Returns None. ``s`` of another float dtype (16- or 64-bit) is merged in a
    float32 copy and written back (FlashInfer converts it and leaves ``s`` as it was)."""
    s32 = _lse32(s)
    _merge_pair(v, s32, v_other, _lse32(s_other), v, s32, mask, ("v", "s", "v_other", "s_other"))
    if s32 is not s:
        s.copy_(s32)


@api_log
def merge_states(v, s):
    """Merge ``num_states`` states of each position: ``v`` ``[seq_len, num_states, num_heads,
    head_dim]``, ``s`` ``[seq_len, num_states, num_heads]`` (float32, base 2). Returns ``(V, S)``:
    ``[seq_len, num_heads, head_dim]`` and ``[seq_len, num_heads]`` (zero states: 0 and -inf)."""
    require_tensor("v", v)
    check_v("v", v, 4)
    v_merged, s_merged = _new_state(v)
    _merge_stack(v, _lse32(s), v_merged, s_merged)
    return v_merged, s_merged


# ---- paged-KV index helpers ---------------------------------------------------------------------
def _check_index(name: str, tensor: object, length: int | None = None) -> torch.Tensor:
    require_tensor(name, tensor)
    if tensor.dtype not in _INDEX_DTYPES:
        raise TypeError(f"{name} must be int32 or int64; got {str(tensor.dtype).replace('torch.', '')}")
    if tensor.dim() != 1 or (length is not None and tensor.shape[0] != length):
        raise ValueError(f"{name} must be 1-D{f' [{length}]' if length is not None else ''}; "
                         f"got shape {tuple(tensor.shape)}")
    return tensor


def _check_batch(indptr_name: str, indptr: object, per_request_name: str, per_request: object,
                 count_name: str, count: object, minimum: int) -> int:
    """An indptr ``[batch + 1]``, a per-request tensor ``[batch]`` on its device, and an int
    ``count`` >= ``minimum`` (returned)."""
    _check_index(indptr_name, indptr)
    if indptr.shape[0] < 1:
        raise ValueError(f"{indptr_name} must have batch + 1 >= 1 entries")
    _check_index(per_request_name, per_request, indptr.shape[0] - 1)
    count = require_int(count_name, count)
    if count < minimum:
        raise ValueError(f"{count_name} must be >= {minimum}; got {count}")
    if per_request.device != indptr.device:
        raise ValueError(f"{indptr_name} on {indptr.device} and {per_request_name} on {per_request.device} "
                         f"must be on one device")
    return count


@api_log
def get_seq_lens(kv_indptr, kv_last_page_len, page_size):
    """KV length of each request of a paged cache: ``(pages - 1) * page_size + last_page_len``
    (a request without pages has its ``last_page_len``, as in FlashInfer)."""
    page_size = _check_batch("kv_indptr", kv_indptr, "kv_last_page_len", kv_last_page_len, "page_size", page_size, 1)
    return torch.clamp(kv_indptr[1:] - kv_indptr[:-1] - 1, min=0) * page_size + kv_last_page_len


@api_log
def get_batch_indices_positions(append_indptr, seq_lens, nnz, batch_indices=None, positions=None):
    """For each of the ``nnz`` appended tokens: its request (``batch_indices``) and its position
    in that request's KV (``positions``; the appended tokens are the last of it). Both int32
    ``[nnz]``; ``append_indptr`` ``[batch + 1]`` and ``seq_lens`` ``[batch]`` (lengths after the
    append) int32 or int64, on one device. ``nnz`` may exceed ``append_indptr[-1]`` (a
    CUDA-graph buffer's padded size): the tokens past it get the last request and position -1
    (FlashInfer: request -1, position 0), so an append of them writes nothing.
    ``batch_indices`` / ``positions``: int32 ``[nnz]`` tensors on that device to write and
    return (FlashInfer's preallocated outputs), or None for new ones."""
    nnz = _check_batch("append_indptr", append_indptr, "seq_lens", seq_lens, "nnz", nnz, 0)
    for name, given in (("batch_indices", batch_indices), ("positions", positions)):
        if given is not None and (require_tensor(name, given).shape != (nnz,) or given.dtype != torch.int32
                                  or given.device != append_indptr.device):
            raise ValueError(f"{name} must be an int32 [nnz] = [{nnz}] tensor on {append_indptr.device}; got "
                             f"{str(given.dtype)[6:]} {tuple(given.shape)} on {given.device}")
    found = _batch_indices_positions(append_indptr, seq_lens, nnz)
    if batch_indices is None and positions is None:
        return found
    return tuple(found_part if given is None else given.copy_(found_part)
                 for given, found_part in zip((batch_indices, positions), found))


def _batch_indices_positions(append_indptr, seq_lens, nnz: int) -> tuple[torch.Tensor, torch.Tensor]:
    requests = append_indptr.shape[0] - 1
    token = torch.arange(nnz, device=append_indptr.device, dtype=append_indptr.dtype)
    if requests == 0:  # no request for any token
        return (torch.zeros(nnz, dtype=torch.int32, device=append_indptr.device),
                torch.full((nnz,), -1, dtype=torch.int32, device=append_indptr.device))
    # entries of append_indptr <= token, less one (the whole tensor: inductor's lowering of a
    # sliced boundaries tensor fails in torch 2.11); a token past the last entry would index
    # seq_lens out of range (a device-side assert), so it takes the last request
    batch = (torch.searchsorted(append_indptr, token, right=True) - 1).clamp_(max=requests - 1)
    positions = seq_lens.to(token.dtype)[batch] - append_indptr[batch + 1] + token
    positions = torch.where(token < append_indptr[-1], positions, -1)
    return batch.to(torch.int32), positions.to(torch.int32)


# ---- appending to a paged KV cache ---------------------------------------------------------------
def _append(key, value, batch_indices, positions, k_cache, v_cache, kv_indices, kv_indptr, kv_last_page_len,
            kv_layout) -> None:
    if compiling():
        return _OPS["append_paged_kv_cache"](key, value, batch_indices, positions, k_cache, v_cache, kv_indices,
                                             kv_indptr, kv_last_page_len, kv_layout)
    try:
        key_sig = ("append", kv_layout, signature(key), signature(value), signature(batch_indices),
                   signature(positions), signature(k_cache), signature(v_cache), signature(kv_indices),
                   signature(kv_indptr), signature(kv_last_page_len), (k_cache.data_ptr() | v_cache.data_ptr()) % 16)
    except AttributeError:
        key_sig = None
    plan = _PLANS.get(key_sig)
    if plan is None:
        plan = _PLANS.put(key_sig, plan_append(key, value, batch_indices, positions, k_cache, v_cache, kv_indices,
                                               kv_indptr, kv_last_page_len, kv_layout))
    if plan.kernel is None:
        return
    if not append_rows_aligned(key, value):  # appended rows off 16-byte boundaries: from copies
        key, value = _fresh(key), _fresh(value)
        sizes = {**plan.sizes, **append_row_strides(key, value)}
    else:
        sizes = plan.sizes
    plan.kernel.launch(plan.grid, plan.device, key=key.data_ptr(), value=value.data_ptr(),
                       k_cache=k_cache.data_ptr(), v_cache=v_cache.data_ptr(), batch_indices=batch_indices.data_ptr(),
                       positions=positions.data_ptr(), kv_indices=kv_indices.data_ptr(),
                       kv_indptr=kv_indptr.data_ptr(), **sizes)


def _int32_indices(batch_indices, positions, kv_indices, kv_indptr, kv_last_page_len) -> tuple:
    """The five index tensors, int64 ones converted to int32 as FlashInfer does (one small copy
    each: pass int32 where it matters)."""
    try:  # (identity tests: the int32 call pays a few attribute reads, no loop)
        wide = batch_indices.dtype is _I64 or positions.dtype is _I64 or kv_indices.dtype is _I64 \
            or kv_indptr.dtype is _I64 or kv_last_page_len.dtype is _I64
    except AttributeError:  # not tensors: the checks name the argument
        wide = False
    tensors = (batch_indices, positions, kv_indices, kv_indptr, kv_last_page_len)
    return tuple(t.int() if t.dtype is _I64 else t for t in tensors) if wide else tensors


@api_log
def append_paged_kv_cache(append_key, append_value, batch_indices, positions, paged_kv_cache, kv_indices, kv_indptr,
                          kv_last_page_len, kv_layout="NHD"):
    """Write appended keys and values ``[nnz, num_kv_heads, head_dim]`` into a paged KV cache, in
    place: token ``t`` of request ``batch_indices[t]`` at position ``positions[t]`` (both int32
    ``[nnz]``, e.g. from :func:`get_batch_indices_positions`) goes to page
    ``kv_indices[kv_indptr[b] + positions[t] // page_size]``, entry ``positions[t] % page_size``.
    ``paged_kv_cache``: a ``(k_cache, v_cache)`` pair, ``[pages, page_size, heads, head_dim]``
    (NHD) or ``[pages, heads, page_size, head_dim]`` (HND), or one ``[pages, 2, ...]`` tensor; its
    dtype is the appended one (FP8 caches included). A token whose page slot or page id is out
    of range writes nothing. Returns None. int64 index tensors are converted to int32 first, as
    FlashInfer does (one small copy each: pass int32 where it matters)."""
    batch_indices, positions, kv_indices, kv_indptr, kv_last_page_len = _int32_indices(
        batch_indices, positions, kv_indices, kv_indptr, kv_last_page_len)
    fused = paged_kv_cache if isinstance(paged_kv_cache, torch.Tensor) else None
    if compiling() and fused is not None:  # one op on the whole cache (no views traced)
        return _OPS["append_paged_kv_cache_fused"](append_key, append_value, batch_indices, positions, fused,
                                                   kv_indices, kv_indptr, kv_last_page_len, kv_layout)
    k_cache, v_cache = split_cache(paged_kv_cache, kv_layout)
    _append(append_key, append_value, batch_indices, positions, k_cache, v_cache, kv_indices, kv_indptr,
            kv_last_page_len, kv_layout)


@api_log
def append_paged_mla_kv_cache(append_ckv, append_kpe, batch_indices, positions, ckv_cache, kpe_cache, kv_indices,
                              kv_indptr, kv_last_page_len):
    """MLA's :func:`append_paged_kv_cache`: the compressed kv rows ``append_ckv`` [nnz, ckv_dim]
    into ``ckv_cache`` [pages, page_size, ckv_dim] and their rope part ``append_kpe``
    [nnz, kpe_dim] into ``kpe_cache`` [pages, page_size, kpe_dim], in place, at each token's page
    and entry (as :func:`append_paged_kv_cache`). Any dims whose rows are multiples of 16 bytes
    (FlashInfer's kernel: 512 and 64 only); fp16 / bf16 / FP8 caches of the rows' dtype. Returns None."""
    batch_indices, positions, kv_indices, kv_indptr, kv_last_page_len = _int32_indices(
        batch_indices, positions, kv_indices, kv_indptr, kv_last_page_len)
    if compiling():
        return _OPS["append_paged_mla_kv_cache"](append_ckv, append_kpe, batch_indices, positions, ckv_cache,
                                                 kpe_cache, kv_indices, kv_indptr, kv_last_page_len)
    _append(append_ckv, append_kpe, batch_indices, positions, ckv_cache, kpe_cache, kv_indices, kv_indptr,
            kv_last_page_len, "MLA")


# ---- torch.compile: the ops Dynamo records ------------------------------------------------------
def _no_output(*args: object) -> None:
    return None


_define_ops = [
    ("merge_state_out(Tensor v_a, Tensor s_a, Tensor v_b, Tensor s_b, Tensor(a!) v_out, Tensor(b!) s_out) -> ()",
     lambda v_a, s_a, v_b, s_b, v_out, s_out: _merge_pair(v_a, s_a, v_b, s_b, v_out, s_out, None,
                                                          ("v_a", "s_a", "v_b", "s_b"))),
    ("merge_state_in_place(Tensor(a!) v, Tensor(b!) s, Tensor v_other, Tensor s_other, Tensor? mask) -> ()",
     lambda v, s, v_other, s_other, mask: _merge_pair(v, s, v_other, s_other, v, s, mask,
                                                      ("v", "s", "v_other", "s_other"))),
    ("merge_states_out(Tensor v, Tensor s, Tensor(a!) v_out, Tensor(b!) s_out) -> ()",
     lambda v, s, v_out, s_out: _merge_stack(v, s, v_out, s_out)),
    ("append_paged_kv_cache(Tensor append_key, Tensor append_value, Tensor batch_indices, Tensor positions, "
     "Tensor(a!) k_cache, Tensor(b!) v_cache, Tensor kv_indices, Tensor kv_indptr, Tensor kv_last_page_len, "
     "str kv_layout) -> ()",
     lambda key, value, b, p, k_cache, v_cache, indices, indptr, last, layout: _append(
         key, value, b, p, k_cache, v_cache, indices, indptr, last, layout)),
    ("append_paged_mla_kv_cache(Tensor append_ckv, Tensor append_kpe, Tensor batch_indices, Tensor positions, "
     "Tensor(a!) ckv_cache, Tensor(b!) kpe_cache, Tensor kv_indices, Tensor kv_indptr, Tensor kv_last_page_len) -> ()",
     lambda ckv, kpe, b, p, ckv_cache, kpe_cache, indices, indptr, last: _append(
         ckv, kpe, b, p, ckv_cache, kpe_cache, indices, indptr, last, "MLA")),
    ("append_paged_kv_cache_fused(Tensor append_key, Tensor append_value, Tensor batch_indices, Tensor positions, "
     "Tensor(a!) paged_kv_cache, Tensor kv_indices, Tensor kv_indptr, Tensor kv_last_page_len, str kv_layout) -> ()",
     lambda key, value, b, p, cache, indices, indptr, last, layout: _append(
         key, value, b, p, *split_cache(cache, layout), indices, indptr, last, layout)),
]
_OPS = {schema.split("(", 1)[0]: define(schema, impl, _no_output) for schema, impl in _define_ops}

for _public in (merge_state, merge_state_in_place, merge_states):
    declare(_public, (Family.SIMT,), launch.DTYPES)
for _public in (append_paged_kv_cache, append_paged_mla_kv_cache):
    declare(_public, (Family.SIMT,), ("bf16", "fp16", "fp8e4m3", "fp8e5m2"))
for _public in (BatchDecodeWithPagedKVCacheWrapper, CUDAGraphBatchDecodeWithPagedKVCacheWrapper,
                single_decode_with_kv_cache, fast_decode_plan):
    declare(_public, (Family.MMA_SYNC, Family.SIMT,), (*launch.DTYPES, *launch.KV_FP8))  # q 16-bit, KV any
for _public in (get_seq_lens, get_batch_indices_positions):
    declare(_public, (), ("i32", "i64"))
