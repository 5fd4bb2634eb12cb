"""Custom masks (FlashInfer's ``custom_mask`` / ``packed_custom_mask``) on the GPU: single,
ragged and paged forms, boolean and packed, with a window, under CUDA graphs; each against the
float32 reference of ``test_gpu_prefill`` given the same mask. A custom mask replaces the
causal one (``causal=True`` is ignored, as in FlashInfer)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import cutefi
from test_gpu_prefill import _check, _qkv, _ragged, _ragged_reference, pytestmark, reference
from test_gpu_prefill_paged import _paged

__all__ = ["pytestmark"]


def _random_mask(qo: int, kv: int, seed: int) -> torch.Tensor:
    """Random keeps (60%), one row with nothing kept, one row keeping only its last key."""
    gen = torch.Generator(device="cuda").manual_seed(seed)
    mask = torch.rand(qo, kv, device="cuda", generator=gen) < 0.6
    if qo > 2 and kv:
        mask[1] = False
        mask[2] = False
        mask[2, -1] = True
    return mask


def _pack(mask: torch.Tensor) -> torch.Tensor:
    return torch.from_numpy(np.packbits(mask.cpu().numpy().reshape(-1), bitorder="little")).cuda()


@pytest.mark.parametrize("head_dim", [64, 128, 256])
@pytest.mark.parametrize("qo,kv", [(1, 1), (77, 300), (300, 129)])
@pytest.mark.parametrize("packed", [False, True])
def test_single_custom_mask(head_dim, qo, kv, packed):
    q, k, v = _qkv(qo, kv, 8, 2, head_dim, torch.bfloat16, seed=qo + kv)
    mask = _random_mask(qo, kv, head_dim + qo)
    given = {"packed_custom_mask": _pack(mask)} if packed else {"custom_mask": mask}
    out, lse = cutefi.single_prefill_with_kv_cache(q, k, v, causal=True, return_lse=True, **given)
    _check(out, lse, *reference(q, k, v, custom=mask))


def test_single_custom_mask_with_window_and_cap():
    q, k, v = _qkv(200, 260, 4, 4, 128, torch.float16, seed=3)
    mask = _random_mask(200, 260, 4)
    out, lse = cutefi.single_prefill_with_kv_cache(q, k, v, custom_mask=mask, window_left=50, logits_soft_cap=20.0,
                                                   return_lse=True)
    _check(out, lse, *reference(q, k, v, window_left=50, cap=20.0, custom=mask))


def _requests_masks(lens_q, lens_kv, seed):
    return [_random_mask(a, b, seed + i) for i, (a, b) in enumerate(zip(lens_q, lens_kv))]


def _reference_by_request(q, k, v, qo_indptr, kv_indptr, masks):
    outs, lses = [], []
    for b, mask in enumerate(masks):
        qs, ks = slice(qo_indptr[b], qo_indptr[b + 1]), slice(kv_indptr[b], kv_indptr[b + 1])
        out, lse = reference(q[qs], k[ks], v[ks], custom=mask)
        outs.append(out)
        lses.append(lse)
    return torch.cat(outs), torch.cat(lses)


@pytest.mark.parametrize("packed", [False, True])
def test_ragged_custom_mask(packed):
    lens_q, lens_kv = [1, 130, 7, 64, 3], [1, 200, 300, 64, 0]
    q, k, v, qo_indptr, kv_indptr = _ragged(lens_q, lens_kv, 8, 4, 128, torch.bfloat16, 9)
    masks = _requests_masks(lens_q, lens_kv, 11)
    flat = torch.cat([m.reshape(-1) for m in masks])
    given = ({"packed_custom_mask": torch.cat([_pack(m) for m in masks if m.numel()])} if packed
             else {"custom_mask": flat})
    wrapper = cutefi.BatchPrefillWithRaggedKVCacheWrapper(torch.empty(1 << 20, dtype=torch.uint8, device="cuda"))
    wrapper.plan(qo_indptr, kv_indptr, 8, 4, 128, causal=True, q_data_type=torch.bfloat16, **given)
    out, lse = wrapper.run(q, k, v, out=torch.full_like(q, float("nan")), return_lse=True)
    _check(out, lse, *_reference_by_request(q, k, v, qo_indptr.tolist(), kv_indptr.tolist(), masks))
    wrapper.plan(qo_indptr, kv_indptr, 8, 4, 128, causal=True, q_data_type=torch.bfloat16)  # back to causal
    plain = wrapper.run(q, k, v)
    _check(plain, None, *_ragged_reference(q, k, v, qo_indptr, kv_indptr, True))


def test_paged_custom_mask():
    lens_q, lens_kv = [5, 129, 1], [40, 300, 17]
    q, k, v, qo_indptr, kv_indptr, paged, page_indptr, indices, last = _paged(lens_q, lens_kv, 4, 2, 64, 16, "NHD", 2)
    masks = _requests_masks(lens_q, lens_kv, 21)
    wrapper = cutefi.BatchPrefillWithPagedKVCacheWrapper(torch.empty(1 << 20, dtype=torch.uint8, device="cuda"))
    wrapper.plan(qo_indptr, page_indptr, indices.cuda(), last, 4, 2, 64, 16, q_data_type=torch.bfloat16,
                 custom_mask=torch.cat([m.reshape(-1) for m in masks]))
    out, lse = wrapper.run(q, paged, return_lse=True)
    _check(out, lse, *_reference_by_request(q, k, v, qo_indptr.tolist(), kv_indptr.tolist(), masks))


def test_ragged_custom_mask_cuda_graph():
    """Graph mode keeps the packed mask in ``custom_mask_buf``: a replay after a new plan uses
    the new mask; without the buffer the plan is refused."""
    lens_q, lens_kv = [100, 30], [120, 90]
    q, k, v, qo_indptr, kv_indptr = _ragged(lens_q, lens_kv, 4, 4, 64, torch.bfloat16, 31)
    workspace = torch.empty(1 << 20, dtype=torch.uint8, device="cuda")
    refused = cutefi.BatchPrefillWithRaggedKVCacheWrapper(workspace, use_cuda_graph=True)
    with pytest.raises(ValueError, match="custom_mask_buf"):
        refused.plan(qo_indptr, kv_indptr, 4, 4, 64, custom_mask=torch.ones(100 * 120 + 30 * 90, dtype=torch.bool),
                     q_data_type=torch.bfloat16)
    wrapper = cutefi.BatchPrefillWithRaggedKVCacheWrapper(
        workspace, use_cuda_graph=True, custom_mask_buf=torch.empty(4096, dtype=torch.uint8, device="cuda"))
    first = _requests_masks(lens_q, lens_kv, 41)
    wrapper.plan(qo_indptr, kv_indptr, 4, 4, 64, custom_mask=torch.cat([m.reshape(-1) for m in first]),
                 q_data_type=torch.bfloat16)
    out = torch.empty_like(q)
    wrapper.run(q, k, v, out=out)  # (warm-up: loads the kernel)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        wrapper.run(q, k, v, out=out)
    second = _requests_masks(lens_q, lens_kv, 51)
    wrapper.plan(qo_indptr, kv_indptr, 4, 4, 64, custom_mask=torch.cat([m.reshape(-1) for m in second]),
                 q_data_type=torch.bfloat16)
    out.fill_(float("nan"))
    graph.replay()
    torch.cuda.synchronize()
    expected, _ = _reference_by_request(q, k, v, qo_indptr.tolist(), kv_indptr.tolist(), second)
    _check(out, None, expected, None)
