"""What the batch prefill wrappers share: their device work array (``WorkBuffer``) and the
state their constructors set up (``PrefillWrapperBase``)."""

from __future__ import annotations

import numpy as np
import torch

from .._checks import require_cuda, require_flag, require_tensor
from ..jit.staging import Int32Staging
from . import launch, plan
from .masks import check_mask_buffer
from .ops import KV_LAYOUTS, _check_options


class PrefillWrapperBase:
    """The device (the workspace's), KV layout, work array, custom-mask buffer and plan."""

    def _setup(self, float_workspace_buffer, kv_layout: str, use_cuda_graph, custom_mask_buf, backend) -> None:
        require_tensor("float_workspace_buffer", float_workspace_buffer)
        if kv_layout not in KV_LAYOUTS:
            raise ValueError(f"kv_layout must be 'NHD' or 'HND'; got {kv_layout!r}")
        _check_options("NONE", backend)
        self.device = require_cuda("float_workspace_buffer", float_workspace_buffer)  # (last)
        self._kv_layout = kv_layout
        self._buffer = WorkBuffer(self.device, bool(require_flag("use_cuda_graph", use_cuda_graph)))
        self._mask_buf = check_mask_buffer(custom_mask_buf, self.device)
        self._plan: dict | None = None

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
