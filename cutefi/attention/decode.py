"""Decode attention over a paged KV cache, FlashInfer's API (``flashinfer.decode``):
``BatchDecodeWithPagedKVCacheWrapper`` (plan once per batch layout, run per layer); its CUDA-graph
form, ``fast_decode_plan`` and ``single_decode_with_kv_cache`` are in ``decode_forms.py``.

``plan`` partitions the batch's KV into work items (``decode_plan.py``) and uploads them
with one host-to-device copy; ``run`` launches the CuTe DSL decode kernel
(``decode_mma_kernel.py``), one kernel: where a request is split over several CTAs, the last of
them to finish (for each kv head) merges the partial states. Scores and log-sum-exps are base 2, as in
FlashInfer (``lse`` merges with :func:`cutefi.merge_state`). FP8 caches (e4m3, e5m2) are
widened in the kernel, their ``k_scale``/``v_scale`` folded into the fp32 scales;
``pos_encoding_mode="ROPE_LLAMA"`` picks the kernel builds that rotate q and K themselves.
"""

from __future__ import annotations

import functools
import math
from typing import NamedTuple

import numpy as np
import torch

from .._checks import require_cuda, require_int, require_real, require_same_device, require_tensor
from ..dtypes import name_of
from ..jit import libcuda
from ..jit.driver import device_info
from ..jit.logs import api_log
from ..jit.staging import Int32Staging
from .._library import compiling
from .._plans import PlanCache, signature
from . import decode_ops, decode_plan, launch
from .decode_compat import DecodeWrapperCompat, check_backend, check_jit_args, check_plan_extras, check_run_extras
from .decode_ops import OP as _OP
from .decode_ops import Layout
from .plan import KV_LAYOUTS, check_i32, split_cache

_LOG2E = 1.4426950408889634
_DTYPES = {"float16": torch.float16, "half": torch.float16, "bfloat16": torch.bfloat16,
           "float8_e4m3fn": torch.float8_e4m3fn, "float8_e5m2": torch.float8_e5m2}
_Q_DTYPES = (torch.float16, torch.bfloat16)
_FP8_KV = (torch.float8_e4m3fn, torch.float8_e5m2)
_min, _max = np.minimum.reduce, np.maximum.reduce  # ndarray.min/max without their Python wrappers


def _dtype(name: str, value: object, default: torch.dtype | None = None) -> torch.dtype:
    if value is None and default is not None:
        return default
    if isinstance(value, torch.dtype):
        return value
    if isinstance(value, str) and value.replace("torch.", "") in _DTYPES:
        return _DTYPES[value.replace("torch.", "")]
    raise TypeError(f"{name} must be a torch dtype or one of {sorted(_DTYPES)}; got {value!r}")


NARROW = True  # (tests: False runs every group on the wide builds)


def narrow_build(group: int, rope: bool) -> bool:
    """Whether a plan takes the narrow builds (``decode_narrow_kernel.py``: heads as the MMAs'
    N): groups up to 8 q heads a kv head, without RoPE (its K rotation is the wide build's)."""
    return NARROW and group <= launch.MMA_DECODE_NARROW_ROWS and not rope


# Narrow plans pack kv heads into a CTA's tiles (``launch``: a token's rows of those heads,
# adjacent in an NHD page, are read by one load), head_dim >= 128, on Hopper (where measured):
# as many as leave CTAs that fill the GPU (PACK_FILL of its slots: no more splitting). On the
# H200 (benchmarks/results/decode_pack_kv_heads_h200_session37.json, one process, alternated),
# FP8 KV at 64 x 4096 (32/8 heads, d128, NHD) ran 2.7-3.3% faster, 128 x 1024 4.6%, ragged
# 64 x 512..32768 5.1%, bf16 0.3-1.4%, HND level. Forced everywhere (..._forced_...json), it
# was 2-3% slower where it split requests more (8 x 8192, 1 x 131072) and 1.8% slower on FP8
# head_dim 64 (64-byte rows).
PACK_KV = {"fp8": True, "16-bit": True}  # by KV type (tests and A/B runs switch them)
PACK_FILL = 0.9  # share of the ring's CTA slots the packed CTAs fill to pack (tests: 0 packs every batch)


def pack_shift(group: int, num_kv_heads: int, narrow: bool, kv_dtype: str, head_dim: int = 128) -> int:
    """log2 of the kv heads a CTA may pack: the most (a power of two) whose q heads fit the
    narrow tile's 8 columns and that divide ``num_kv_heads``; 0 where not taken (PACK_KV,
    head_dim < 128). ``plan`` takes the most of these whose packed CTAs still fill the GPU."""
    if not narrow or head_dim < 128 or not PACK_KV["fp8" if kv_dtype in launch.KV_FP8 else "16-bit"]:
        return 0
    shift = 0
    while (group << (shift + 1)) <= launch.MMA_DECODE_NARROW_ROWS and num_kv_heads % (1 << (shift + 1)) == 0:
        shift += 1
    return shift


