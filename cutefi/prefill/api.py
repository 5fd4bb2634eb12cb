"""Prefill family, public API (FlashInfer's names, arguments and defaults):
``single_prefill_with_kv_cache`` and ``BatchPrefillWithRaggedKVCacheWrapper``.

Both run the Hopper kernel (``sm90_kernel.py``) over a work array (``plan.py``): one request
for the single form, a ragged batch (``qo_indptr``/``kv_indptr``) for the wrapper. Scores are
``q k^T * sm_scale`` (soft-capped with ``logits_soft_cap``), causal masks are aligned to the
end of each KV (append: the queries are the last ``qo_len`` of the KV), ``window_left`` keeps
keys at most that far before a row's position, and lse is base 2 (FlashInfer's; merge with
``cutefi.merge_state``). Grouped heads (GQA/MQA): q head ``h`` reads kv head ``h // group``.

Not yet: custom masks, pos_encoding_mode other than "NONE", FP8 KV, head_dim_vo != head_dim_qk,
and targets other than sm_90a (the mma.sync kernel): each is refused with an error naming it.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from .._capability import declare
from .._checks import require_cuda, require_flag, require_int, require_real, require_same_device, require_tensor
from .._library import compiling, define
from ..dtypes import name_of
from ..jit.driver import device_info
from ..jit.logs import api_log
from ..jit.lookup import get_kernel
from ..jit.policy import Family
from . import launch, plan

_LOG2E = 1.4426950408889634
_DTYPES = (torch.float16, torch.bfloat16)
_NAMED = {"float16": torch.float16, "half": torch.float16, "bfloat16": torch.bfloat16}
KV_LAYOUTS = ("NHD", "HND")
# the scalars of a launch the op carries, in order
SIZES = ("pairs", "heads", "group", "causal", "window_left")


# ---- argument checks -----------------------------------------------------------------------------
def _check_options(custom_mask, packed_custom_mask, pos_encoding_mode: str, backend: str | None) -> None:
    if custom_mask is not None or packed_custom_mask is not None:
        raise NotImplementedError("custom_mask / packed_custom_mask: cutefi's prefill supports causal, sliding-window "
                                  "and soft-cap masks; custom masks are not implemented yet")
    if pos_encoding_mode != "NONE":
        raise NotImplementedError(f"pos_encoding_mode={pos_encoding_mode!r}: cutefi's prefill supports 'NONE' "
                                  "(apply RoPE first, e.g. with cutefi.apply_rope)")
    if backend is not None and backend not in ("auto", "cutefi"):
        raise ValueError(f"backend must be 'auto' or 'cutefi'; got {backend!r} (cutefi runs its own kernels only)")


def _scales(sm_scale, head_dim: int, logits_soft_cap) -> tuple[float, float]:
    """(multiplier of q k^T, of the tanh): scores become base-2 logits in the kernel."""
    scale = 1.0 / math.sqrt(head_dim) if sm_scale is None else require_real("sm_scale", sm_scale)
    if scale <= 0:
        raise ValueError(f"sm_scale must be > 0; got {sm_scale}")
    cap = 0.0 if logits_soft_cap is None else require_real("logits_soft_cap", logits_soft_cap)
    if cap < 0:
        raise ValueError(f"logits_soft_cap must be >= 0; got {logits_soft_cap}")
    return (scale / cap, cap * _LOG2E) if cap > 0 else (scale * _LOG2E, 0.0)


def _check_qkv(q, k, v, kv_layout: str, q_dims: int) -> tuple[int, int, int, int]:
    """(heads, kv_heads, head_dim, kv tokens) of checked q ``[tokens, heads, head_dim]`` and k, v
    (``[tokens, kv_heads, head_dim]`` NHD, ``[kv_heads, tokens, head_dim]`` HND)."""
    for name, t in (("q", q), ("k", k), ("v", v)):
        require_tensor(name, t)
    if kv_layout not in KV_LAYOUTS:
        raise ValueError(f"kv_layout must be 'NHD' or 'HND'; got {kv_layout!r}")
    if q.dim() != q_dims or k.dim() != 3 or v.dim() != 3:
        raise ValueError(f"q must be [tokens, num_qo_heads, head_dim] and k, v 3-D ({kv_layout}); got "
                         f"{tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}")
    if q.dtype not in _DTYPES:
        raise TypeError(f"q must be float16 or bfloat16; got {q.dtype}")
    if k.dtype != q.dtype or v.dtype != q.dtype:
        raise TypeError(f"k and v must have q's dtype {q.dtype} (FP8 KV is not implemented yet); got {k.dtype}, {v.dtype}")
    kv_tokens, kv_heads = (k.shape[0], k.shape[1]) if kv_layout == "NHD" else (k.shape[1], k.shape[0])
    heads, head_dim = q.shape[1], q.shape[2]
    if tuple(v.shape) != tuple(k.shape):
        raise ValueError(f"v must have k's shape {tuple(k.shape)} (head_dim_vo == head_dim_qk); got {tuple(v.shape)}")
    if k.shape[2] != head_dim:
        raise ValueError(f"k's head_dim {k.shape[2]} differs from q's {head_dim}")
    if head_dim not in launch.HEAD_DIMS:
        raise ValueError(f"head_dim must be one of {launch.HEAD_DIMS}; got {head_dim}")
    if kv_heads < 1 or heads % kv_heads:
        raise ValueError(f"num_qo_heads ({heads}) must be a positive multiple of num_kv_heads ({kv_heads})")
    require_same_device(("q", q), ("k", k), ("v", v))
    return heads, kv_heads, head_dim, kv_tokens


def _rows_aligned(name: str, t: torch.Tensor) -> None:
    """TMA: head_dim contiguous, every other stride and the base a multiple of 16 bytes."""
    size = t.element_size()
    if t.stride(-1) != 1 or any(t.stride(d) * size % 16 for d in range(t.dim() - 1)) or \
            (not compiling() and t.data_ptr() % 16):
        raise ValueError(f"{name} rows must start on 16-byte boundaries with head_dim contiguous; got strides "
                         f"{tuple(t.stride())}")


def _heads_first(t: torch.Tensor, layout: str) -> torch.Tensor:
    """The kernel's [heads, tokens, head_dim] view."""
    return t.transpose(0, 1) if layout == "NHD" else t


