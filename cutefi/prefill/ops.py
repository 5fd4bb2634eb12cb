"""The prefill family's shared pieces: argument checks, the launch of the Hopper kernel or the
mma.sync one (ragged or paged K/V) and the torch ops torch.compile records."""

from __future__ import annotations

import math
import os

import numpy as np
import torch

from .._checks import require_flag, require_int, require_real, require_same_device, require_tensor
from .._graph_cache import GraphSafeCache
from .._library import compiling, define
from ..dtypes import name_of
from ..jit.driver import device_info
from ..attention.decode import _rope
from ..attention.decode_compat import check_backend
from ..jit.lookup import device_cc, get_kernel
from . import launch
from .rotate import rotated, rotated_pages

_LOG2E = 1.4426950408889634
_DTYPES = (torch.float16, torch.bfloat16)
_NAMED = {"float16": torch.float16, "half": torch.float16, "bfloat16": torch.bfloat16,
          "float8_e4m3fn": torch.float8_e4m3fn, "float8_e5m2": torch.float8_e5m2}
_KV_FP8 = (torch.float8_e4m3fn, torch.float8_e5m2)
KV_LAYOUTS = ("NHD", "HND")
# run the mma.sync kernel on Hopper too (tests and benchmarks of that kernel on an H100/H200)
MMA_SYNC_ONLY = os.environ.get("CUTEFI_PREFILL_MMA_SYNC", "") == "1"
SOFTWARE_FP8 = False  # (tests: the sm_80/86 e4m3 widening build where it has one)
# FP8 K/V on Hopper: widened to q's dtype before the TMA kernel (``widen_kernel.py``: a dense
# copy of the ragged K/V, or of the plan's pages) where a KV token serves at least this many q
# rows (qo_len x group, the batch's mean): the copy costs 3 bytes an element and the TMA kernel
# reads 2, against the mma.sync kernel's 1 (which widens in shared memory), so it pays where the
# mma.sync kernel is compute bound and ~2.7x slower (break-even near 200 rows, d128)
FP8_WIDEN_ROWS = 256
# the scalars of a launch the op carries, in order ("widen": 1, FP8 K/V are widened for Hopper's
# kernel; "entries": a paged plan's page-table entries, which its pre-passes gather (0: none, as
# in CUDA-graph mode, where a captured gather of one plan's pages would not serve the next))
SIZES = ("pairs", "heads", "group", "causal", "window_left", "widen", "entries")


# ---- argument checks -----------------------------------------------------------------------------
def _check_options(pos_encoding_mode: str, backend: str | None) -> None:
    if pos_encoding_mode not in ("NONE", "ROPE_LLAMA"):
        raise NotImplementedError(f"pos_encoding_mode={pos_encoding_mode!r}: cutefi's prefill supports 'NONE' and "
                                  "'ROPE_LLAMA'")
    if backend is not None:
        check_backend(backend)


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
    if k.dtype not in (q.dtype, *_KV_FP8) or v.dtype != k.dtype:
        raise TypeError(f"k and v must both have q's dtype {q.dtype} or both be float8_e4m3fn / float8_e5m2; got "
                        f"{k.dtype}, {v.dtype}")
    kv_tokens, kv_heads = (k.shape[0], k.shape[1]) if kv_layout == "NHD" else (k.shape[1], k.shape[0])
    heads, head_dim = q.shape[1], q.shape[2]
    if k.shape[2] != head_dim:
        raise ValueError(f"k's head_dim {k.shape[2]} differs from q's {head_dim}")
    mla = (head_dim, v.shape[2]) == launch.MLA_HEAD_DIMS
    if tuple(v.shape[:2]) != tuple(k.shape[:2]) or (v.shape[2] != head_dim and not mla):
        raise ValueError(f"v must have k's shape {tuple(k.shape)} (or head_dim_vo {launch.MLA_HEAD_DIMS[1]} with "
                         f"head_dim_qk {launch.MLA_HEAD_DIMS[0]}: MLA); got {tuple(v.shape)}")
    if head_dim not in launch.HEAD_DIMS and not mla:
        raise ValueError(f"head_dim must be one of {launch.HEAD_DIMS} (or q/k {launch.MLA_HEAD_DIMS[0]} with v "
                         f"{launch.MLA_HEAD_DIMS[1]}); got {head_dim}")
    if mla and k.dtype != q.dtype:
        raise TypeError("MLA prefill (head_dim_qk 192, head_dim_vo 128) takes 16-bit k and v, not FP8")
    if kv_heads < 1 or heads % kv_heads:
        raise ValueError(f"num_qo_heads ({heads}) must be a positive multiple of num_kv_heads ({kv_heads})")
    require_same_device(("q", q), ("k", k), ("v", v))
    return heads, kv_heads, head_dim, kv_tokens


