"""What the batch prefill wrappers share: their device work array (``WorkBuffer``) and the
state their constructors set up (``PrefillWrapperBase``)."""

from __future__ import annotations

import numpy as np
import torch

from .._checks import require_cuda, require_flag, require_tensor
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
    most one partial q tile), so a captured run replays after later plans."""

    def __init__(self, device: int, use_cuda_graph: bool) -> None:
        self.device = device
        self.use_cuda_graph = use_cuda_graph
        self.work: torch.Tensor | None = None
        self.counter = torch.zeros(1, dtype=torch.int32, device=f"cuda:{device}")  # (runs must not overlap)
        self.capacity = 0
        self.rope: torch.Tensor | None = None  # (``rotate.rope_index`` of plans with RoPE)

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
        staged = torch.from_numpy(np.ascontiguousarray(work).reshape(-1))
        if self.work is None or (self.work.numel() != staged.numel() and not self.use_cuda_graph):
            self.work = torch.empty(staged.numel(), dtype=torch.int32, device=f"cuda:{self.device}")
        self.work.copy_(staged.pin_memory() if non_blocking else staged, non_blocking=bool(non_blocking))
        return work.shape[1]

    def upload_rope(self, index: np.ndarray, non_blocking: bool) -> torch.Tensor:
        """The plan's ``rotate.rope_index`` on the device (CUDA graphs: one address, so every
        plan must have the first one's batch size)."""
        staged = torch.from_numpy(index)
        if self.rope is None or self.rope.numel() != staged.numel():
            if self.use_cuda_graph and self.rope is not None:
                raise ValueError(f"this plan's batch differs from the first plan's ({(self.rope.numel() - 2) // 4} "
                                 "requests): a CUDA-graph wrapper keeps its batch size")
            self.rope = torch.empty(staged.numel(), dtype=torch.int32, device=f"cuda:{self.device}")
        self.rope.copy_(staged.pin_memory() if non_blocking else staged, non_blocking=bool(non_blocking))
        return self.rope