def _output(name: str, tensor, shape, dtype, like: torch.Tensor) -> torch.Tensor:
    if tensor is None:
        return torch.empty(shape, dtype=dtype, device=like.device)
    require_tensor(name, tensor)
    if tuple(tensor.shape) != tuple(shape) or tensor.dtype != dtype:
        raise ValueError(f"{name} must be {tuple(shape)} {dtype}; got {tuple(tensor.shape)} {tensor.dtype}")
    if name == "out":
        _rows_aligned(name, tensor)
    require_same_device(("q", like), (name, tensor))
    return tensor


# ---- the launch ------------------------------------------------------------------------------------
def _launch(q, k, v, out, lse, work, counter, kv_layout: str, sizes, scales, pdl: bool) -> None:
    """Run the kernel on checked tensors: q/out [tokens, heads, d], k/v in ``kv_layout``;
    ``counter``: the int32 the CTAs take units from (zero between launches: the kernel puts
    it back; launches sharing one must not overlap in time)."""
    p = dict(zip(SIZES, sizes))
    units = p["pairs"] * p["heads"]
    if units == 0 or q.shape[0] == 0:
        return
    device = q.get_device()
    if k.shape[0 if kv_layout == "NHD" else 1] == 0:  # no keys anywhere (TMA cannot describe it)
        out.zero_()
        if lse is not None:
            lse.fill_(-math.inf)
        return
    kernel = get_kernel(launch.SM90_SPECS[(name_of(q.dtype), q.shape[2])], device)
    ctas = min(units, device_info(device).sms)
    kernel.launch((ctas, 1, 1), device, None, pdl, q=q.transpose(0, 1), k=_heads_first(k, kv_layout),
                  v=_heads_first(v, kv_layout), out=out.data_ptr(), lse=lse.data_ptr() if lse is not None else 0,
                  work=work.data_ptr(), counter=counter.data_ptr(), units=units, heads=p["heads"], group=p["group"], causal=p["causal"],
                  window_left=p["window_left"], write_lse=int(lse is not None), ctas=ctas, q_mult=scales[0],
                  cap_scale=scales[1], out_stride_token=out.stride(0), out_stride_head=out.stride(1),
                  lse_stride_token=lse.stride(0) if lse is not None else 0,
                  lse_stride_head=lse.stride(1) if lse is not None else 0)


_OP = define("prefill_out(Tensor q, Tensor k, Tensor v, Tensor(a!) out, Tensor(b!)? lse, Tensor work, "
             "Tensor(c!) counter, str kv_layout, int[] sizes, float[] scales, bool pdl) -> ()", _launch,
             lambda *args: None)
_COUNTERS: dict[tuple[int, int], torch.Tensor] = {}