def _rows_aligned(name: str, t: torch.Tensor) -> None:
    """TMA: head_dim contiguous, every other stride and the base a multiple of 16 bytes (3-D
    tensors, the launch path's, tested without a loop)."""
    size, strides = t.element_size(), t.stride()
    if len(strides) == 3:
        bad = strides[2] != 1 or (strides[0] * size) % 16 or (strides[1] * size) % 16
    else:
        bad = strides[-1] != 1 or any(stride * size % 16 for stride in strides[:-1])
    if bad or (not compiling() and t.data_ptr() % 16):
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
class TmaLaunch:
    """The Hopper kernel's launch of a checked run with all but the tensors' addresses fixed (its
    build, grid, scalars and output strides). ``launch_kernel`` builds and calls one; the batch
    wrappers keep it by call layout, so a repeated run pays for the launch alone."""

    __slots__ = ("kernel", "device", "ctas", "pdl", "paged", "args")

    def __init__(self, q, v_view, out, lse, page_size: int, p: dict, units: int, scales, pdl: bool,
                 has_sinks: bool) -> None:
        self.device = device = q.get_device()
        dtype, head_dim = name_of(q.dtype), q.shape[2]
        mla = v_view.shape[-1] != head_dim
        spec = (launch.PAGED_SPECS[(dtype, head_dim, page_size)] if page_size else launch.SM90_MLA_SPECS[dtype]
                if mla else launch.SM90_SPECS[(dtype, head_dim)])
        self.kernel = get_kernel(spec, device)
        self.ctas = ctas = min(units, device_info(device).sms)
        self.pdl, self.paged = pdl, bool(page_size)
        self.args = dict(has_sinks=int(has_sinks), units=units, heads=p["heads"], group=p["group"],
                         causal=p["causal"], window_left=p["window_left"], write_lse=int(lse is not None), ctas=ctas,
                         q_mult=scales[0], cap_scale=scales[1], out_scale=scales[2], out_stride_token=out.stride(0),
                         out_stride_head=out.stride(1), lse_stride_token=lse.stride(0) if lse is not None else 0,
                         lse_stride_head=lse.stride(1) if lse is not None else 0)

    def __call__(self, q, k_view, v_view, out, lse, work, counter, kv_indices, sinks) -> None:
        """Launch on these tensors (laid out as the ones this was built for)."""
        paged = {"kv_indices": kv_indices.data_ptr()} if self.paged else {}
        self.kernel.launch((self.ctas, 1, 1), self.device, None, self.pdl, q=q.transpose(0, 1), k=k_view, v=v_view,
                           out=out.data_ptr(), lse=lse.data_ptr() if lse is not None else 0, work=work.data_ptr(),
                           counter=counter.data_ptr(), sinks=sinks.data_ptr() if sinks is not None else 0, **paged,
                           **self.args)


