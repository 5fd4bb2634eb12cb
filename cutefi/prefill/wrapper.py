"""What the batch prefill wrappers share: their device work array (``WorkBuffer``) and the
state their constructors set up (``PrefillWrapperBase``)."""

from __future__ import annotations

import numpy as np
import torch

from .._checks import require_cuda, require_flag, require_tensor
from .._plans import PlanCache, signature
from ..jit.staging import Int32Staging
from . import launch, plan
from .masks import check_mask_buffer
from ..attention.decode_compat import check_jit_args
from .compat import PrefillWrapperCompat
from .ops import _NAMED, KV_LAYOUTS, TmaLaunch, _check_options


def check_plan_extras(q_dtype: torch.dtype, o_data_type=None, prefix_len_ptr=None, token_pos_in_items_ptr=None,
                      token_pos_in_items_len=0, max_item_len_ptr=None, seq_lens=None, seq_lens_q=None,
                      block_tables=None, v_indptr=None, o_indptr=None) -> None:
    """FlashInfer's plan options that cutefi's prefill does not take, refused by name rather than
    ignored (multi-item scoring would otherwise run as plain attention): its multi-item
    scoring mask, the KV lengths and page tables of its trtllm-gen backend, separate V / output
    offsets, and an output dtype other than q's. (The scheduling hints ``fixed_split_size``,
    ``disable_split_kv``, ``max_token_per_sequence`` and ``max_sequence_kv`` change no result:
    taken and unused.)"""
    if prefix_len_ptr is not None or token_pos_in_items_ptr is not None or max_item_len_ptr is not None \
            or token_pos_in_items_len:
        raise NotImplementedError("multi-item scoring (prefix_len_ptr, token_pos_in_items_ptr, "
                                  "token_pos_in_items_len, max_item_len_ptr): not in cutefi's prefill")
    for name, value in (("seq_lens", seq_lens), ("seq_lens_q", seq_lens_q), ("block_tables", block_tables),
                        ("v_indptr", v_indptr), ("o_indptr", o_indptr)):
        if value is not None:
            raise NotImplementedError(f"{name} (FlashInfer's trtllm-gen inputs): cutefi's prefill plans from the "
                                      "indptr arrays (and page table); pass None")
    if o_data_type is not None and plan_dtype(o_data_type) != q_dtype:
        raise NotImplementedError(f"o_data_type={o_data_type}: cutefi's prefill writes out in q's dtype ({q_dtype})")


def plan_dtype(value) -> torch.dtype:
    """A dtype given as FlashInfer takes it (a torch dtype or its name, as ``ops.plan_options``
    reads q's and the KV's)."""
    dtype = value if isinstance(value, torch.dtype) else _NAMED.get(str(value).replace("torch.", ""))
    if dtype is None:
        raise TypeError(f"o_data_type must be a torch dtype or one of {sorted(_NAMED)}; got {value!r}")
    return dtype