FULL_BATCH = 0.9  # share of a full-batch ring's CTA slots a batch fills to take it


@functools.lru_cache(maxsize=None)
def decode_build(device: int, head_dim: int, kv_dtype: str, full_batch: bool = False) -> tuple[int, int]:
    """(ring stages, resident CTAs an SM) of the decode kernel on ``device``: of the rings the
    device's shared memory holds, the one with the most CTAs resident (more warps hide more
    latency), the deepest on a tie (``launch.mma_decode_rings``). ``full_batch``: a narrow
    build's ring for batches that fill its CTA slots, where it has one that fits."""
    per_block = libcuda.device_attribute(libcuda.ATTR_MAX_SMEM_PER_BLOCK_OPTIN, device)
    per_sm = libcuda.device_attribute(libcuda.ATTR_MAX_SMEM_PER_SM, device)
    best = None
    options = launch.mma_decode_stage_options(kv_dtype, head_dim)
    full = launch.MMA_DECODE_FULL_BATCH_RINGS.get((kv_dtype in launch.KV_FP8, head_dim))
    for stages in (full[0],) if full_batch and full else options:
        need = launch.mma_decode_smem_bytes(head_dim, stages, kv_dtype)
        if need <= per_block:
            # + the 1 KB the driver reserves a CTA; registers cap residency too
            ctas = min(max(1, per_sm // (need + 1024)), launch.mma_decode_min_ctas(kv_dtype, head_dim, stages,
                                                                            narrow=full_batch))
            if best is None or (ctas, stages) > (best[1], best[0]):
                best = (stages, ctas)
    if full_batch:
        return best or decode_build(device, head_dim, kv_dtype)
    if best is None:
        need = launch.mma_decode_smem_bytes(head_dim, options[-1], kv_dtype)
        raise ValueError(f"head_dim {head_dim}: the decode kernel needs {need} bytes of shared memory a CTA; "
                         f"device {device} grants {per_block}")
    return best


def _check_options(pos_encoding_mode: str) -> None:
    if pos_encoding_mode not in ("NONE", "ROPE_LLAMA"):
        raise NotImplementedError(f"pos_encoding_mode={pos_encoding_mode!r}: cutefi's decode supports 'NONE' and "
                                  "'ROPE_LLAMA' (for ALiBi, add the bias to the scores in a prefill kernel)")


def _rope(pos_encoding_mode: str, rope_scale: float | None, rope_theta: float | None,
          head_dim: int) -> tuple[int, float, float]:
    """(rope flag, 1 / rope_scale, log2 of the frequency ratio between neighbouring dims) of
    FlashInfer's Llama RoPE: dim i < head_dim / 2 turns by position / rope_scale * rope_theta^(-2i/d)."""
    if pos_encoding_mode != "ROPE_LLAMA":
        return 0, 1.0, 0.0
    scale = 1.0 if rope_scale is None else require_real("rope_scale", rope_scale)
    theta = 1e4 if rope_theta is None else require_real("rope_theta", rope_theta)
    if scale <= 0 or theta <= 0:
        raise ValueError(f"rope_scale and rope_theta must be > 0; got {scale} and {theta}")
    return 1, 1.0 / scale, -2.0 * math.log2(theta) / head_dim


def _scales(sm_scale: float | None, head_dim: int, logits_soft_cap: float | None, q_scale: float | None,
            k_scale: float | None) -> tuple[float, float]:
    """(multiplier of q, multiplier of tanh): scores become base-2 logits in the kernel."""
    scale = 1.0 / math.sqrt(head_dim) if sm_scale is None else require_real("sm_scale", sm_scale)
    for name, extra in (("q_scale", q_scale), ("k_scale", k_scale)):
        if extra is not None:
            scale *= require_real(name, extra)
    cap = 0.0 if logits_soft_cap is None else require_real("logits_soft_cap", logits_soft_cap)
    if cap < 0:
        raise ValueError(f"logits_soft_cap must be >= 0; got {cap}")
    if cap > 0:
        return scale / cap, cap * _LOG2E
    return scale * _LOG2E, 0.0