def launch_kernel(q, k_view, v_view, out, lse, work, counter, kv_indices, page_size: int, sizes, scales,
                  pdl: bool, mask: torch.Tensor | None = None, sinks: torch.Tensor | None = None) -> TmaLaunch | None:
    """Run the kernel on checked tensors: q/out [tokens, heads, d]; ``k_view``/``v_view``
    [kv_heads, tokens, d] (``page_size`` 0) or [pages, kv_heads, page_size, d] with
    ``kv_indices``; ``counter``: the int32 the CTAs take units from (zero between launches:
    the kernel puts it back; launches sharing one must not overlap in time); ``mask``: a packed
    custom mask (``masks.py``; the work array holds each request's first byte); ``sinks``:
    float32 [heads] attention-sink logits. Returns the launch where the Hopper kernel took the
    tensors as given (no pre-pass: a later run of the same layout can repeat it), else None."""
    p = dict(zip(SIZES, sizes))
    units = p["pairs"] * p["heads"]
    if units == 0 or q.shape[0] == 0:
        return None
    device, head_dim = q.get_device(), q.shape[2]
    rope = scales[3] > 0  # (in-kernel RoPE: the mma.sync kernel's)
    mla = v_view.shape[-1] != head_dim  # (the Hopper kernel's MLA build is ragged only)
    tma = mask is None and not rope and not (mla and page_size) and uses_tma_kernel(device, page_size)
    widened = None
    if tma and k_view.dtype != q.dtype and p.get("widen", 0) and (p.get("entries", 0) or not page_size):
        widened = _widened(q.dtype, k_view, v_view, kv_indices, page_size, p.get("entries", 0), pdl)
        if widened is not None:
            k_view, v_view, kv_indices = widened
    if not tma or k_view.dtype != q.dtype:
        _launch_mma_sync(q, k_view, v_view, out, lse, work, kv_indices, page_size, p, units, scales, pdl, mask,
                         sinks)
        return None
    tma_launch = TmaLaunch(q, v_view, out, lse, page_size, p, units, scales, pdl, sinks is not None)
    tma_launch(q, k_view, v_view, out, lse, work, counter, kv_indices, sinks)
    return tma_launch if widened is None else None


