"""Prefill family, public API (FlashInfer's names, arguments and defaults):
``single_prefill_with_kv_cache``, ``BatchPrefillWithRaggedKVCacheWrapper`` and
``BatchPrefillWithPagedKVCacheWrapper`` (``paged.py``).

All run over a work array (``plan.py``) on the Hopper kernel (``sm90_kernel.py``) on sm_90, or
the mma.sync kernel (``sm80_kernel.py``) on every other GPU from sm_80: one request
for the single form, a batch (``qo_indptr`` and ``kv_indptr``, or a page table) for the
wrappers. Scores are ``q k^T * sm_scale`` (soft-capped with ``logits_soft_cap``), causal masks
are aligned to the end of each KV (append: the queries are the last ``qo_len`` of the KV),
``window_left`` keeps keys at most that far before a row's position, and lse is base 2
(FlashInfer's; merge with ``cutefi.merge_state``). Grouped heads (GQA/MQA): q head ``h`` reads
kv head ``h // group``. Checks and the launch: ``ops.py``.

Custom masks (``masks.py``; they replace the causal mask, as in FlashInfer) run on the mma.sync
kernel on every GPU. RoPE (``pos_encoding_mode="ROPE_LLAMA"``) runs inside the mma.sync kernel,
or, on Hopper, first in copies (``rotate.py``; a paged plan's pages gathered) for the TMA
kernel. FP8 K/V run on the mma.sync kernel (widened in shared memory), or on Hopper, where each
KV token serves enough q rows (``ops.FP8_WIDEN_ROWS``), widened to q's dtype in a copy for the
TMA kernel. MLA prefill (head_dim_qk 192, head_dim_vo 128; ragged K/V) and attention sinks
(``run(sinks=)``) run on both kernels. Not yet: ALiBi and other head_dim_vo != head_dim_qk
pairs: each is refused with an error naming it.
"""

from __future__ import annotations

import functools

import numpy as np
import torch

from .._capability import declare
from .._graph_cache import GraphSafeCache
from .._checks import require_cuda, require_flag, require_int, require_same_device
from .._library import compiling, define
from ..jit.logs import api_log
from ..jit.policy import Family
from . import launch, plan
from .masks import plan_mask, single_mask
from .compat import check_run_extras, remember_plan
from .ops import (RAGGED_OP, SIZES, _check_options, _check_qkv, _heads_first, _output, _rows_aligned, _scale_value,
                  _scales, check_sinks, fp8_widen, host_indptr, launch_ragged, plan_options, ragged_launch, rope_scales,
                  run_scales, stream_counter)
from .paged import BatchPrefillWithPagedKVCacheWrapper
from .rotate import rope_index
from .wrapper import PrefillWrapperBase, check_plan_extras, plan_dtype


# ---- single request ----------------------------------------------------------------------------------
class _WorkCache:
    """Device work arrays of single-request plans, by (device, lengths, mask, head_dim): the
    oldest of 256 goes when a new one comes, unless a captured graph reads it (kept alive)."""

    def __init__(self) -> None:
        self._arrays: GraphSafeCache[tuple[torch.Tensor, int, torch.Tensor]] = GraphSafeCache(256)

    def get(self, device: int, qo_len: int, kv_len: int, causal: bool, window_left: int,
            head_dim: int) -> tuple[torch.Tensor, int, torch.Tensor]:
        """(work array, pairs, ``rotate.rope_index``) on the device."""

        def upload() -> tuple[torch.Tensor, int, torch.Tensor]:
            if torch.cuda.is_current_stream_capturing():
                raise RuntimeError(f"single_prefill_with_kv_cache: no work array for qo_len={qo_len}, "
                                   f"kv_len={kv_len} yet, and none can be uploaded during CUDA graph capture: call it "
                                   "once with these lengths before capturing")
            qo_indptr, kv_indptr = np.array([0, qo_len]), np.array([0, kv_len])
            part = plan.partition(qo_indptr, kv_indptr, causal, window_left, head_dim)
            arrays = np.concatenate([part.work.reshape(-1), rope_index(qo_indptr, kv_indptr)])
            both = torch.from_numpy(arrays.astype(np.int32)).to(f"cuda:{device}")
            return both[:part.work.size], part.pairs, both[part.work.size:]

        return self._arrays.get((device, qo_len, kv_len, causal, window_left, head_dim), upload)