def _stream_counter(device: int) -> torch.Tensor:
    """The unit counter of single-request launches on this device's current stream (one a
    stream: launches on one stream never overlap)."""
    key = (device, torch._C._cuda_getCurrentRawStream(device))
    counter = _COUNTERS.get(key)
    if counter is None:
        if len(_COUNTERS) > 1024:
            _COUNTERS.clear()
        counter = _COUNTERS[key] = torch.zeros(1, dtype=torch.int32, device=f"cuda:{device}")
    return counter


class _WorkCache:
    """Device work arrays of single-request plans, by (device, lengths, mask, head_dim)."""

    def __init__(self) -> None:
        self._arrays: dict[tuple, tuple[torch.Tensor, int]] = {}

    def get(self, device: int, qo_len: int, kv_len: int, causal: bool, window_left: int,
            head_dim: int) -> tuple[torch.Tensor, int]:
        key = (device, qo_len, kv_len, causal, window_left, head_dim)
        found = self._arrays.get(key)
        if found is None:
            part = plan.partition(np.array([0, qo_len]), np.array([0, kv_len]), causal, window_left, head_dim)
            work = torch.from_numpy(part.work.reshape(-1)).to(f"cuda:{device}")
            if len(self._arrays) > 256:
                self._arrays.clear()
            found = self._arrays[key] = (work, part.pairs)
        return found


_SINGLE_WORK = _WorkCache()