def _widened(dtype: torch.dtype, k_view: torch.Tensor, v_view: torch.Tensor, kv_indices, page_size: int,
              entries: int, pdl: bool):
    """FP8 K/V as dense ``dtype`` copies for the TMA kernel (``widen_kernel.py``), with the
    page table they now need: the ragged views whole ([kv_heads, tokens, d] views of NHD
    copies), or the pages of the first ``entries`` page-table entries in entry order (ids
    clamped to the cache; entry e becomes page e). None where the strides do not allow it."""
    heads, d = k_view.shape[-3], k_view.shape[-1]
    if page_size:  # [pages, kv_heads, page_size, d]: rows (entry, kv head, page row)
        outer, inner_b, shape = entries, page_size, (entries, heads, page_size, d)
        strides = [t.stride()[:3] for t in (k_view, v_view)]
    else:  # [kv_heads, tokens, d]: rows (token, kv head)
        outer, inner_b, shape = k_view.shape[1], 1, (k_view.shape[1], heads, d)
        strides = [(t.stride(1), t.stride(0), 0) for t in (k_view, v_view)]
    rows = outer * heads * inner_b
    if any(s % 16 for group in strides for s in group) or k_view.stride(-1) != 1 or v_view.stride(-1) != 1 \
            or rows * (d // 16) >= 2**31 - launch.WIDEN_THREADS:
        return None
    device = k_view.get_device()
    k_out = torch.empty(shape, dtype=dtype, device=k_view.device)
    v_out = torch.empty_like(k_out)
    kernel = get_kernel(launch.WIDEN_SPECS[(name_of(dtype), name_of(k_view.dtype))], device)
    blocks = -(-rows * (d // 16) // launch.WIDEN_THREADS)
    if blocks:
        kernel.launch((blocks, 2, 1), device, None, pdl, k_src=k_view.data_ptr(), v_src=v_view.data_ptr(),
                      k_dst=k_out.data_ptr(), v_dst=v_out.data_ptr(),
                      ids=kv_indices.data_ptr() if page_size else 0, rows=rows, head_dim=d, inner_a=heads,
                      inner_b=inner_b, paged=int(bool(page_size)), sources=k_view.shape[0],
                      **dict(zip(launch.WIDEN_STRIDES, (*strides[0], *strides[1]))))
    if not page_size:
        return k_out.transpose(0, 1), v_out.transpose(0, 1), kv_indices
    return k_out, v_out, torch.arange(entries, dtype=torch.int32, device=k_view.device)


def fp8_widen(kv_dtype: torch.dtype, q_dtype: torch.dtype, rows: int, requests: int) -> int:
    """A plan's ``widen`` flag (``SIZES``): whether ``rows`` q rows a kv head (qo tokens x group)
    over ``requests`` requests make FP8 K/V worth widening for Hopper's kernel."""
    return int(kv_dtype != q_dtype and rows >= FP8_WIDEN_ROWS * max(requests, 1))


def uses_tma_kernel(device: int, page_size: int) -> bool:
    """The Hopper kernel runs on sm_90 for ragged K/V and its page sizes (FP8 K/V and RoPE after
    a pre-pass, where one applies); the mma.sync kernel everywhere else (and everywhere with
    ``MMA_SYNC_ONLY``), and for custom masks and paged MLA."""
    return not MMA_SYNC_ONLY and device_cc(device) == (9, 0) and (page_size == 0 or page_size in launch.PAGE_SIZES)


def _launch_mma_sync(q, k_view, v_view, out, lse, work, kv_indices, page_size: int, p: dict, units: int, scales,
                     pdl: bool, mask: torch.Tensor | None, sinks: torch.Tensor | None) -> None:
    """The mma.sync kernel: one CTA a unit; K and V read with one set of strides (copied to
    a shared layout where they differ)."""
    mla = v_view.shape[-1] != q.shape[2]  # (V's rows read with V's own strides)
    if k_view.stride() != v_view.stride() and not mla:
        k_view, v_view = k_view.contiguous(), v_view.contiguous()
    key = (name_of(q.dtype), q.shape[2])
    spec = (launch.SM80_MLA_SPECS[key[0]] if mla else launch.SM80_SPECS[key] if k_view.dtype == q.dtype
            else launch.SM80_FP8_SPECS[(*key, name_of(k_view.dtype))])
    if SOFTWARE_FP8 and (*key, name_of(k_view.dtype)) == ("bf16", 128, "fp8e4m3"):
        spec = launch.SM80_SOFTWARE_FP8_SPEC
    kernel = get_kernel(spec, q.get_device())
    # (ragged views [kv_heads, tokens, d]; paged [pages, kv_heads, page_size, d])
    page_stride, head_stride, token_stride = ((k_view.stride(0), *k_view.stride()[1:3]) if page_size
                                              else (0, k_view.stride(0), k_view.stride(1)))
    kernel.launch((units, 1, 1), q.get_device(), None, pdl, q=q.data_ptr(), k=k_view.data_ptr(),
                  v=v_view.data_ptr(), out=out.data_ptr(), lse=lse.data_ptr() if lse is not None else 0,
                  work=work.data_ptr(), kv_indices=kv_indices.data_ptr() if page_size else 0,
                  mask=mask.data_ptr() if mask is not None else 0, has_mask=int(mask is not None),
                  sinks=sinks.data_ptr() if sinks is not None else 0, has_sinks=int(sinks is not None), units=units,
                  heads=p["heads"], group=p["group"], causal=p["causal"], window_left=p["window_left"],
                  write_lse=int(lse is not None), page_size=page_size, num_pages=k_view.shape[0] if page_size else 0,
                  has_rope=int(scales[3] > 0), rope_rcp_scale=scales[3], rope_log2_step=scales[4],
                  q_mult=scales[0], cap_scale=scales[1], out_scale=scales[2], q_stride_token=q.stride(0),
                  q_stride_head=q.stride(1),
                  kv_stride_page=page_stride, kv_stride_token=token_stride, kv_stride_head=head_stride,
                  v_stride_token=v_view.stride(1) if not page_size else token_stride,
                  v_stride_head=v_view.stride(0) if not page_size else head_stride,
                  out_stride_token=out.stride(0), out_stride_head=out.stride(1),
                  lse_stride_token=lse.stride(0) if lse is not None else 0,
                  lse_stride_head=lse.stride(1) if lse is not None else 0)


def ragged_launch(q, k, v, out, lse, work, counter, mask, sinks, rope_index, kv_layout: str, sizes, scales,
                  pdl: bool) -> TmaLaunch | None:
    """q/out [tokens, heads, d]; k/v in ``kv_layout`` (NHD [tokens, kv_heads, d], HND [kv_heads, tokens,
    d]); ``rope_index``: the plan's ``rotate.rope_index`` (with in-kernel RoPE). Returns the
    launch a later run of this layout can repeat (``launch_kernel``), or None."""
    if k.shape[0 if kv_layout == "NHD" else 1] == 0:  # no keys anywhere (TMA cannot describe it)
        if q.shape[0]:
            out.zero_()
            if lse is not None:
                lse.fill_(-math.inf)
        return None
    k_view = _heads_first(k, kv_layout)
    if scales[3] > 0 and rope_index is not None and mask is None and k.dtype == q.dtype and \
            v.shape[-1] == q.shape[-1] and uses_tma_kernel(q.get_device(), 0):
        # RoPE first, in copies, so Hopper's TMA kernel (which has none inside) takes the call
        q, k_rows = rotated(q, k_view.transpose(0, 1), rope_index, scales[3], scales[4])
        k_view, scales = k_rows.transpose(0, 1), [*scales[:3], 0.0, scales[4]]
        launch_kernel(q, k_view, _heads_first(v, kv_layout), out, lse, work, counter, None, 0, sizes, scales, pdl,
                      mask, sinks)
        return None  # (a pre-pass: not repeatable from the caller's tensors)
    return launch_kernel(q, k_view, _heads_first(v, kv_layout), out, lse, work, counter, None, 0, sizes, scales, pdl,
                         mask, sinks)


def launch_ragged(*args) -> None:
    """:func:`ragged_launch` for the torch op and the single form (nothing returned)."""
    ragged_launch(*args)


def paged_views(k_cache: torch.Tensor, v_cache: torch.Tensor, kv_layout: str) -> tuple[torch.Tensor, torch.Tensor]:
    """The kernel's [pages, kv_heads, page_size, d] views of the caches."""
    return (k_cache.transpose(1, 2), v_cache.transpose(1, 2)) if kv_layout == "NHD" else (k_cache, v_cache)


def paged_launch(q, k_cache, v_cache, out, lse, work, counter, kv_indices, mask, sinks, rope_index, kv_layout: str,
                 page_size: int, sizes, scales, pdl: bool) -> TmaLaunch | None:
    """q/out [tokens, heads, d]; caches [pages, page_size, kv_heads, d] (NHD) or [pages, kv_heads,
    page_size, d] (HND); ``rope_index``: the plan's ``rotate.rope_index`` (with in-kernel RoPE).
    Returns the launch a later run of this layout can repeat, or None."""
    k_view, v_view = paged_views(k_cache, v_cache, kv_layout)
    entries = dict(zip(SIZES, sizes)).get("entries", 0)
    if scales[3] > 0 and rope_index is not None and entries > 0 and mask is None and k_cache.dtype == q.dtype and \
            uses_tma_kernel(q.get_device(), page_size):
        # RoPE first (q and the plan's pages, in copies), so Hopper's TMA kernel takes the call
        q, k_view, v_view, kv_indices = rotated_pages(q, k_view, v_view, kv_indices, entries, rope_index, scales[3],
                                                      scales[4])
        scales = [*scales[:3], 0.0, scales[4]]
        launch_kernel(q, k_view, v_view, out, lse, work, counter, kv_indices, page_size, sizes, scales, pdl, mask,
                      sinks)
        return None  # (a pre-pass: not repeatable from the caller's tensors)
    return launch_kernel(q, k_view, v_view, out, lse, work, counter, kv_indices, page_size, sizes, scales, pdl, mask,
                         sinks)


def launch_paged(*args) -> None:
    """:func:`paged_launch` for the torch op (nothing returned)."""
    paged_launch(*args)


RAGGED_OP = define("prefill_out(Tensor q, Tensor k, Tensor v, Tensor(a!) out, Tensor(b!)? lse, Tensor work, "
                   "Tensor(c!) counter, Tensor? mask, Tensor? sinks, Tensor? rope_index, str kv_layout, int[] sizes, "
                   "float[] scales, bool pdl) -> ()", launch_ragged,
                   lambda *args: None)
PAGED_OP = define("paged_prefill_out(Tensor q, Tensor k_cache, Tensor v_cache, Tensor(a!) out, Tensor(b!)? lse, "
                  "Tensor work, Tensor(c!) counter, Tensor kv_indices, Tensor? mask, Tensor? sinks, "
                  "Tensor? rope_index, str kv_layout, int page_size, int[] sizes, float[] scales, bool pdl) -> ()",
                  launch_paged,
                  lambda *args: None)
# (kept alive past eviction where a captured graph uses them)
_COUNTERS: GraphSafeCache[torch.Tensor] = GraphSafeCache(1024)


def stream_counter(device: int) -> torch.Tensor:
    """The unit counter of single-request launches on this device's current stream (one a
    stream: launches on one stream never overlap)."""
    return _COUNTERS.get((device, torch._C._cuda_getCurrentRawStream(device)),
                         lambda: torch.zeros(1, dtype=torch.int32, device=f"cuda:{device}"))


def host_indptr(name: str, indptr) -> np.ndarray:
    require_tensor(name, indptr)
    if indptr.dtype not in (torch.int32, torch.int64) or indptr.dim() != 1 or indptr.shape[0] < 1:
        raise ValueError(f"{name} must be a 1-D int32/int64 tensor [batch + 1]; got {tuple(indptr.shape)} {indptr.dtype}")
    host = (indptr.cpu() if indptr.is_cuda else indptr).numpy().astype(np.int64)
    if host[0] != 0 or (host[1:] < host[:-1]).any():
        raise ValueError(f"{name} must start at 0 and never decrease")
    return host


def rope_scales(pos_encoding_mode: str, rope_scale, rope_theta, head_dim: int, head_dim_vo: int) -> list[float]:
    """[1 / rope_scale (0: no RoPE), log2 step between dims] of FlashInfer's in-kernel Llama
    RoPE (q at position ``r + kv_len - qo_len``, k at ``t``), the last two of a launch's scales."""
    rope, rcp_scale, log2_step = _rope(pos_encoding_mode, rope_scale, rope_theta, head_dim)
    if rope and head_dim_vo != head_dim:
        raise NotImplementedError("pos_encoding_mode='ROPE_LLAMA' with head_dim_vo != head_dim_qk (MLA) is not "
                                  "implemented: MLA's RoPE covers part of the head; apply it first")
    return [rcp_scale if rope else 0.0, log2_step]


def plan_options(num_qo_heads, num_kv_heads, head_dim_qk, head_dim_vo, causal, window_left, q_data_type,
                 kv_data_type, sm_scale, logits_soft_cap, pos_encoding_mode="NONE", rope_scale=None,
                 rope_theta=None) -> dict:
    """The checked options of a wrapper's ``plan`` (the part the ragged and paged forms share)."""
    heads, kv_heads = require_int("num_qo_heads", num_qo_heads), require_int("num_kv_heads", num_kv_heads)
    head_dim = require_int("head_dim_qk", head_dim_qk)
    head_dim_vo = head_dim if head_dim_vo is None else require_int("head_dim_vo", head_dim_vo)
    if head_dim_vo != head_dim and (head_dim, head_dim_vo) != launch.MLA_HEAD_DIMS:
        raise NotImplementedError(f"head_dim_vo ({head_dim_vo}) != head_dim_qk ({head_dim}): only "
                                  f"{launch.MLA_HEAD_DIMS} (MLA prefill) is implemented")
    if head_dim not in launch.HEAD_DIMS and head_dim_vo == head_dim:
        raise ValueError(f"head_dim_qk must be one of {launch.HEAD_DIMS}; got {head_dim}")
    if kv_heads < 1 or heads < 1 or heads % kv_heads:
        raise ValueError(f"num_qo_heads ({heads}) must be a positive multiple of num_kv_heads ({kv_heads})")
    causal = require_flag("causal", causal)
    window_left = require_int("window_left", window_left)
    q_dtype = q_data_type if isinstance(q_data_type, torch.dtype) else _NAMED.get(str(q_data_type).replace("torch.", ""))
    if q_dtype not in _DTYPES:
        raise TypeError(f"q_data_type must be float16 or bfloat16; got {q_data_type!r}")
    kv_dtype = q_dtype if kv_data_type is None else (
        kv_data_type if isinstance(kv_data_type, torch.dtype) else _NAMED.get(str(kv_data_type).replace("torch.", "")))
    if kv_dtype not in (q_dtype, *_KV_FP8):
        raise TypeError(f"kv_data_type must be q_data_type ({q_dtype}), float8_e4m3fn or float8_e5m2; got "
                        f"{kv_data_type!r}")
    return dict(heads=heads, kv_heads=kv_heads, group=heads // kv_heads, head_dim=head_dim, head_dim_vo=head_dim_vo,
                causal=int(causal), window_left=window_left, q_dtype=q_dtype, kv_dtype=kv_dtype,
                scales=list(_scales(sm_scale, head_dim, logits_soft_cap)),
                rope=rope_scales(pos_encoding_mode, rope_scale, rope_theta, head_dim, head_dim_vo))


def _scale_value(name: str, value) -> float:
    if value is None:
        return 1.0
    if isinstance(value, torch.Tensor):
        if value.numel() != 1:
            raise ValueError(f"{name} must be a float or a 1-element tensor; got shape {tuple(value.shape)}")
        value = value.item()  # (a device tensor synchronises: pass a float where it matters)
    scale = require_real(name, value)
    if not math.isfinite(scale) or scale <= 0:
        raise ValueError(f"{name} must be finite and > 0; got {value}")
    return scale


def check_sinks(sinks, heads: int, q: torch.Tensor) -> torch.Tensor | None:
    """FlashInfer's ``sinks``: float32 [num_qo_heads] on q's device (contiguous)."""
    if sinks is None:
        return None
    require_tensor("sinks", sinks)
    if sinks.dtype != torch.float32 or tuple(sinks.shape) != (heads,):
        raise ValueError(f"sinks must be float32 [num_qo_heads] = [{heads}]; got {tuple(sinks.shape)} {sinks.dtype}")
    require_same_device(("q", q), ("sinks", sinks))
    return sinks.contiguous()


def run_scales(plan: dict, q_scale, k_scale, v_scale) -> list[float]:
    """A run's [q k^T multiplier, cap multiplier, output multiplier, RoPE's two]: FlashInfer's
    q_scale and k_scale multiply sm_scale, v_scale the output."""
    factor = _scale_value("q_scale", q_scale) * _scale_value("k_scale", k_scale)
    scales = plan["scales"]
    return [scales[0] * factor, scales[1], _scale_value("v_scale", v_scale), *plan["rope"]]
