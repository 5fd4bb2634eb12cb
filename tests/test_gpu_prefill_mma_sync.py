"""The mma.sync prefill kernel (every GPU from sm_80 but Hopper's TMA path) on any GPU: the
Hopper tests of the single, ragged and paged forms again, with the kernel forced
(``ops.MMA_SYNC_ONLY``), against the same float32 references. On an H100/H200 this is the
only way to run the sm_80 family's kernel."""

from __future__ import annotations

import pytest

from cutefi.prefill import ops

from test_gpu_prefill import (pytestmark, test_cuda_graph_replay_after_replan, test_ragged, test_ragged_sinks,
                              test_ragged_rows_of_other_requests_untouched, test_side_stream, test_single,
                              test_single_layouts_and_groups, test_single_window_cap_scale)
from test_gpu_prefill_paged import test_paged, test_paged_cuda_graph_replay_after_replan, test_paged_layouts

__all__ = ["pytestmark", "test_cuda_graph_replay_after_replan", "test_ragged", "test_ragged_sinks",
           "test_ragged_rows_of_other_requests_untouched", "test_side_stream", "test_single",
           "test_single_layouts_and_groups", "test_single_window_cap_scale", "test_paged",
           "test_paged_cuda_graph_replay_after_replan", "test_paged_layouts"]


@pytest.fixture(autouse=True)
def _mma_sync_only(monkeypatch):
    monkeypatch.setattr(ops, "MMA_SYNC_ONLY", True)
