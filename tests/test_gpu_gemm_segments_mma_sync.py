"""GPU tier: the grouped GEMMs (SegmentGEMMWrapper, group_gemm_fp8_nt_groupwise) on the mma.sync
grouped builds, the path of every GPU other than Hopper: ``test_gpu_gemm_segments``'s tests
(float32 references written there, poisoned outputs, segment bounds past the rows and before
row 0, weight indices repeating a weight, CUDA-graph replay with new lengths) re-run with each
build forced by ``plan.override`` (a Hopper runs them too; its FP8 MMA is emulated by ptxas).
Plus weight indices outside the weights, which the mma.sync builds turn into zero rows."""

from __future__ import annotations

import pytest
import torch
from test_gpu_gemm_segments import (
    _check_rows,
    test_group_gemm_fp8_groupwise,
    test_segment_bounds_past_the_rows_write_nothing_outside_out,
    test_segment_gemm,
    test_segment_gemm_in_a_cuda_graph,
    test_segment_gemm_weight_indices_and_uncovered_rows,
)

import cutefi
from cutefi.gemm import launch
from cutefi.gemm.plan import override

# (re-run here under the fixture below)
__all__ = ["test_group_gemm_fp8_groupwise", "test_segment_bounds_past_the_rows_write_nothing_outside_out",
           "test_segment_gemm", "test_segment_gemm_in_a_cuda_graph",
           "test_segment_gemm_weight_indices_and_uncovered_rows",
           "test_weight_index_outside_the_weights_gives_zero_rows"]

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(
    not torch.cuda.is_available() or torch.cuda.get_device_capability() < (8, 0), reason="needs a CUDA GPU")]


@pytest.fixture(autouse=True, params=["64x64", "128x128"])
def mma_sync_build(request):
    """Each test under the small and the 128 x 128 grouped build (FP8: the block-scaled ones)."""
    fp8 = "fp8" in request.node.name
    if fp8 and torch.cuda.get_device_capability() < (8, 9):
        pytest.skip("FP8 tensor cores: sm_89 and newer")
    configs = launch.SM80_BLOCK_SCALED_CONFIGS[::-1] if fp8 else launch.SM80_GROUPED_CONFIGS
    with override(config=configs[0 if request.param == "64x64" else 1].name):
        yield


def test_weight_index_outside_the_weights_gives_zero_rows():
    gen = torch.Generator(device="cuda").manual_seed(11)
    x = torch.randn(90, 128, device="cuda", dtype=torch.bfloat16, generator=gen)
    weights = torch.randn(2, 64, 128, device="cuda", dtype=torch.bfloat16, generator=gen) / 8
    out = torch.full((90, 64), float("nan"), device="cuda", dtype=torch.bfloat16)
    wrapper = cutefi.SegmentGEMMWrapper(torch.empty(1 << 20, dtype=torch.int8, device="cuda"))
    wrapper.run(x, weights, 3, True, out=out, seg_lens=torch.tensor([30, 30, 30], device="cuda"),
                weight_indices=torch.tensor([1, 2, -1], device="cuda"))
    _check_rows(out, x[:30].float() @ weights[1].float().t(), slice(0, 30))
    assert (out[30:] == 0).all(), "a missing weight must give zero rows"
