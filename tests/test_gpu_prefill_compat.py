"""GPU tier: the FlashInfer call forms of prefill that servers use beside plan/run, against the
float32 reference of test_gpu_prefill: the deprecated ``forward`` / ``forward_return_lse``
(SGLang plans non-causal and passes ``causal=True`` there; its values replace the plan's),
``run_return_lse``, ``reset_workspace_buffer``, the planned values vLLM asserts, the single form
in FlashInfer's current argument order with ``k_scale`` / ``v_scale``, and SGLang's page-size-1
token cache (no page dimension) on the paged wrapper. Outputs are poisoned (NaN) first."""

from __future__ import annotations

import pytest
import torch

import cutefi
from test_gpu_prefill import _check, _qkv, _ragged, reference
from test_gpu_prefill_paged import _paged

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(
    not torch.cuda.is_available() or torch.cuda.get_device_capability() < (8, 0), reason="prefill: sm_80 and newer")]


def _batch_reference(q, k, v, qo_indptr, kv_indptr, causal, window_left=-1, sm_scale=None, cap=None):
    outs, lses = [], []
    for b in range(qo_indptr.shape[0] - 1):
        qs, qe, ks, ke = (int(x) for x in (qo_indptr[b], qo_indptr[b + 1], kv_indptr[b], kv_indptr[b + 1]))
        o, s = reference(q[qs:qe], k[ks:ke], v[ks:ke], causal, window_left, sm_scale=sm_scale, cap=cap)
        outs.append(o)
        lses.append(s)
    return torch.cat(outs), torch.cat(lses)


def _workspace():
    return torch.empty(1 << 20, dtype=torch.uint8, device="cuda")


@pytest.mark.parametrize("head_dim", [64, 128])
def test_ragged_forward_replaces_the_plan(head_dim):
    lens_q, lens_kv = [1, 17, 128, 300], [1, 40, 128, 700]
    q, k, v, qo_indptr, kv_indptr = _ragged(lens_q, lens_kv, 8, 2, head_dim, torch.bfloat16, head_dim + 1)
    wrapper = cutefi.BatchPrefillWithRaggedKVCacheWrapper(_workspace(), backend="fa2")
    wrapper.begin_forward(qo_indptr, kv_indptr, 8, 2, head_dim, causal=False, window_left=8, sm_scale=0.05,
                          q_data_type=torch.bfloat16)
    assert (wrapper._causal, wrapper._window_left, wrapper._sm_scale, wrapper._logits_soft_cap) == (False, 8, 0.05, 0.0)
    # forward's defaults replace the plan's too: causal on, no window, 1/sqrt(d) unless given
    out = wrapper.forward(q, k, v, causal=True, sm_scale=0.1)
    _check(out, None, *_batch_reference(q, k, v, qo_indptr, kv_indptr, True, sm_scale=0.1))
    assert (wrapper._causal, wrapper._window_left, wrapper._sm_scale) == (True, -1, 0.1)
    out, lse = wrapper.forward_return_lse(q, k, v, causal=True, sm_scale=0.1, logits_soft_cap=20.0)
    _check(out, lse, *_batch_reference(q, k, v, qo_indptr, kv_indptr, True, sm_scale=0.1, cap=20.0))
    out, lse = wrapper.forward_return_lse(q, k, v)  # (back to non-causal, 1/sqrt(d), no cap)
    _check(out, lse, *_batch_reference(q, k, v, qo_indptr, kv_indptr, False))
    wrapper.end_forward()