_SINGLE_WORK = _WorkCache()


def _single(q, k, v, out, lse, mask, causal: bool, kv_layout: str, window_left: int, scales, pdl: bool) -> None:
    device = q.get_device()
    kv_len = k.shape[0 if kv_layout == "NHD" else 1]
    work, pairs, rope = _SINGLE_WORK.get(device, q.shape[0], kv_len, causal, window_left, q.shape[2])
    heads, kv_heads = q.shape[1], k.shape[1 if kv_layout == "NHD" else 0]
    group = heads // kv_heads
    widen = fp8_widen(k.dtype, q.dtype, q.shape[0] * group, 1)
    launch_ragged(q, k, v, out, lse, work, stream_counter(device), mask, None, rope, kv_layout,
                  [pairs, heads, group, int(causal), window_left, widen, 0], scales, pdl)


_SINGLE_OP = define("single_prefill_out(Tensor q, Tensor k, Tensor v, Tensor(a!) out, Tensor(b!)? lse, Tensor? mask, "
                    "bool causal, "
                    "str kv_layout, int window_left, float[] scales, bool pdl) -> ()", _single, lambda *args: None)


@api_log
def single_prefill_with_kv_cache(q, k, v, scale_q=None, scale_k=None, scale_v=None, o_dtype=None, custom_mask=None,
                                 packed_custom_mask=None, causal=False, kv_layout="NHD", pos_encoding_mode="NONE",
                                 use_fp16_qk_reduction=False, sm_scale=None, window_left=-1, logits_soft_cap=None,
                                 rope_scale=None, rope_theta=None, backend="auto", return_lse=False,
                                 kv_cache_sf=None, k_scale=None, v_scale=None):
    """Attention of ``q`` [qo_len, num_qo_heads, head_dim] over ``k``, ``v`` [kv_len, num_kv_heads,
    head_dim] (NHD) or [num_kv_heads, kv_len, head_dim] (HND). Returns ``out`` (q's shape and
    dtype) or ``(out, lse)`` with ``return_lse`` (lse float32 [qo_len, num_qo_heads], base 2).
    FlashInfer's current argument order. ``k_scale`` multiplies the scores' scale and ``v_scale``
    the output (FP8 K/V dequantisation). Not taken (refused unless None): the per-head
    ``scale_q`` / ``scale_k`` / ``scale_v`` of FlashInfer's FP8-q path, an ``o_dtype`` other than
    q's, NVFP4 ``kv_cache_sf``. ``use_fp16_qk_reduction`` has no effect (scores are always fp32)."""
    _check_options(pos_encoding_mode, backend)
    for name, value in (("scale_q", scale_q), ("scale_k", scale_k), ("scale_v", scale_v)):
        if value is not None:
            raise NotImplementedError(f"{name}: per-head scales of FlashInfer's FP8-q prefill; cutefi takes "
                                      "float16/bfloat16 q (FP8 K/V with k_scale / v_scale)")
    check_run_extras(kv_cache_sf=kv_cache_sf)
    causal = require_flag("causal", causal)
    require_flag("return_lse", return_lse)
    window_left = require_int("window_left", window_left)
    heads, _, head_dim, _ = _check_qkv(q, k, v, kv_layout, 3)
    if o_dtype is not None and plan_dtype(o_dtype) != q.dtype:
        raise NotImplementedError(f"o_dtype={o_dtype}: cutefi's prefill writes out in q's dtype ({q.dtype})")
    score_scale, cap_scale = _scales(sm_scale, head_dim, logits_soft_cap)
    if k_scale is not None:  # (FlashInfer folds it into sm_scale, so under a soft cap it scales the tanh's input)
        score_scale *= _scale_value("k_scale", k_scale)
    scales = [score_scale, cap_scale, _scale_value("v_scale", v_scale),
              *rope_scales(pos_encoding_mode, rope_scale, rope_theta, head_dim, v.shape[2])]
    for name, t in (("q", q), ("k", k), ("v", v)):
        _rows_aligned(name, t)
    mask = None
    if custom_mask is not None or packed_custom_mask is not None:  # (it replaces the causal mask, as in FlashInfer)
        mask, causal = single_mask(custom_mask, packed_custom_mask, q.shape[0], k.shape[0 if kv_layout == "NHD" else 1],
                                   q.device), False
    require_cuda("q", q)  # (last: every other check runs on CPU tensors too)
    out = torch.empty((*q.shape[:2], v.shape[2]), dtype=q.dtype, device=q.device)  # (MLA: v's head_dim)
    lse = torch.empty(q.shape[:2], dtype=torch.float32, device=q.device) if return_lse else None
    if compiling():
        _SINGLE_OP(q, k, v, out, lse, mask, causal, kv_layout, window_left, scales, True)
    else:
        _single(q, k, v, out, lse, mask, causal, kv_layout, window_left, scales, True)
    return (out, lse) if return_lse else out


