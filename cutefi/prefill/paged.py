"""``BatchPrefillWithPagedKVCacheWrapper`` (FlashInfer's): prefill/append attention of a batch of
requests over a paged KV cache, on the Hopper kernel's paged builds or the mma.sync kernel.

Request ``b``'s queries are rows ``qo_indptr[b] .. qo_indptr[b + 1]`` of ``q``; its keys and
values are the pages ``paged_kv_indices[paged_kv_indptr[b] ..]`` of the cache, the last one
holding ``paged_kv_last_page_len[b]`` tokens. The kernel gathers each KV tile a page at a time
with TMA (one box per page and 64 head-dim columns), so its page size is a build option:
16, 32 or 64 tokens (``launch.PAGE_SIZES``); any other page size (and any GPU but sm_90) runs
the mma.sync kernel, which looks pages up per row. A page id past the cache reads zeros, never
other memory.
"""

from __future__ import annotations

import numpy as np
import torch

from .._checks import require_int, require_same_device, require_tensor
from .._library import compiling
from ..attention.decode_ops import Layout
from ..attention.plan import check_i32, split_cache
from ..jit.logs import api_log
from ..jit.staging import Int32Staging
from . import launch, plan
from .masks import plan_mask
from .ops import (PAGED_OP, SIZES, _check_options, _output, _rows_aligned, check_sinks, fp8_widen, host_indptr,
                  paged_launch, paged_views, plan_options, run_scales)
from .rotate import rope_index
from .compat import check_run_extras, remember_plan
from .wrapper import PrefillWrapperBase, check_plan_extras


