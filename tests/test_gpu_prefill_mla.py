"""DeepSeek-style MLA prefill (head_dim_qk 192, head_dim_vo 128) on both kernels (Hopper's TMA
build and the mma.sync kernel, forced on Hopper with ``ops.MMA_SYNC_ONLY``): single and ragged
forms against the float32 reference (scores over 192 dims, output over V's 128)."""

from __future__ import annotations

import pytest
import torch

import cutefi
from cutefi.prefill import ops
from test_gpu_prefill import _check, _ragged_reference, pytestmark, reference

__all__ = ["pytestmark"]


@pytest.fixture(autouse=True, params=["native", "mma_sync"])
def _kernel(request, monkeypatch):
    """Each test on the GPU's own kernel and again on the mma.sync kernel."""
    monkeypatch.setattr(ops, "MMA_SYNC_ONLY", request.param == "mma_sync")


def _mla(lens_q, lens_kv, heads, kv_heads, seed):
    gen = torch.Generator(device="cuda").manual_seed(seed)
    q = torch.randn(sum(lens_q), heads, 192, device="cuda", dtype=torch.bfloat16, generator=gen)
    k = torch.randn(sum(lens_kv), kv_heads, 192, device="cuda", dtype=torch.bfloat16, generator=gen)
    v = torch.randn(sum(lens_kv), kv_heads, 128, device="cuda", dtype=torch.bfloat16, generator=gen)
    indptr = lambda lens: torch.tensor([0, *torch.tensor(lens).cumsum(0).tolist()], dtype=torch.int32)
    return q, k, v, indptr(lens_q), indptr(lens_kv)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("qo,kv", [(1, 1), (200, 333), (129, 64), (1000, 1500)])
def test_single_mla(causal, qo, kv):
    q, k, v, _, _ = _mla([qo], [kv], 8, 8, qo + kv)
    out, lse = cutefi.single_prefill_with_kv_cache(q, k, v, causal=causal, return_lse=True)
    assert out.shape == (qo, 8, 128)
    _check(out, lse, *reference(q, k, v, causal))


@pytest.mark.parametrize("heads,kv_heads,window_left,cap", [(16, 16, 150, None), (8, 2, -1, None), (4, 4, -1, 30.0)])
def test_ragged_mla(heads, kv_heads, window_left, cap):
    lens_q, lens_kv = [300, 1, 64, 17, 700], [300, 200, 64, 500, 1100]
    q, k, v, qo_indptr, kv_indptr = _mla(lens_q, lens_kv, heads, kv_heads, heads)
    wrapper = cutefi.BatchPrefillWithRaggedKVCacheWrapper(torch.empty(1 << 20, dtype=torch.uint8, device="cuda"))
    wrapper.plan(qo_indptr, kv_indptr, heads, kv_heads, 192, head_dim_vo=128, causal=True,
                 q_data_type=torch.bfloat16, window_left=window_left, logits_soft_cap=cap)
    out = torch.full((q.shape[0], heads, 128), float("nan"), device="cuda", dtype=torch.bfloat16)
    out, lse = wrapper.run(q, k, v, out=out, return_lse=True)
    _check(out, lse, *_ragged_reference(q, k, v, qo_indptr, kv_indptr, True, window_left=window_left,
                                        cap=cap))


def test_mla_refusals():
    q, k, v, qo_indptr, kv_indptr = _mla([8], [8], 4, 4, 1)
    workspace = torch.empty(1 << 20, dtype=torch.uint8, device="cuda")
    wrapper = cutefi.BatchPrefillWithRaggedKVCacheWrapper(workspace)
    with pytest.raises(NotImplementedError, match="head_dim_vo"):
        wrapper.plan(qo_indptr, kv_indptr, 4, 4, 128, head_dim_vo=64, q_data_type=torch.bfloat16)
    wrapper.plan(qo_indptr, kv_indptr, 4, 4, 192, head_dim_vo=128, q_data_type=torch.bfloat16)
    with pytest.raises(ValueError, match="head_dim must be one of"):
        wrapper.run(q, k, k)  # (v of 192 with q/k of 192)
    with pytest.raises(ValueError, match="differ from the plan"):
        wrapper.run(q[..., :128], k[..., :128], v)  # (a plain d128 call on an MLA plan)
    paged = cutefi.BatchPrefillWithPagedKVCacheWrapper(workspace)
    with pytest.raises(NotImplementedError, match="ragged K/V only"):
        paged.plan(qo_indptr, torch.tensor([0, 1], dtype=torch.int32), torch.zeros(1, dtype=torch.int32),
                   torch.tensor([8], dtype=torch.int32), 4, 4, 192, 16, head_dim_vo=128)
    with pytest.raises(TypeError, match="not FP8"):
        cutefi.single_prefill_with_kv_cache(q, k.to(torch.float8_e4m3fn), v.to(torch.float8_e4m3fn))