def _single(q, k, v, out, lse, causal: bool, kv_layout: str, window_left: int, scales, pdl: bool) -> None:
    device = q.get_device()
    kv_len = k.shape[0 if kv_layout == "NHD" else 1]
    work, pairs = _SINGLE_WORK.get(device, q.shape[0], kv_len, causal, window_left, q.shape[2])
    heads, kv_heads = q.shape[1], k.shape[1 if kv_layout == "NHD" else 0]
    _launch(q, k, v, out, lse, work, _stream_counter(device), kv_layout,
            [pairs, heads, heads // kv_heads, int(causal), window_left], scales, pdl)


_SINGLE_OP = define("single_prefill_out(Tensor q, Tensor k, Tensor v, Tensor(a!) out, Tensor(b!)? lse, bool causal, "
                    "str kv_layout, int window_left, float[] scales, bool pdl) -> ()", _single, lambda *args: None)


# ---- single request ----------------------------------------------------------------------------------
@api_log
def single_prefill_with_kv_cache(q, k, v, custom_mask=None, packed_custom_mask=None, causal=False, kv_layout="NHD",
                                 pos_encoding_mode="NONE", use_fp16_qk_reduction=False, sm_scale=None,
                                 window_left=-1, logits_soft_cap=None, rope_scale=None, rope_theta=None,
                                 backend="auto", return_lse=False):
    """Attention of ``q`` [qo_len, num_qo_heads, head_dim] over ``k``, ``v`` [kv_len, num_kv_heads,
    head_dim] (NHD) or [num_kv_heads, kv_len, head_dim] (HND). Returns ``out`` (q's shape and
    dtype) or ``(out, lse)`` with ``return_lse`` (lse float32 [qo_len, num_qo_heads], base 2).
    ``use_fp16_qk_reduction`` is accepted and has no effect (scores are always fp32)."""
    _check_options(custom_mask, packed_custom_mask, pos_encoding_mode, backend)
    causal = require_flag("causal", causal)
    require_flag("return_lse", return_lse)
    window_left = require_int("window_left", window_left)
    heads, _, head_dim, _ = _check_qkv(q, k, v, kv_layout, 3)
    scales = list(_scales(sm_scale, head_dim, logits_soft_cap))
    for name, t in (("q", q), ("k", k), ("v", v)):
        _rows_aligned(name, t)
    require_cuda("q", q)  # (last: every other check runs on CPU tensors too)
    out = torch.empty_like(q, memory_format=torch.contiguous_format)
    lse = torch.empty(q.shape[:2], dtype=torch.float32, device=q.device) if return_lse else None
    if compiling():
        _SINGLE_OP(q, k, v, out, lse, causal, kv_layout, window_left, scales, True)
    else:
        _single(q, k, v, out, lse, causal, kv_layout, window_left, scales, True)
    return (out, lse) if return_lse else out


# ---- ragged batch ------------------------------------------------------------------------------------
def _host_indptr(name: str, indptr) -> np.ndarray:
    require_tensor(name, indptr)
    if indptr.dtype not in (torch.int32, torch.int64) or indptr.dim() != 1 or indptr.shape[0] < 1:
        raise ValueError(f"{name} must be a 1-D int32/int64 tensor [batch + 1]; got {tuple(indptr.shape)} {indptr.dtype}")
    host = (indptr.cpu() if indptr.is_cuda else indptr).numpy().astype(np.int64)
    if host[0] != 0 or (host[1:] < host[:-1]).any():
        raise ValueError(f"{name} must start at 0 and never decrease")
    return host


class BatchPrefillWithRaggedKVCacheWrapper:
    """Prefill/append attention for a ragged batch: request ``b``'s queries are rows
    ``qo_indptr[b] .. qo_indptr[b + 1]`` of ``q`` and its keys/values rows ``kv_indptr[b] ..
    kv_indptr[b + 1]`` of ``k``/``v`` (FlashInfer's wrapper; plan once per batch, run per layer).

    ``use_cuda_graph``: the work array keeps its address and size (padded with empty units) so
    ``run`` can be captured once and replayed after later plans of the same batch size and at
    most the first plan's query tokens."""

    @api_log
    def __init__(self, float_workspace_buffer, kv_layout="NHD", use_cuda_graph=False, qo_indptr_buf=None,
                 kv_indptr_buf=None, custom_mask_buf=None, mask_indptr_buf=None, backend="auto", jit_args=None):
        require_tensor("float_workspace_buffer", float_workspace_buffer)
        self.device = require_cuda("float_workspace_buffer", float_workspace_buffer)
        if kv_layout not in KV_LAYOUTS:
            raise ValueError(f"kv_layout must be 'NHD' or 'HND'; got {kv_layout!r}")
        _check_options(custom_mask_buf, None, "NONE", backend)
        self._kv_layout = kv_layout
        self._use_cuda_graph = bool(require_flag("use_cuda_graph", use_cuda_graph))
        self._plan: dict | None = None
        self._work: torch.Tensor | None = None
        self._counter = torch.zeros(1, dtype=torch.int32, device=f"cuda:{self.device}")  # (runs must not overlap)
        self._capacity = 0

    @property
    def is_cuda_graph_enabled(self) -> bool:
        return self._use_cuda_graph

    @api_log
    def plan(self, qo_indptr, kv_indptr, num_qo_heads, num_kv_heads, head_dim_qk, head_dim_vo=None, custom_mask=None,
             packed_custom_mask=None, causal=False, pos_encoding_mode="NONE", use_fp16_qk_reduction=False,
             window_left=-1, logits_soft_cap=None, sm_scale=None, rope_scale=None, rope_theta=None,
             q_data_type="float16", kv_data_type=None, non_blocking=True, prefix_len_ptr=None,
             token_pos_in_items_ptr=None, token_pos_in_items_len=0, max_item_len_ptr=None, fixed_split_size=None,
             disable_split_kv=False) -> None:
        """Partition the batch: ``qo_indptr``, ``kv_indptr`` [batch + 1] int32/int64 on the host
        (no synchronisation) or the device (copied to the host once)."""
        _check_options(custom_mask, packed_custom_mask, pos_encoding_mode, None)
        heads, kv_heads = require_int("num_qo_heads", num_qo_heads), require_int("num_kv_heads", num_kv_heads)
        head_dim = require_int("head_dim_qk", head_dim_qk)
        if head_dim_vo is not None and require_int("head_dim_vo", head_dim_vo) != head_dim:
            raise NotImplementedError(f"head_dim_vo ({head_dim_vo}) != head_dim_qk ({head_dim}) is not implemented yet")
        if head_dim not in launch.HEAD_DIMS:
            raise ValueError(f"head_dim_qk must be one of {launch.HEAD_DIMS}; got {head_dim}")
        if kv_heads < 1 or heads < 1 or heads % kv_heads:
            raise ValueError(f"num_qo_heads ({heads}) must be a positive multiple of num_kv_heads ({kv_heads})")
        causal = require_flag("causal", causal)
        window_left = require_int("window_left", window_left)
        q_dtype = q_data_type if isinstance(q_data_type, torch.dtype) else _NAMED.get(str(q_data_type).replace("torch.", ""))
        if q_dtype not in _DTYPES:
            raise TypeError(f"q_data_type must be float16 or bfloat16; got {q_data_type!r}")
        if kv_data_type is not None and kv_data_type not in (q_dtype, str(q_dtype).replace("torch.", "")):
            raise NotImplementedError(f"kv_data_type {kv_data_type!r} differs from q_data_type: FP8 KV is not "
                                      "implemented yet")
        qo_host, kv_host = _host_indptr("qo_indptr", qo_indptr), _host_indptr("kv_indptr", kv_indptr)
        if qo_host.shape != kv_host.shape:
            raise ValueError(f"qo_indptr and kv_indptr must have one length (batch + 1); got {qo_host.shape[0]} "
                             f"and {kv_host.shape[0]}")
        part = plan.partition(qo_host, kv_host, causal, window_left, head_dim)
        work = part.work
        if self._use_cuda_graph:
            if self._work is None:  # (a request adds at most one partial tile)
                self._capacity = int(qo_host.shape[0] - 1 + -(-qo_host[-1] // launch.TILE_M))
            if part.pairs > self._capacity:
                raise ValueError(f"this plan has {part.pairs} q tiles, more than the {self._capacity} the CUDA-graph "
                                 "wrapper was sized for at its first plan")
            padded = np.zeros((launch.WORK_ROWS, self._capacity), dtype=np.int32)  # empty units: nothing stored
            padded[:, :part.pairs] = work
            work = padded
        staged = torch.from_numpy(np.ascontiguousarray(work).reshape(-1))
        if self._work is None or self._work.numel() != staged.numel() and not self._use_cuda_graph:
            self._work = torch.empty(staged.numel(), dtype=torch.int32, device=f"cuda:{self.device}")
        self._work.copy_(staged.pin_memory() if non_blocking else staged, non_blocking=bool(non_blocking))
        self._plan = dict(pairs=work.shape[1], heads=heads, kv_heads=kv_heads, group=heads // kv_heads,
                          head_dim=head_dim, causal=int(causal), window_left=window_left, q_dtype=q_dtype,
                          total_q=int(qo_host[-1]), total_kv=int(kv_host[-1]),
                          scales=list(_scales(sm_scale, head_dim, logits_soft_cap)))

    begin_forward = plan

    @api_log
    def run(self, q, k, v, *args, q_scale=None, k_scale=None, v_scale=None, out=None, lse=None, return_lse=False,
            enable_pdl=None):
        """Attention of each request's queries over its keys: ``q`` [total_q, num_qo_heads,
        head_dim], ``k``/``v`` [total_kv, num_kv_heads, head_dim] (NHD) or [num_kv_heads, total_kv,
        head_dim] (HND). Returns ``out`` or ``(out, lse)`` (lse float32 [total_q, num_qo_heads], base 2)."""
        p = self._plan
        if p is None:
            raise RuntimeError("run() before plan(): call plan(qo_indptr, kv_indptr, ...) first")
        if args:
            raise TypeError(f"run() takes q, k, v and keyword arguments; got {len(args)} extra positional ones")
        if q_scale is not None or k_scale is not None or v_scale is not None:
            raise NotImplementedError("q_scale / k_scale / v_scale: FP8 prefill is not implemented yet")
        heads, kv_heads, head_dim, kv_tokens = _check_qkv(q, k, v, self._kv_layout, 3)
        if (heads, kv_heads, head_dim) != (p["heads"], p["kv_heads"], p["head_dim"]) or q.dtype != p["q_dtype"]:
            raise ValueError(f"q, k, v ({heads} q heads, {kv_heads} kv heads, head_dim {head_dim}, {q.dtype}) differ "
                             f"from the plan ({p['heads']}, {p['kv_heads']}, {p['head_dim']}, {p['q_dtype']})")
        if q.shape[0] < p["total_q"] or kv_tokens < p["total_kv"]:
            raise ValueError(f"the plan covers {p['total_q']} q and {p['total_kv']} kv tokens; q has {q.shape[0]}, "
                             f"k and v {kv_tokens}")
        for name, t in (("q", q), ("k", k), ("v", v)):
            _rows_aligned(name, t)
        require_same_device(("q", q), ("float_workspace_buffer", self._work))
        out = _output("out", out, q.shape, q.dtype, q)
        if return_lse or lse is not None:
            lse = _output("lse", lse, q.shape[:2], torch.float32, q)
        pdl = enable_pdl is None or bool(enable_pdl)
        sizes = [p[name] for name in SIZES]
        if compiling():
            _OP(q, k, v, out, lse, self._work, self._counter, self._kv_layout, sizes, p["scales"], pdl)
        else:
            _launch(q, k, v, out, lse, self._work, self._counter, self._kv_layout, sizes, p["scales"], pdl)
        return (out, lse) if return_lse else out

    forward = run


for _public in (single_prefill_with_kv_cache, BatchPrefillWithRaggedKVCacheWrapper):
    declare(_public, (Family.WGMMA,), launch.DTYPES)
