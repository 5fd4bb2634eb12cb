"""GPU tier: the batch prefill wrappers keep a checked run's Hopper launch by call layout and
repeat it with only the new tensors' addresses. Each repeat here gets fresh random inputs of the
same layout (and outputs poisoned with NaN), so a launch that reused an earlier call's tensors,
scales or plan is caught against the float32 reference of test_gpu_prefill; a new plan, a new
scale and forward's rescale each take effect."""

from __future__ import annotations

import pytest
import torch

import cutefi
from test_gpu_prefill import _check, _ragged, reference
from test_gpu_prefill_paged import _paged

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(
    not torch.cuda.is_available() or torch.cuda.get_device_capability() < (8, 0), reason="prefill: sm_80 and newer")]


def _reference(q, k, v, qo_indptr, kv_indptr, causal=True, sm_scale=None):
    outs, lses = [], []
    for b in range(qo_indptr.shape[0] - 1):
        qs, qe, ks, ke = (int(x) for x in (qo_indptr[b], qo_indptr[b + 1], kv_indptr[b], kv_indptr[b + 1]))
        o, s = reference(q[qs:qe], k[ks:ke], v[ks:ke], causal, sm_scale=sm_scale)
        outs.append(o)
        lses.append(s)
    return torch.cat(outs), torch.cat(lses)


def _nan(like: torch.Tensor, shape=None, dtype=None) -> torch.Tensor:
    return torch.full(shape or like.shape, float("nan"), device="cuda", dtype=dtype or like.dtype)


def test_ragged_repeats_read_each_calls_tensors():
    lens_q, lens_kv = [1, 17, 200], [40, 17, 500]
    wrapper = cutefi.BatchPrefillWithRaggedKVCacheWrapper(torch.empty(1 << 20, dtype=torch.uint8, device="cuda"))
    _, _, _, qo_indptr, kv_indptr = _ragged(lens_q, lens_kv, 8, 2, 128, torch.bfloat16, 0)
    wrapper.plan(qo_indptr, kv_indptr, 8, 2, 128, causal=True, q_data_type=torch.bfloat16)
    for seed in range(1, 4):  # (the first call checks and keeps the launch; the others repeat it)
        q, k, v, _, _ = _ragged(lens_q, lens_kv, 8, 2, 128, torch.bfloat16, seed)
        _check(wrapper.run(q, k, v), None, *_reference(q, k, v, qo_indptr, kv_indptr))
        out, lse = _nan(q), _nan(q, q.shape[:2], torch.float32)
        result = wrapper.run(q, k, v, out=out, lse=lse, return_lse=True)
        assert result[0] is out and result[1] is lse
        _check(out, lse, *_reference(q, k, v, qo_indptr, kv_indptr))
        out, lse = wrapper.run_return_lse(q, k, v)
        _check(out, lse, *_reference(q, k, v, qo_indptr, kv_indptr))
    # a run scale is part of the kept launch's layout: each value takes effect
    for v_scale in (2.0, 0.5):
        out = wrapper.run(q, k, v, v_scale=v_scale, k_scale=0.5)
        ref_out, _ = _reference(q, k, v, qo_indptr, kv_indptr, sm_scale=128 ** -0.5 * 0.5)
        _check(out, None, v_scale * ref_out, None)
    # forward's new sm_scale rescales the plan: the kept launches go with the old one
    out = wrapper.forward(q, k, v, causal=True, sm_scale=0.05)
    _check(out, None, _reference(q, k, v, qo_indptr, kv_indptr, sm_scale=0.05)[0], None)
    _check(wrapper.run(q, k, v), None, _reference(q, k, v, qo_indptr, kv_indptr, sm_scale=0.05)[0], None)
    # a new plan of other lengths (q and k of the same shapes): its own launch
    lens_kv2 = [10, 17, 530]
    q2, k2, v2, qo2, kv2 = _ragged(lens_q, lens_kv2, 8, 2, 128, torch.bfloat16, 9)
    wrapper.plan(qo2, kv2, 8, 2, 128, causal=True, q_data_type=torch.bfloat16)
    for _ in range(2):
        _check(wrapper.run(q2, k2, v2), None, *_reference(q2, k2, v2, qo2, kv2))


def _dense(paged, fused: bool, page_indptr, indices, lens_kv):
    """The requests' k and v rows, in order, from an NHD cache through its page table."""
    k_cache, v_cache = (paged[:, 0], paged[:, 1]) if fused else paged
    ks, vs = [], []
    for b, n in enumerate(lens_kv):
        pages = indices[int(page_indptr[b]):int(page_indptr[b + 1])].long().cuda()
        ks.append(k_cache[pages].flatten(0, 1)[:n])
        vs.append(v_cache[pages].flatten(0, 1)[:n])
    return torch.cat(ks), torch.cat(vs)


@pytest.mark.parametrize("fused", [False, True])
def test_paged_repeats_read_each_calls_cache(fused):
    lens_q, lens_kv = [3, 64, 1], [70, 64, 333]
    q, _, _, qo_indptr, kv_indptr, paged, page_indptr, indices, last = _paged(lens_q, lens_kv, 8, 2, 128, 16, "NHD",
                                                                               1, fused=fused)
    wrapper = cutefi.BatchPrefillWithPagedKVCacheWrapper(torch.empty(1 << 20, dtype=torch.uint8, device="cuda"))
    wrapper.plan(qo_indptr, page_indptr, indices.cuda(), last, 8, 2, 128, 16, causal=True, q_data_type=torch.bfloat16)
    for repeat in range(3):  # (fresh q and fresh cache tensors of one layout each time)
        q = torch.randn_like(q)
        paged = torch.randn_like(paged) if fused else tuple(torch.randn_like(c) for c in paged)
        k, v = _dense(paged, fused, page_indptr, indices, lens_kv)
        out, lse = wrapper.run(q, paged, out=_nan(q), return_lse=True)
        _check(out, lse, *_reference(q, k, v, qo_indptr, kv_indptr))
        _check(wrapper.run(q, paged), None, *_reference(q, k, v, qo_indptr, kv_indptr))
    # the same cache tensors with new contents
    for cache in ((paged,) if fused else paged):
        cache.mul_(-1)
    _check(wrapper.run(q, paged), None, *_reference(q, -k, -v, qo_indptr, kv_indptr))