def test_paged_forward_scales_and_auxiliary_methods():
    lens_q, lens_kv = [1, 17, 300, 5], [1, 40, 1000, 0]
    q, k, v, qo_indptr, kv_indptr, paged, page_indptr, indices, last = _paged(lens_q, lens_kv, 8, 2, 128, 16, "NHD", 7)
    wrapper = cutefi.BatchPrefillWithPagedKVCacheWrapper(_workspace())
    wrapper.plan(qo_indptr, page_indptr, indices.cuda(), last, 8, 2, 128, 16, causal=False, q_data_type=torch.bfloat16)
    out = wrapper.forward(q, paged, causal=True, k_scale=0.5, v_scale=2.0)
    ref_out, ref_lse = _batch_reference(q, k, v, qo_indptr, kv_indptr, True, sm_scale=128 ** -0.5 * 0.5)
    _check(out, None, 2.0 * ref_out, ref_lse)
    # run_return_lse on the plan forward made; a new workspace keeps it
    wrapper.reset_workspace_buffer(_workspace(), torch.empty(8 << 20, dtype=torch.uint8, device="cuda"))
    lse = torch.full(q.shape[:2], float("nan"), device="cuda")
    out, lse = wrapper.run_return_lse(q, paged, lse=lse)
    _check(out, lse, *_batch_reference(q, k, v, qo_indptr, kv_indptr, True))
    with pytest.raises(NotImplementedError, match="kv_cache_sf"):
        wrapper.run(q, paged, kv_cache_sf=(torch.ones(1), torch.ones(1)))
    with pytest.raises(NotImplementedError, match="skip_softmax_threshold_scale_factor"):
        wrapper.run(q, paged, skip_softmax_threshold_scale_factor=0.5)
    wrapper.run(q, paged, kv_cache_sf=None, use_fp16_softmax=None, uses_spcompress=None)


@pytest.mark.parametrize("layout", ["NHD", "HND"])
@pytest.mark.parametrize("fused", [False, True], ids=["pair", "4d"])
def test_paged_token_cache_without_its_page_dimension(layout, fused):
    """SGLang's page-size-1 cache: a (k, v) pair of 3-D [slots, heads, head_dim] or one 4-D
    [slots, 2, heads, head_dim] tensor (FlashInfer adds the page dimension)."""
    lens_q, lens_kv = [3, 64, 1], [70, 64, 333]
    q, k, v, qo_indptr, kv_indptr, cache, page_indptr, indices, last = _paged(lens_q, lens_kv, 8, 2, 128, 1, layout,
                                                                               11, fused=True)
    page_dim = 1 if layout == "NHD" else 2  # (of [slots, page, heads, d] / [slots, heads, page, d])
    given = cache.squeeze(page_dim + 1) if fused else (cache[:, 0].squeeze(page_dim), cache[:, 1].squeeze(page_dim))
    wrapper = cutefi.BatchPrefillWithPagedKVCacheWrapper(_workspace(), layout)
    wrapper.plan(qo_indptr, page_indptr, indices.cuda(), last, 8, 2, 128, 1, causal=True, q_data_type=torch.bfloat16)
    out = torch.full_like(q, float("nan"))
    out, lse = wrapper.run(q, given, out=out, return_lse=True)
    _check(out, lse, *_batch_reference(q, k, v, qo_indptr, kv_indptr, True))


def test_single_in_flashinfers_current_order():
    q, k, v = _qkv(77, 300, 8, 2, 128, torch.bfloat16, seed=4)
    keep = torch.rand(77, 300, device="cuda") > 0.3
    # custom_mask is the 8th positional (after scale_q, scale_k, scale_v, o_dtype)
    out = cutefi.single_prefill_with_kv_cache(q, k, v, None, None, None, torch.bfloat16, keep, backend="fa2")
    _check(out, None, *reference(q, k, v, custom=keep))
    out, lse = cutefi.single_prefill_with_kv_cache_return_lse(q, k, v, causal=True, k_scale=0.5, v_scale=3.0)
    ref_out, ref_lse = reference(q, k, v, True, sm_scale=128 ** -0.5 * 0.5)
    _check(out, lse, 3.0 * ref_out, ref_lse)
    with pytest.raises(NotImplementedError, match="scale_q"):
        cutefi.single_prefill_with_kv_cache(q, k, v, scale_q=torch.ones(8, device="cuda"))
    with pytest.raises(NotImplementedError, match="o_dtype"):
        cutefi.single_prefill_with_kv_cache(q, k, v, o_dtype=torch.float32)
    with pytest.raises(NotImplementedError, match="kv_cache_sf"):
        cutefi.single_prefill_with_kv_cache(q, k, v, kv_cache_sf=(k, v))