# FlashInfer's: the single form that always returns (out, lse)
single_prefill_with_kv_cache_return_lse = functools.partial(single_prefill_with_kv_cache, return_lse=True)


# ---- ragged batch ------------------------------------------------------------------------------------
class BatchPrefillWithRaggedKVCacheWrapper(PrefillWrapperBase):
    """Prefill/append attention for a ragged batch: request ``b``'s queries are rows
    ``qo_indptr[b] .. qo_indptr[b + 1]`` of ``q`` and its keys/values rows ``kv_indptr[b] ..
    kv_indptr[b + 1]`` of ``k``/``v`` (FlashInfer's wrapper; plan once per batch, run per layer).

    ``use_cuda_graph``: the work array keeps its address and size (padded with empty units) so
    ``run`` can be captured once and replayed after later plans of the same batch size and at
    most the first plan's query tokens."""

    @api_log
    def __init__(self, float_workspace_buffer, kv_layout="NHD", use_cuda_graph=False, qo_indptr_buf=None,
                 kv_indptr_buf=None, custom_mask_buf=None, mask_indptr_buf=None, backend="auto", jit_args=None,
                 jit_kwargs=None):
        self._setup(float_workspace_buffer, kv_layout, use_cuda_graph, custom_mask_buf, backend, jit_args, jit_kwargs)

    @api_log
    @remember_plan
    def plan(self, qo_indptr, kv_indptr, num_qo_heads, num_kv_heads, head_dim_qk, head_dim_vo=None, custom_mask=None,
             packed_custom_mask=None, causal=False, pos_encoding_mode="NONE", use_fp16_qk_reduction=False,
             window_left=-1, logits_soft_cap=None, sm_scale=None, rope_scale=None, rope_theta=None,
             q_data_type="float16", kv_data_type=None, o_data_type=None, non_blocking=True, prefix_len_ptr=None,
             token_pos_in_items_ptr=None, token_pos_in_items_len=0, max_item_len_ptr=None, fixed_split_size=None,
             disable_split_kv=False, seq_lens=None, seq_lens_q=None, max_token_per_sequence=None,
             max_sequence_kv=None, v_indptr=None, o_indptr=None) -> None:
        """Partition the batch: ``qo_indptr``, ``kv_indptr`` [batch + 1] int32/int64 on the host
        (no synchronisation) or the device (copied to the host once). FlashInfer's arguments in
        its order; those cutefi does not take are refused by name (``wrapper.check_plan_extras``)."""
        _check_options(pos_encoding_mode, None)
        options = plan_options(num_qo_heads, num_kv_heads, head_dim_qk, head_dim_vo, causal, window_left,
                               q_data_type, kv_data_type, sm_scale, logits_soft_cap, pos_encoding_mode, rope_scale,
                               rope_theta)
        check_plan_extras(options["q_dtype"], o_data_type, prefix_len_ptr, token_pos_in_items_ptr,
                          token_pos_in_items_len, max_item_len_ptr, seq_lens, seq_lens_q, None, v_indptr, o_indptr)
        qo_host, kv_host = host_indptr("qo_indptr", qo_indptr), host_indptr("kv_indptr", kv_indptr)
        if qo_host.shape != kv_host.shape:
            raise ValueError(f"qo_indptr and kv_indptr must have one length (batch + 1); got {qo_host.shape[0]} "
                             f"and {kv_host.shape[0]}")
        # a custom mask replaces the causal one (FlashInfer's rule)
        mask, mask_begin = plan_mask(custom_mask, packed_custom_mask, np.diff(qo_host), np.diff(kv_host), self.device,
                                     self._mask_buf, self._buffer.use_cuda_graph)
        if mask is not None:
            options["causal"] = 0
        part = plan.partition(qo_host, kv_host, bool(options["causal"]), options["window_left"], options["head_dim"],
                              mask_begin)
        pairs = self._buffer.upload(part, qo_host.shape[0] - 1, int(qo_host[-1]), bool(non_blocking))
        widen = fp8_widen(options["kv_dtype"], options["q_dtype"], int(qo_host[-1]) * options["group"],
                          qo_host.shape[0] - 1)
        rope = self._buffer.upload_rope(rope_index(qo_host, kv_host), bool(non_blocking)) if options["rope"][0] \
            else None
        self._plan = dict(options, pairs=pairs, total_q=int(qo_host[-1]), total_kv=int(kv_host[-1]), mask=mask,
                          widen=widen, entries=0, rope_index=rope)
        self._launches.clear()

    begin_forward = plan

    @api_log
    def run(self, q, k, v, *args, q_scale=None, k_scale=None, v_scale=None, o_scale=None, out=None, lse=None,
            return_lse=False, enable_pdl=None, kv_cache_sf=None, sinks=None):
        """Attention of each request's queries over its keys: ``q`` [total_q, num_qo_heads,
        head_dim], ``k``/``v`` [total_kv, num_kv_heads, head_dim] (NHD) or [num_kv_heads, total_kv,
        head_dim] (HND). Returns ``out`` or ``(out, lse)`` (lse float32 [total_q, num_qo_heads], base 2).
        ``q_scale`` and ``k_scale`` multiply the scores' scale, ``v_scale`` the output (FP8 K/V
        dequantisation); ``o_scale`` and ``kv_cache_sf`` (FlashInfer's FP8-output and NVFP4 paths)
        are refused unless None. ``sinks``: float32 [num_qo_heads] attention-sink logits (as the
        paged wrapper's)."""
        p = self._plan
        if p is None:
            raise RuntimeError("run() before plan(): call plan(qo_indptr, kv_indptr, ...) first")
        if args:
            raise TypeError(f"run() takes q, k, v and keyword arguments; got {len(args)} extra positional ones")
        if o_scale is not None or kv_cache_sf is not None:  # (a guard, not a call, on the launch path)
            check_run_extras(o_scale=o_scale, kv_cache_sf=kv_cache_sf)
        key = None
        if not compiling():  # a layout this plan ran before: only the pointers are new
            key = self._launch_key((q, k, v, out, lse, sinks), (return_lse, q_scale, k_scale, v_scale, enable_pdl))
            prepared = self._launches.get(key)
            if prepared is not None and not (q.data_ptr() | k.data_ptr() | v.data_ptr()
                                             | (out.data_ptr() if out is not None else 0)) & 15:
                return self._repeat(prepared, q, _heads_first(k, self._kv_layout), _heads_first(v, self._kv_layout),
                                    out, lse, return_lse, sinks, None, p["head_dim_vo"])
        scales = run_scales(p, q_scale, k_scale, v_scale)
        heads, kv_heads, head_dim, kv_tokens = _check_qkv(q, k, v, self._kv_layout, 3)
        if (heads, kv_heads, head_dim, v.shape[2]) != (p["heads"], p["kv_heads"], p["head_dim"], p["head_dim_vo"]) \
                or q.dtype != p["q_dtype"] or k.dtype != p["kv_dtype"]:
            raise ValueError(f"q, k, v ({heads} q heads, {kv_heads} kv heads, head_dim {head_dim}/{v.shape[2]}, "
                             f"{q.dtype}, kv {k.dtype}) differ from the plan ({p['heads']}, {p['kv_heads']}, "
                             f"{p['head_dim']}/{p['head_dim_vo']}, {p['q_dtype']}, kv {p['kv_dtype']})")
        if q.shape[0] < p["total_q"] or kv_tokens < p["total_kv"]:
            raise ValueError(f"the plan covers {p['total_q']} q and {p['total_kv']} kv tokens; q has {q.shape[0]}, "
                             f"k and v {kv_tokens}")
        for name, t in (("q", q), ("k", k), ("v", v)):
            _rows_aligned(name, t)
        work, counter = self._buffer.work, self._buffer.counter
        require_same_device(("q", q), ("float_workspace_buffer", work))
        out = _output("out", out, (*q.shape[:2], p["head_dim_vo"]), q.dtype, q)
        if return_lse or lse is not None:
            lse = _output("lse", lse, q.shape[:2], torch.float32, q)
        pdl = enable_pdl is None or bool(enable_pdl)
        sizes = [p[name] for name in SIZES]
        sinks = check_sinks(sinks, heads, q)
        if compiling():
            RAGGED_OP(q, k, v, out, lse, work, counter, p["mask"], sinks, p["rope_index"], self._kv_layout, sizes,
                      scales, pdl)
        else:
            self._launches.put(key, ragged_launch(q, k, v, out, lse, work, counter, p["mask"], sinks,
                                                  p["rope_index"], self._kv_layout, sizes, scales, pdl))
        return (out, lse) if return_lse else out

    def forward(self, q, k, v, causal=False, pos_encoding_mode="NONE", use_fp16_qk_reduction=False, window_left=-1,
                logits_soft_cap=None, sm_scale=None, rope_scale=None, rope_theta=None):
        """FlashInfer's deprecated ``forward``: :meth:`run` with these options replacing the
        plan's (``compat.PrefillWrapperCompat._forward``; ``pos_encoding_mode`` and
        ``use_fp16_qk_reduction`` are taken and ignored, as in FlashInfer)."""
        return self._forward((q, k, v), {}, dict(causal=causal,
                                                 window_left=window_left, logits_soft_cap=logits_soft_cap,
                                                 sm_scale=sm_scale, rope_scale=rope_scale, rope_theta=rope_theta))

    def forward_return_lse(self, q, k, v, causal=False, pos_encoding_mode="NONE", use_fp16_qk_reduction=False,
                           window_left=-1, logits_soft_cap=None, sm_scale=None, rope_scale=None, rope_theta=None):
        """:meth:`forward` returning ``(out, lse)``."""
        return self._forward((q, k, v), dict(return_lse=True),
                             dict(causal=causal, window_left=window_left,
                                  logits_soft_cap=logits_soft_cap, sm_scale=sm_scale, rope_scale=rope_scale,
                                  rope_theta=rope_theta))


for _public in (single_prefill_with_kv_cache, single_prefill_with_kv_cache_return_lse,
                BatchPrefillWithRaggedKVCacheWrapper, BatchPrefillWithPagedKVCacheWrapper):
    declare(_public, (Family.MMA_SYNC,), launch.DTYPES)  # (sm_90: wgmma)