class BatchPrefillWithPagedKVCacheWrapper(PrefillWrapperBase):
    """Prefill/append attention over a paged KV cache (plan once per batch, run per layer).

    ``paged_kv_cache``: a ``(k_cache, v_cache)`` pair or one ``[pages, 2, ...]`` tensor, each
    ``[pages, page_size, kv_heads, head_dim]`` (NHD) or ``[pages, kv_heads, page_size, head_dim]``
    (HND), rows 16-byte aligned. ``use_cuda_graph``: plans keep the work array's and the page
    table's addresses (``paged_kv_indices_buf`` receives the page ids) so a captured ``run``
    replays after later plans of the same batch size and at most the first plan's tokens."""

    @api_log
    def __init__(self, float_workspace_buffer, kv_layout="NHD", use_cuda_graph=False, qo_indptr_buf=None,
                 paged_kv_indptr_buf=None, paged_kv_indices_buf=None, paged_kv_last_page_len_buf=None,
                 custom_mask_buf=None, mask_indptr_buf=None, backend="auto", jit_args=None,
                 jit_kwargs=None):
        self._setup(float_workspace_buffer, kv_layout, use_cuda_graph, custom_mask_buf, backend, jit_args, jit_kwargs)
        self._fixed_indices = None
        self._indices_staging: Int32Staging | None = None  # host page tables go up through it
        if self._buffer.use_cuda_graph:
            if paged_kv_indices_buf is None:
                raise ValueError("use_cuda_graph=True needs paged_kv_indices_buf (a device int32 tensor that keeps "
                                 "its address)")
            check_i32("paged_kv_indices_buf", paged_kv_indices_buf)
            require_same_device(("float_workspace_buffer", float_workspace_buffer),
                                ("paged_kv_indices_buf", paged_kv_indices_buf))
            self._fixed_indices = paged_kv_indices_buf
        self._plan: dict | None = None

    @api_log
    def workspace_size(self, qo_indptr, paged_kv_indptr, paged_kv_indices, paged_kv_last_page_len, num_qo_heads,
                       num_kv_heads, head_dim_qk, page_size, head_dim_vo=None, custom_mask=None,
                       packed_custom_mask=None, causal=False, pos_encoding_mode="NONE", use_fp16_qk_reduction=False,
                       sm_scale=None, window_left=-1, logits_soft_cap=None, rope_scale=None, rope_theta=None,
                       q_data_type="float16", kv_data_type=None, o_data_type=None, prefix_len_ptr=None,
                       token_pos_in_items_ptr=None, token_pos_in_items_len=0, max_item_len_ptr=None, seq_lens=None,
                       seq_lens_q=None, block_tables=None, max_token_per_sequence=None, max_sequence_kv=None,
                       fixed_split_size=None, disable_split_kv=False) -> tuple[int, int]:
        """FlashInfer's ``(float_workspace_size, int_workspace_size)`` that :meth:`plan` of these
        arguments needs from the caller: ``(0, 0)`` for any batch. cutefi's prefill splits no
        request's KV (no partial states) and keeps its work arrays in buffers of its own; the
        workspace given to the constructor only names the device."""
        return 0, 0

    @api_log
    @remember_plan
    def plan(self, qo_indptr, paged_kv_indptr, paged_kv_indices, paged_kv_last_page_len, num_qo_heads, num_kv_heads,
             head_dim_qk, page_size, head_dim_vo=None, custom_mask=None, packed_custom_mask=None, causal=False,
             pos_encoding_mode="NONE", use_fp16_qk_reduction=False, sm_scale=None, window_left=-1,
             logits_soft_cap=None, rope_scale=None, rope_theta=None, q_data_type="float16", kv_data_type=None,
             o_data_type=None, non_blocking=True, prefix_len_ptr=None, token_pos_in_items_ptr=None,
             token_pos_in_items_len=0, max_item_len_ptr=None, seq_lens=None, seq_lens_q=None, block_tables=None,
             max_token_per_sequence=None, max_sequence_kv=None, fixed_split_size=None,
             disable_split_kv=False) -> None:
        """Partition the batch: ``qo_indptr``, ``paged_kv_indptr`` [batch + 1] and
        ``paged_kv_last_page_len`` [batch] int32/int64 on the host (no synchronisation) or the
        device (copied to the host once); ``paged_kv_indices`` int32 (kept on the device).
        FlashInfer's arguments in its order; those cutefi does not take are refused by name
        (``wrapper.check_plan_extras``)."""
        _check_options(pos_encoding_mode, None)
        options = plan_options(num_qo_heads, num_kv_heads, head_dim_qk, head_dim_vo, causal, window_left,
                               q_data_type, kv_data_type, sm_scale, logits_soft_cap, pos_encoding_mode, rope_scale,
                               rope_theta)
        check_plan_extras(options["q_dtype"], o_data_type, prefix_len_ptr, token_pos_in_items_ptr,
                          token_pos_in_items_len, max_item_len_ptr, seq_lens, seq_lens_q, block_tables)
        if options["head_dim_vo"] != options["head_dim"]:
            raise NotImplementedError("head_dim_vo != head_dim_qk (MLA) runs on ragged K/V only "
                                      "(BatchPrefillWithRaggedKVCacheWrapper)")
        page_size = require_int("page_size", page_size)
        if page_size < 1:
            raise ValueError(f"page_size must be >= 1; got {page_size}")
        qo_host = host_indptr("qo_indptr", qo_indptr)
        kv_host = host_indptr("paged_kv_indptr", paged_kv_indptr)
        batch = qo_host.shape[0] - 1
        if kv_host.shape[0] != batch + 1:
            raise ValueError(f"paged_kv_indptr must have batch + 1 = {batch + 1} entries (qo_indptr's); "
                             f"got {kv_host.shape[0]}")
        require_tensor("paged_kv_last_page_len", paged_kv_last_page_len)
        if paged_kv_last_page_len.shape != (batch,):
            raise ValueError(f"paged_kv_last_page_len must be [batch] = [{batch}]; got "
                             f"{tuple(paged_kv_last_page_len.shape)}")
        last = paged_kv_last_page_len.cpu().numpy().astype(np.int64)
        pages = kv_host[1:] - kv_host[:-1]
        if ((pages > 0) & ((last < 1) | (last > page_size))).any():
            raise ValueError(f"paged_kv_last_page_len must be in [1, page_size={page_size}] for every request with pages")
        check_i32("paged_kv_indices", paged_kv_indices)
        if int(kv_host[-1]) > paged_kv_indices.shape[0]:
            raise ValueError(f"paged_kv_indptr[-1] = {int(kv_host[-1])} pages but paged_kv_indices holds "
                             f"{paged_kv_indices.shape[0]}")
        indices = self._device_indices(paged_kv_indices, bool(non_blocking))
        kv_len = np.where(pages > 0, (pages - 1) * page_size + last, 0)
        # a custom mask replaces the causal one (FlashInfer's rule)
        mask, mask_begin = plan_mask(custom_mask, packed_custom_mask, np.diff(qo_host), kv_len, self.device,
                                     self._mask_buf, self._buffer.use_cuda_graph)
        if mask is not None:
            options["causal"] = 0
        part = plan.partition_requests(qo_host, kv_host[:-1], kv_len, bool(options["causal"]), options["window_left"],
                                       launch.plan_tile_n(options["head_dim"], page_size), mask_begin)
        pairs = self._buffer.upload(part, batch, int(qo_host[-1]), bool(non_blocking))
        # the pages the Hopper pre-passes gather (CUDA graphs: none, so FP8 and RoPE stay on the
        # mma.sync kernel: a captured gather of this plan's pages would not serve a later plan's)
        entries = 0 if self._buffer.use_cuda_graph else int(kv_host[-1])
        widen = fp8_widen(options["kv_dtype"], options["q_dtype"], int(qo_host[-1]) * options["group"], batch)
        rope = None
        if options["rope"][0] and entries:  # (q rows and the gathered pages' keys)
            rope = self._buffer.upload_rope(rope_index(qo_host, kv_host * page_size, kv_len), bool(non_blocking))
        self._plan = dict(options, pairs=pairs, page_size=page_size, total_q=int(qo_host[-1]), indices=indices,
                          mask=mask, widen=widen, entries=entries, rope_index=rope)
        self._launches.clear()

    begin_forward = plan

    def _device_indices(self, indices: torch.Tensor, non_blocking: bool) -> torch.Tensor:
        """The page table on this wrapper's device: the given one where it is already there
        (graphs: copied into the fixed buffer)."""
        if indices.is_cuda and indices.get_device() != self.device:
            raise ValueError(f"paged_kv_indices must be on cuda:{self.device} (the workspace's) or the host; "
                             f"got {indices.device}")
        if self._fixed_indices is not None:
            if indices.numel() > self._fixed_indices.numel():
                raise ValueError(f"paged_kv_indices_buf holds {self._fixed_indices.numel()} entries; the plan needs "
                                 f"{indices.numel()}")
            if indices.data_ptr() != self._fixed_indices.data_ptr():
                self._fixed_indices[:indices.numel()].copy_(indices, non_blocking=non_blocking)
            return self._fixed_indices
        if indices.is_cuda:
            return indices
        if self._indices_staging is None:  # (one reused pinned buffer and a driver copy a plan)
            self._indices_staging = Int32Staging(self.device)
        return self._indices_staging.send([indices.contiguous().numpy().reshape(-1)], non_blocking)[0]

    @api_log
    def run(self, q, paged_kv_cache, *args, q_scale=None, k_scale=None, v_scale=None, out=None, lse=None,
            return_lse=False, enable_pdl=None, window_left=None, sinks=None, kv_cache_sf=None,
            skip_softmax_threshold_scale_factor=None, use_fp16_softmax=None, uses_spcompress=None):
        """Attention of each request's queries ``q`` [total_q, num_qo_heads, head_dim] over its
        pages. Returns ``out`` or ``(out, lse)`` (lse float32 [total_q, num_qo_heads], base 2).
        The keywords of FlashInfer's other backends (``kv_cache_sf`` and after) are refused
        unless None."""
        p = self._plan
        if p is None:
            raise RuntimeError("run() before plan(): call plan(qo_indptr, paged_kv_indptr, ...) first")
        if args:
            raise TypeError(f"run() takes q, paged_kv_cache and keyword arguments; got {len(args)} extra positional ones")
        if kv_cache_sf is not None or skip_softmax_threshold_scale_factor is not None or use_fp16_softmax is not None \
                or uses_spcompress is not None:  # (a guard, not a call, on the launch path)
            check_run_extras(kv_cache_sf=kv_cache_sf,
                             skip_softmax_threshold_scale_factor=skip_softmax_threshold_scale_factor,
                             use_fp16_softmax=use_fp16_softmax, uses_spcompress=uses_spcompress)
        key = None
        if not compiling():  # a layout this plan ran before: only the pointers are new
            cache = (paged_kv_cache,) if isinstance(paged_kv_cache, torch.Tensor) else tuple(paged_kv_cache) \
                if isinstance(paged_kv_cache, (tuple, list)) else (None,)
            key = self._launch_key((q, out, lse, sinks, *cache), (return_lse, q_scale, k_scale, v_scale, enable_pdl,
                                                                  window_left))
            prepared = self._launches.get(key)
            if prepared is not None:
                k_cache, v_cache = split_cache(paged_kv_cache, self._kv_layout)
                if not (q.data_ptr() | k_cache.data_ptr() | v_cache.data_ptr()
                        | (out.data_ptr() if out is not None else 0)) & 15:
                    return self._repeat(prepared, q, *paged_views(k_cache, v_cache, self._kv_layout), out, lse,
                                        return_lse, sinks, p["indices"], p["head_dim"])
        scales = run_scales(p, q_scale, k_scale, v_scale)
        if window_left is not None and window_left != p["window_left"]:
            raise ValueError(f"window_left={window_left} differs from the planned {p['window_left']}: plan again")
        require_tensor("q", q)
        if q.dim() != 3 or q.shape[1:] != (p["heads"], p["head_dim"]) or q.shape[0] < p["total_q"]:
            raise ValueError(f"q must be [total_q >= {p['total_q']}, {p['heads']}, {p['head_dim']}] as planned; "
                             f"got {tuple(q.shape)}")
        if q.dtype != p["q_dtype"]:
            raise TypeError(f"q dtype {q.dtype} differs from the planned q_data_type {p['q_dtype']}")
        _rows_aligned("q", q)
        layout = Layout(paged_kv_cache, self._kv_layout, p["kv_heads"], p["head_dim"], p["page_size"], p["kv_dtype"],
                        check_pointers=not compiling())
        work, counter = self._buffer.work, self._buffer.counter
        require_same_device(("q", q), ("k_cache", layout.k_cache), ("v_cache", layout.v_cache),
                            ("float_workspace_buffer", work))
        out = _output("out", out, q.shape, q.dtype, q)
        if return_lse or lse is not None:
            lse = _output("lse", lse, q.shape[:2], torch.float32, q)
        pdl = enable_pdl is None or bool(enable_pdl)
        sizes = [p[name] for name in SIZES]
        sinks = check_sinks(sinks, p["heads"], q)
        if compiling():
            PAGED_OP(q, layout.k_cache, layout.v_cache, out, lse, work, counter, p["indices"], p["mask"], sinks,
                     p["rope_index"], self._kv_layout, p["page_size"], sizes, scales, pdl)
        else:
            self._launches.put(key, paged_launch(q, layout.k_cache, layout.v_cache, out, lse, work, counter,
                                                 p["indices"], p["mask"], sinks, p["rope_index"], self._kv_layout,
                                                 p["page_size"], sizes, scales, pdl))
        return (out, lse) if return_lse else out

    def forward(self, q, paged_kv_cache, causal=False, pos_encoding_mode="NONE", use_fp16_qk_reduction=False,
                k_scale=None, v_scale=None, window_left=-1, logits_soft_cap=None, sm_scale=None, rope_scale=None,
                rope_theta=None):
        """FlashInfer's deprecated ``forward``: :meth:`run` with these options replacing the
        plan's (``compat.PrefillWrapperCompat._forward``; ``pos_encoding_mode`` and
        ``use_fp16_qk_reduction`` are taken and ignored, as in FlashInfer)."""
        return self._forward((q, paged_kv_cache), dict(k_scale=k_scale, v_scale=v_scale),
                             dict(causal=causal, window_left=window_left,
                                  logits_soft_cap=logits_soft_cap, sm_scale=sm_scale, rope_scale=rope_scale,
                                  rope_theta=rope_theta))

    def forward_return_lse(self, q, paged_kv_cache, causal=False, pos_encoding_mode="NONE",
                           use_fp16_qk_reduction=False, k_scale=None, v_scale=None, window_left=-1,
                           logits_soft_cap=None, sm_scale=None, rope_scale=None, rope_theta=None):
        """:meth:`forward` returning ``(out, lse)``."""
        return self._forward((q, paged_kv_cache), dict(k_scale=k_scale, v_scale=v_scale, return_lse=True),
                             dict(causal=causal, window_left=window_left,
                                  logits_soft_cap=logits_soft_cap, sm_scale=sm_scale, rope_scale=rope_scale,
                                  rope_theta=rope_theta))