class _StaticPlan(NamedTuple):
    """What a plan takes from its arguments other than the page table."""
    plan: dict  # the plan's entries that come from them
    page_size: int
    stages: int  # ring stages and resident CTAs an SM of the build ...
    ctas_per_sm: int
    full: tuple[int, int] | None  # ... and of the full-batch ring, where it holds more CTAs
    packed_ctas: tuple[int, ...]  # CTAs a work item takes (kv heads x q-head tiles) with 2^i kv
    # heads a CTA, i = 0 .. the most it may pack
    sms: int
    fixed_chunk: int | None  # tokens a split (fixed_split_size), None: chosen per batch
    disable_split: bool


def partial_state_bytes(rows: int, num_qo_heads: int, head_dim: int) -> int:
    """Workspace bytes of ``rows`` partial states of split requests: each q head's 16-bit output
    row and its fp32 log-sum-exp."""
    return rows * num_qo_heads * (head_dim * 2 + 4)


def graph_items(batch: int, slots: int, ctas_per_item: int) -> int:
    """Work items of a CUDA-graph wrapper's fixed grid: any partition's count is at most batch +
    slots / ctas_per_item (choose_chunk's target) + 1."""
    return batch + -(-slots // ctas_per_item) + 1


class BatchDecodeWithPagedKVCacheWrapper(DecodeWrapperCompat):
    """Decode attention for a batch of requests over a paged KV cache (FlashInfer's wrapper).

    ``float_workspace_buffer``: a uint8 CUDA tensor (FlashInfer's 128 MB suggestion is plenty)
    holding the partial states of split requests. ``use_cuda_graph``: plan may be called
    outside a capture and ``run`` replayed inside it: device buffers keep their addresses
    (``paged_kv_*_buffer`` receive the page table) and the launch size stays fixed.
    ``use_tensor_cores`` is accepted and has no effect (one kernel serves every group), as are
    FlashInfer's ``backend`` names ``"fa2"`` and ``"fa3"`` (``"auto"``). FlashInfer's deprecated
    and auxiliary methods: ``decode_compat.py``.
    """

    @api_log
    def __init__(self, float_workspace_buffer: torch.Tensor, kv_layout: str = "NHD", use_cuda_graph: bool = False,
                 use_tensor_cores: bool = False, paged_kv_indptr_buffer: torch.Tensor | None = None,
                 paged_kv_indices_buffer: torch.Tensor | None = None,
                 paged_kv_last_page_len_buffer: torch.Tensor | None = None, backend: str = "auto",
                 jit_args=None) -> None:
        require_tensor("float_workspace_buffer", float_workspace_buffer)
        self.device = require_cuda("float_workspace_buffer", float_workspace_buffer)
        if kv_layout not in KV_LAYOUTS:
            raise ValueError(f"kv_layout must be 'NHD' or 'HND'; got {kv_layout!r}")
        check_backend(backend)
        check_jit_args(jit_args)
        self.use_tensor_cores = bool(use_tensor_cores)
        self._workspace = float_workspace_buffer.view(torch.uint8).reshape(-1)
        self._kv_layout = kv_layout
        self._use_cuda_graph = bool(use_cuda_graph)
        self._fixed = {}
        if self._use_cuda_graph:
            for name, buf in (("paged_kv_indptr_buffer", paged_kv_indptr_buffer),
                              ("paged_kv_indices_buffer", paged_kv_indices_buffer),
                              ("paged_kv_last_page_len_buffer", paged_kv_last_page_len_buffer)):
                if buf is None:
                    raise ValueError(f"use_cuda_graph=True needs {name} (a device int32 tensor that keeps its address)")
                check_i32(name, buf)
                if buf.device != float_workspace_buffer.device:
                    raise ValueError(f"{name} must be on {float_workspace_buffer.device}; got {buf.device}")
            self._fixed = dict(indptr=paged_kv_indptr_buffer, indices=paged_kv_indices_buffer,
                               last_page_len=paged_kv_last_page_len_buffer)
        self._plan: dict | None = None
        self._launches = PlanCache(64)  # prepared launches of this plan, by call layout
        self._statics = PlanCache(16)  # checked plan arguments other than the page table
        self._staging = Int32Staging(self.device, fixed=self._use_cuda_graph)
        self._counters: torch.Tensor | None = None  # split requests' arrival counters (_split_counters)
        # single_decode's wrappers: planned once, never re-planned, so a CUDA graph may capture their runs
        self._plan_fixed = False

    @property
    def is_cuda_graph_enabled(self) -> bool:
        return self._use_cuda_graph

    # ---- plan ------------------------------------------------------------------------------------
    @api_log
    def plan(self, indptr, indices, last_page_len, num_qo_heads, num_kv_heads, head_dim, page_size,
             pos_encoding_mode="NONE", window_left=-1, logits_soft_cap=None, q_data_type="float16",
             kv_data_type=None, o_data_type=None, data_type=None, sm_scale=None, rope_scale=None, rope_theta=None,
             non_blocking=True, block_tables=None, seq_lens=None, fixed_split_size=None, disable_split_kv=False,
             q_len_per_req=1, *, window_right=0, _indptr_host=None) -> None:
        """Partition the batch's KV for ``run``: ``indptr`` [batch + 1], ``indices`` and
        ``last_page_len`` [batch] int32 on the host (no synchronisation) or the device (copied
        to the host once; ``fast_decode_plan``'s ``global_override_indptr_cpu`` spares the
        indptr copy). ``fixed_split_size``: pages per split (None, or FlashInfer's -1: chosen to
        fill the GPU). The arguments and their positional order are FlashInfer's; ``data_type``
        stands for ``q_data_type`` / ``kv_data_type`` where those are None (FlashInfer's rule),
        ``o_data_type`` must be q's; ``block_tables``, ``seq_lens`` (FlashInfer's other
        backends), ``q_len_per_req`` > 1 and ``window_right`` > 0 are not taken."""
        static, batch, part, stages, shift, ctas_per_item, slots = self._partition(
            indptr, indices, last_page_len, num_qo_heads, num_kv_heads, head_dim, page_size, pos_encoding_mode,
            window_left, logits_soft_cap, q_data_type, kv_data_type, o_data_type, data_type, sm_scale, rope_scale,
            rope_theta, block_tables, seq_lens, fixed_split_size, disable_split_kv, q_len_per_req, window_right,
            _indptr_host)
        self._launches.clear()
        self._plan = dict(static.plan, batch=batch, stages=stages, items=part.items, partial_rows=part.partial_rows,
                          pack_shift=shift)
        self._upload(part, indptr, indices, last_page_len, bool(non_blocking), ctas_per_item, slots)
        self._plan["counters"] = self._split_counters()

    def _partition(self, indptr, indices, last_page_len, num_qo_heads, num_kv_heads, head_dim, page_size,
                   pos_encoding_mode, window_left, logits_soft_cap, q_data_type, kv_data_type, o_data_type, data_type,
                   sm_scale, rope_scale, rope_theta, block_tables, seq_lens, fixed_split_size, disable_split_kv,
                   q_len_per_req, window_right, _indptr_host):
        """plan's checks and the batch's partition (no state changed but the cached static plans)."""
        check_plan_extras(block_tables, seq_lens, q_len_per_req, window_right)
        if fixed_split_size is not None and not isinstance(fixed_split_size, bool) and \
                isinstance(fixed_split_size, int) and fixed_split_size <= 0:
            fixed_split_size = None  # FlashInfer's -1 (and 0): split as the batch needs
        # the arguments other than the page table repeat every step: checked once, then looked
        # up (their types are part of the key, so 128.0 is not taken where 128 was)
        options = (num_qo_heads, num_kv_heads, head_dim, page_size, pos_encoding_mode, window_left, logits_soft_cap,
                   q_data_type, kv_data_type, o_data_type, data_type, sm_scale, rope_scale, rope_theta,
                   fixed_split_size, disable_split_kv)
        try:
            key = (options, tuple(map(type, options)))
            static = self._statics.get(key)
        except TypeError:  # an unhashable argument: checked (and refused) below
            key = static = None
        if static is None:
            static = self._statics.put(key, self._static_plan(*options))
        batch, indptr_h, last_h = self._page_table(indptr, indices, last_page_len, static.page_size, _indptr_host)
        pages = indptr_h[1:] - indptr_h[:-1]
        fewest_pages = 1
        if batch:  # whole-array reductions first; the per-request mask only when one fails
            fewest_pages = _min(pages)
            if indptr_h[0] != 0 or fewest_pages < 0:
                raise ValueError("indptr must start at 0 and never decrease")
            page_size = static.page_size
            if (_min(last_h) < 1 or _max(last_h) > page_size) and \
                    ((pages > 0) & ((last_h < 1) | (last_h > page_size))).any():
                raise ValueError(f"last_page_len must be in [1, page_size={page_size}] for every request with pages")
        if int(indptr_h[-1]) > indices.shape[0]:
            raise ValueError(f"indptr[-1] = {int(indptr_h[-1])} pages but indices holds {indices.shape[0]}")
        lengths = decode_plan.kv_lengths(indptr_h, last_h, static.page_size, pages, fewest_pages == 0)
        window_left = static.plan["window_left"]
        starts = np.maximum(lengths - 1 - window_left, 0) if window_left >= 0 else None
        stages, ctas_per_sm, sms = static.stages, static.ctas_per_sm, static.sms
        shift = len(static.packed_ctas) - 1  # the most kv heads a CTA whose CTAs still fill the GPU
        while shift and batch * static.packed_ctas[shift] < PACK_FILL * ctas_per_sm * sms:
            shift -= 1
        ctas_per_item = static.packed_ctas[shift]
        if static.full is not None and batch * ctas_per_item >= FULL_BATCH * static.full[1] * sms:
            stages, ctas_per_sm = static.full  # more CTAs an SM where the batch fills them
        slots = ctas_per_sm * sms  # CTAs the GPU holds at once
        chunk = decode_plan.choose_chunk(lengths if starts is None else lengths - starts, ctas_per_item, slots,
                                         launch.mma_decode_step(), static.disable_split, static.fixed_chunk)
        part = decode_plan.partition(lengths, starts, indptr_h, chunk, slots // ctas_per_item)
        return static, batch, part, stages, shift, ctas_per_item, slots

    def _split_counters(self) -> torch.Tensor:
        """The planned batch's arrival counters: int32, one per (request, CTA of its item: kv heads
        and row blocks) of a split request (the kernel's last CTA of each merges and puts it back to zero, so they are
        zero between launches). Made, zeroed, at plan time, on the current stream, and kept
        while big enough: never during a run, so a captured graph keeps its address."""
        plan = self._plan
        needed = 1
        if plan["partial_rows"] or self._use_cuda_graph:
            needed = plan["batch"] * decode_ops.ctas_per_item(plan["num_kv_heads"], plan["group"], bool(plan["narrow"]),
                                                              plan["pack_shift"])
        if self._counters is None or self._counters.numel() < needed:
            self._counters = torch.zeros(max(needed, 1024), dtype=torch.int32, device=f"cuda:{self.device}")
        return self._counters

    def _static_plan(self, num_qo_heads, num_kv_heads, head_dim, page_size, pos_encoding_mode, window_left,
                     logits_soft_cap, q_data_type, kv_data_type, o_data_type, data_type, sm_scale, rope_scale,
                     rope_theta, fixed_split_size, disable_split_kv) -> _StaticPlan:
        """The checked arguments other than the page table, and the builds they pick."""
        _check_options(pos_encoding_mode)
        num_qo_heads, num_kv_heads = require_int("num_qo_heads", num_qo_heads), require_int("num_kv_heads", num_kv_heads)
        head_dim, page_size = require_int("head_dim", head_dim), require_int("page_size", page_size)
        window_left = require_int("window_left", window_left)
        if num_kv_heads < 1 or num_qo_heads < 1 or num_qo_heads % num_kv_heads:
            raise ValueError(f"num_qo_heads ({num_qo_heads}) must be a positive multiple of num_kv_heads ({num_kv_heads})")
        if head_dim not in launch.DECODE_HEAD_DIMS:
            raise ValueError(f"head_dim must be one of {launch.DECODE_HEAD_DIMS}; got {head_dim}")
        if page_size < 1:
            raise ValueError(f"page_size must be >= 1; got {page_size}")
        # (FlashInfer's rule: data_type stands in for whichever of the two is None)
        q_dtype = _dtype("q_data_type", q_data_type if q_data_type is not None else data_type, torch.float16)
        kv_dtype = _dtype("kv_data_type", kv_data_type if kv_data_type is not None else data_type, q_dtype)
        if q_dtype not in _Q_DTYPES:
            raise TypeError(f"q_data_type must be float16 or bfloat16; got {q_dtype}")
        if _dtype("o_data_type", o_data_type, q_dtype) != q_dtype:
            raise NotImplementedError(f"o_data_type={o_data_type}: cutefi's decode writes out in q's dtype ({q_dtype})")
        if kv_dtype != q_dtype and kv_dtype not in _FP8_KV:
            raise TypeError(f"kv_data_type must be q's type ({q_dtype}) or float8_e4m3fn / float8_e5m2; got {kv_dtype}")
        if logits_soft_cap is not None:
            require_real("logits_soft_cap", logits_soft_cap)
        if sm_scale is not None:
            require_real("sm_scale", sm_scale)
        group = num_qo_heads // num_kv_heads
        fixed_chunk = None if fixed_split_size is None else require_int("fixed_split_size", fixed_split_size) * page_size
        rope, rope_rcp_scale, rope_log2_step = _rope(pos_encoding_mode, rope_scale, rope_theta, head_dim)
        narrow = narrow_build(group, rope)
        shift = pack_shift(group, num_kv_heads, narrow, name_of(kv_dtype), head_dim)
        if device_info(self.device).cc[0] != 9:  # (the kernels pack on every target; measured on Hopper)
            shift = 0
        stages, ctas_per_sm = decode_build(self.device, head_dim, name_of(kv_dtype))
        full = decode_build(self.device, head_dim, name_of(kv_dtype), full_batch=True) if narrow else None
        plan = dict(num_qo_heads=num_qo_heads, num_kv_heads=num_kv_heads, head_dim=head_dim, page_size=page_size,
                    group=group, narrow=int(narrow), q_dtype=q_dtype, rope=rope, rope_rcp_scale=rope_rcp_scale,
                    rope_log2_step=rope_log2_step, kv_dtype=kv_dtype, window_left=window_left,
                    logits_soft_cap=logits_soft_cap, sm_scale=sm_scale, graph=int(self._use_cuda_graph))
        return _StaticPlan(plan, page_size, stages, ctas_per_sm, full if full and full[1] > ctas_per_sm else None,
                           tuple(decode_ops.ctas_per_item(num_kv_heads, group, narrow, i) for i in range(shift + 1)),
                           device_info(self.device).sms,
                           fixed_chunk, bool(disable_split_kv))

    @staticmethod
    def _page_table(indptr, indices, last_page_len, page_size: int, indptr_host) -> tuple[int, np.ndarray, np.ndarray]:
        """(batch, indptr and last_page_len as host numpy arrays): numpy views of host tables
        (device ones are copied once): torch's CPU ops cost microseconds each, numpy's a
        fraction, and plan runs once per decode step."""
        check_i32("indptr", indptr)
        if indptr.shape[0] < 1:
            raise ValueError("indptr must have batch + 1 >= 1 entries")
        batch = indptr.shape[0] - 1
        check_i32("indices", indices)
        check_i32("last_page_len", last_page_len, batch)
        if indptr_host is not None:
            check_i32("global_override_indptr_cpu", indptr_host, batch + 1)
            if indptr_host.is_cuda:
                raise ValueError("global_override_indptr_cpu must be a host tensor (the host copy of indptr)")
            indptr = indptr_host
        indptr_h = (indptr.cpu() if indptr.is_cuda else indptr).numpy()
        last_h = (last_page_len.cpu() if last_page_len.is_cuda else last_page_len).numpy()
        return batch, indptr_h, last_h

    def _upload(self, part: decode_plan.DecodePartition, indptr, indices, last_page_len, non_blocking: bool,
                ctas_per_item: int, slots: int) -> None:
        """One host-to-device copy of [work | state_indptr | kv_indices?] (``jit.staging``):
        the page ids only where they came from the host (device ones are used where they
        are; a server's indices usually live on the GPU). The kernel reads each request's
        first page slot from the work array, not from indptr."""
        plan = self._plan
        for name, table in (("indptr", indptr), ("indices", indices)):
            if table.is_cuda and table.get_device() != self.device:  # get_device: no torch.device built
                require_same_device((name, table), ("float_workspace_buffer", self._workspace))
        arrays = [part.work.reshape(-1), part.state_indptr]
        staged = []  # the page-table arrays staged, by plan key
        if not self._use_cuda_graph:  # graphs: the user's fixed buffers
            if not indices.is_cuda:
                staged.append("kv_indices")
                arrays.append(indices.numpy())
        else:  # fixed capacity: the work array is padded with idle items
            capacity = self._graph_capacity(plan, ctas_per_item, slots)
            if part.items > capacity:
                raise ValueError(f"this plan needs {part.items} work items, more than the {capacity} the CUDA-graph "
                                 "wrapper was sized for at its first plan")
            padded = np.full((decode_plan.WORK_ROWS, capacity), -1, dtype=np.int32)
            padded[:, :part.items] = part.work
            arrays[0] = padded.reshape(-1)
            plan["items"] = capacity
        device_views = self._staging.send(arrays, non_blocking)
        plan["work"], plan["state_indptr"] = device_views[0], device_views[1]
        if not self._use_cuda_graph:
            plan["kv_indices"] = indices
            for i, key in enumerate(staged, start=2):
                plan[key] = device_views[i]
        if self._use_cuda_graph:  # the page table into the user's fixed buffers
            for key, src in (("indptr", indptr), ("indices", indices), ("last_page_len", last_page_len)):
                dst = self._fixed[key]
                if src.numel() > dst.numel():
                    raise ValueError(f"paged_kv_{key}_buffer holds {dst.numel()} entries; the plan needs {src.numel()}")
                if src.data_ptr() != dst.data_ptr():
                    dst[:src.numel()].copy_(src, non_blocking=non_blocking)
            plan["kv_indices"] = self._fixed["indices"]
        needed = partial_state_bytes(plan["partial_rows"] if not self._use_cuda_graph else plan["items"],
                                     plan["num_qo_heads"], plan["head_dim"])
        if needed > self._workspace.numel():
            raise ValueError(f"float_workspace_buffer holds {self._workspace.numel()} bytes; this plan's partial states "
                             f"need {needed}")

    def _graph_capacity(self, plan: dict, ctas_per_item: int, slots: int) -> int:
        """Work items of the fixed grid (``graph_items``, set at the first plan)."""
        if "capacity" not in self._fixed:
            self._fixed["capacity"] = graph_items(plan["batch"], slots, ctas_per_item)
            self._fixed["batch"] = plan["batch"]
        if plan["batch"] != self._fixed["batch"]:
            raise ValueError(f"a CUDA-graph wrapper keeps its batch size: planned {self._fixed['batch']}, now {plan['batch']}")
        return self._fixed["capacity"]

    # ---- run -------------------------------------------------------------------------------------
    @api_log
    def run(self, q, paged_kv_cache, *args, q_scale=None, k_scale=None, v_scale=None, out=None, lse=None,
            return_lse=False, enable_pdl=None, window_left=None, sinks=None, q_len_per_req=None,
            skip_softmax_threshold_scale_factor=None, kv_cache_sf=None, _scores=None):
        """Attention of each request's query ``q`` [batch, num_qo_heads, head_dim] over its KV
        pages. Returns ``out`` (q's dtype), or ``(out, lse)`` with ``return_lse`` (lse float32
        [batch, num_qo_heads], base 2). ``sinks``: float32 [num_qo_heads], each head's sink logit
        (natural units, not scaled), counted in the softmax denominator and in ``lse``.
        (``_scores``: ``forward``'s (sm_scale, logits_soft_cap, rope_scale, rope_theta) in place
        of the plan's.)"""
        if args or q_len_per_req is not None or skip_softmax_threshold_scale_factor is not None \
                or kv_cache_sf is not None:
            check_run_extras(args, q_len_per_req, skip_softmax_threshold_scale_factor, kv_cache_sf)
        if not compiling():  # a layout this wrapper ran before: only the pointers are new
            key = self._launch_key(q, paged_kv_cache, out, lse, return_lse, q_scale, k_scale, v_scale, enable_pdl,
                                   window_left, sinks, _scores)
            prepared = self._launches.get(key)
            if prepared is not None:
                return self._run_prepared(prepared, q, paged_kv_cache, out, lse, return_lse, sinks)
        plan = self._plan
        if plan is None:
            raise RuntimeError("run() before plan(): call plan(...) with the batch's page table first")
        if sinks is not None:
            require_tensor("sinks", sinks)
            if sinks.dtype != torch.float32 or tuple(sinks.shape) != (plan["num_qo_heads"],) or sinks.stride(0) != 1:
                raise ValueError(f"sinks must be a contiguous float32 tensor [num_qo_heads] = [{plan['num_qo_heads']}]; "
                                 f"got {tuple(sinks.shape)} {sinks.dtype}")
        if window_left is not None and window_left != plan["window_left"]:
            raise ValueError(f"window_left={window_left} differs from the planned {plan['window_left']}: plan again")
        require_tensor("q", q)
        shape = (plan["batch"], plan["num_qo_heads"], plan["head_dim"])
        if tuple(q.shape) != shape:
            raise ValueError(f"q must be {shape} as planned; got {tuple(q.shape)}")
        if q.dtype != plan["q_dtype"]:
            raise TypeError(f"q dtype {q.dtype} differs from the planned q_data_type {plan['q_dtype']}")
        if q.stride(2) != 1 or (not compiling() and q.data_ptr() % 16) or any((q.stride(d) * 2) % 16 for d in (0, 1)):
            raise ValueError(f"q rows must start on 16-byte boundaries with head_dim contiguous; got strides {q.stride()}")
        if not compiling():
            self._check_capture()
        layout = Layout(paged_kv_cache, self._kv_layout, plan["num_kv_heads"], plan["head_dim"], plan["page_size"],
                        plan["kv_dtype"], check_pointers=not compiling())
        out = self._output("out", out, shape, q.dtype, q)
        if return_lse or lse is not None:
            lse = self._output("lse", lse, shape[:2], torch.float32, q)
        require_same_device(("q", q), ("k_cache", layout.k_cache), ("v_cache", layout.v_cache), ("out", out),
                            ("float_workspace_buffer", self._workspace), *([("sinks", sinks)] if sinks is not None else []))
        sm_scale, soft_cap = plan["sm_scale"], plan["logits_soft_cap"]
        rope_rcp_scale, rope_log2_step = plan["rope_rcp_scale"], plan["rope_log2_step"]
        if _scores is not None:  # forward's, as FlashInfer's forward replaces the plan's
            sm_scale, soft_cap, rope_scale, rope_theta = _scores
            _, rope_rcp_scale, rope_log2_step = _rope("ROPE_LLAMA" if plan["rope"] else "NONE", rope_scale,
                                                      rope_theta, plan["head_dim"])
        q_mult, cap_scale = _scales(sm_scale, plan["head_dim"], soft_cap, q_scale, k_scale)
        out_scale = 1.0 if v_scale is None else require_real("v_scale", v_scale)
        pdl = enable_pdl is None or bool(enable_pdl)
        if plan["batch"]:
            sizes = [plan[key] for key in decode_ops.SIZES]
            if compiling():  # torch.compile traces this: one cutefi op in the graph
                _OP(q, layout.k_cache, layout.v_cache, out, lse, sinks, self._workspace, plan["work"],
                    plan["state_indptr"], plan["kv_indices"], plan["counters"], self._kv_layout, sizes,
                    [q_mult, cap_scale, out_scale, rope_rcp_scale, rope_log2_step], pdl)
            else:
                prepared = decode_ops.DecodeLaunch(q, layout, out, lse, sinks is not None, self._workspace, plan["work"],
                                                   plan["state_indptr"], plan["kv_indices"], plan["counters"], sizes,
                                                   q_mult, cap_scale, out_scale, rope_rcp_scale,
                                                   rope_log2_step, pdl)
                self._launches.put(key, prepared)
                prepared(q.data_ptr(), layout.k_cache.data_ptr(), layout.v_cache.data_ptr(), out.data_ptr(),
                         lse.data_ptr() if lse is not None else None, sinks.data_ptr() if sinks is not None else None)
        return (out, lse) if return_lse else out

    def _launch_key(self, q, paged_kv_cache, out, lse, return_lse, *options) -> tuple | None:
        """What a prepared launch depends on besides data pointers (None: not cacheable)."""
        try:
            cache = (signature(paged_kv_cache),) if isinstance(paged_kv_cache, torch.Tensor) else \
                tuple(signature(t) for t in paged_kv_cache)
            options = tuple(signature(o) if isinstance(o, torch.Tensor) else o for o in options)
            return (signature(q), cache, signature(out), signature(lse), bool(return_lse), *options)
        except (AttributeError, TypeError):
            return None

    def _run_prepared(self, prepared, q, paged_kv_cache, out, lse, return_lse, sinks):
        k_cache, v_cache = split_cache(paged_kv_cache, self._kv_layout)
        if out is None:
            out = torch.empty(q.shape, dtype=q.dtype, device=q.device)
        if lse is None and return_lse:
            lse = torch.empty(q.shape[:2], dtype=torch.float32, device=q.device)
        if (q.data_ptr() | k_cache.data_ptr() | v_cache.data_ptr() | out.data_ptr()) % 16:
            raise ValueError("q, the paged KV cache and out must start on 16-byte boundaries")
        self._check_capture()
        prepared(q.data_ptr(), k_cache.data_ptr(), v_cache.data_ptr(), out.data_ptr(),
                 lse.data_ptr() if lse is not None else None, sinks.data_ptr() if sinks is not None else None)
        return (out, lse) if return_lse else out

    def _check_capture(self) -> None:
        """A run being captured in a CUDA graph needs a wrapper whose plan's buffers keep their
        meaning at replay: a CUDA-graph wrapper, or single_decode's (planned once)."""
        if not self._use_cuda_graph and torch.cuda.is_current_stream_capturing():
            if not self._plan_fixed:
                raise RuntimeError("run() captured in a CUDA graph needs a wrapper built with use_cuda_graph=True")

    @staticmethod
    def _output(name: str, tensor, shape, dtype, q) -> torch.Tensor:
        if tensor is None:
            return torch.empty(shape, dtype=dtype, device=q.device)
        require_tensor(name, tensor)
        if tuple(tensor.shape) != tuple(shape) or tensor.dtype != dtype:
            raise ValueError(f"{name} must be {tuple(shape)} {dtype}; got {tuple(tensor.shape)} {tensor.dtype}")
        if tensor.stride(-1) != 1 or (name == "out" and ((not compiling() and tensor.data_ptr() % 16)
                                                          or any((tensor.stride(d) * 2) % 16 for d in (0, 1)))):
            raise ValueError(f"{name} must have a contiguous last dimension (16-byte aligned rows); "
                             f"got strides {tensor.stride()}")
        return tensor