class PrefillWrapperBase(PrefillWrapperCompat):
    """The device (the workspace's), KV layout, work array, custom-mask buffer and plan."""

    def _setup(self, float_workspace_buffer, kv_layout: str, use_cuda_graph, custom_mask_buf, backend,
               jit_args=None, jit_kwargs=None) -> None:
        check_jit_args(jit_args, jit_kwargs)
        require_tensor("float_workspace_buffer", float_workspace_buffer)
        if kv_layout not in KV_LAYOUTS:
            raise ValueError(f"kv_layout must be 'NHD' or 'HND'; got {kv_layout!r}")
        _check_options("NONE", backend)
        self.device = require_cuda("float_workspace_buffer", float_workspace_buffer)  # (last)
        self._kv_layout = kv_layout
        self._buffer = WorkBuffer(self.device, bool(require_flag("use_cuda_graph", use_cuda_graph)))
        self._mask_buf = check_mask_buffer(custom_mask_buf, self.device)
        self._plan: dict | None = None
        self._launches = PlanCache(64)  # the plan's repeatable launches (``ops.TmaLaunch``), by call layout

    @staticmethod
    def _launch_key(tensors: tuple, options: tuple) -> tuple | None:
        """What a kept launch depends on besides data pointers: the call's tensor layouts and
        options (None, never kept: a tensor scale, read each call, or arguments that are not
        tensors, which the full checks name)."""
        try:
            if any(isinstance(option, torch.Tensor) for option in options):
                return None
            key = (*(signature(t) for t in tensors), *options)
            hash(key)
            return key
        except (AttributeError, TypeError):
            return None

    def _repeat(self, launch_: TmaLaunch, q, k_view, v_view, out, lse, return_lse: bool, sinks, kv_indices,
                head_dim_vo: int):
        """A kept launch on this call's tensors (the layout it was checked for; aligned)."""
        if out is None:
            out = torch.empty((*q.shape[:2], head_dim_vo), dtype=q.dtype, device=q.device)
        if lse is None and return_lse:
            lse = torch.empty(q.shape[:2], dtype=torch.float32, device=q.device)
        launch_(q, k_view, v_view, out, lse, self._buffer.work, self._buffer.counter, kv_indices,
                None if sinks is None else sinks.contiguous())
        return (out, lse) if return_lse else out

    @property
    def is_cuda_graph_enabled(self) -> bool:
        return self._buffer.use_cuda_graph

    @property
    def _counter(self) -> torch.Tensor:
        return self._buffer.counter


class WorkBuffer:
    """A wrapper's device work array (and unit counter). ``use_cuda_graph``: the array keeps
    its address and size, set by the first plan (padded with empty units: a request adds at
    most one partial q tile), so a captured run replays after later plans. Both tables go up
    through ``Int32Staging`` (one reused pinned buffer and one driver copy each, not a fresh
    pinned tensor and torch's copy every plan)."""

    def __init__(self, device: int, use_cuda_graph: bool) -> None:
        self.device = device
        self.use_cuda_graph = use_cuda_graph
        self.work: torch.Tensor | None = None
        self.counter = torch.zeros(1, dtype=torch.int32, device=f"cuda:{device}")  # (runs must not overlap)
        self.capacity = 0
        self.rope: torch.Tensor | None = None  # (``rotate.rope_index`` of plans with RoPE)
        self._work_staging = Int32Staging(device, fixed=use_cuda_graph)
        self._rope_staging = Int32Staging(device, fixed=use_cuda_graph)

    def upload(self, part: plan.PrefillPartition, batch: int, total_q: int, non_blocking: bool) -> int:
        """Copy the partition's work array to the device; returns the pairs the kernel walks."""
        work = part.work
        if self.use_cuda_graph:
            if self.work is None:
                self.capacity = int(batch + -(-total_q // launch.TILE_M))
            if part.pairs > self.capacity:
                raise ValueError(f"this plan has {part.pairs} q tiles, more than the {self.capacity} the CUDA-graph "
                                 "wrapper was sized for at its first plan")
            padded = np.zeros((launch.WORK_ROWS, self.capacity), dtype=np.int32)  # empty units: nothing stored
            padded[:, :part.pairs] = work
            work = padded
        flat = np.ascontiguousarray(work, dtype=np.int32).reshape(-1)
        self.work = self._work_staging.send([flat], bool(non_blocking))[0]
        return work.shape[1]

    def upload_rope(self, index: np.ndarray, non_blocking: bool) -> torch.Tensor:
        """The plan's ``rotate.rope_index`` on the device (CUDA graphs: one address, so every
        plan must have the first one's batch size)."""
        index = np.ascontiguousarray(index, dtype=np.int32).reshape(-1)
        if self.use_cuda_graph and self.rope is not None and self.rope.numel() != index.size:
            raise ValueError(f"this plan's batch differs from the first plan's ({(self.rope.numel() - 2) // 4} "
                             "requests): a CUDA-graph wrapper keeps its batch size")
        self.rope = self._rope_staging.send([index], bool(non_blocking))[0]
        return self.rope
