"""GPU tier: BatchPrefillWithPagedKVCacheWrapper on Hopper against the float32 reference of
test_gpu_prefill (the same requests as contiguous K/V): page sizes 16, 32, 64, every head_dim,
NHD and HND, (k, v) pairs and one [pages, 2, ...] tensor, pages in shuffled order, lengths that
end inside a page, a request with no pages, causal (append) and not, a CUDA-graph replay."""

from __future__ import annotations

import pytest
import torch

import cutefi
from test_gpu_prefill import _check, _ragged_reference

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(
    not torch.cuda.is_available() or torch.cuda.get_device_capability() < (8, 0), reason="prefill: sm_80 and newer")]


def _paged(lens_q, lens_kv, heads, kv_heads, d, page_size, layout, seed, fused=False):
    """q, the dense k/v and their indptrs (for the reference), and the paged form of k/v."""
    gen = torch.Generator(device="cuda").manual_seed(seed)
    q = torch.randn(sum(lens_q), heads, d, device="cuda", dtype=torch.bfloat16, generator=gen)
    k = torch.randn(sum(lens_kv), kv_heads, d, device="cuda", dtype=torch.bfloat16, generator=gen)
    v = torch.randn(sum(lens_kv), kv_heads, d, device="cuda", dtype=torch.bfloat16, generator=gen)
    pages_each = [-(-n // page_size) for n in lens_kv]
    total = sum(pages_each) + 3  # (spare pages nobody uses)
    order = torch.randperm(total, generator=torch.Generator().manual_seed(seed)).to(torch.int32)
    cache = torch.randn(total, 2, page_size, kv_heads, d, device="cuda", dtype=torch.bfloat16, generator=gen)
    first, start = 0, 0
    for n, count in zip(lens_kv, pages_each):
        ids = order[first:first + count].long().cuda()
        for which, dense in ((0, k), (1, v)):
            rows = torch.zeros(count * page_size, kv_heads, d, device="cuda", dtype=torch.bfloat16)
            rows[:n] = dense[start:start + n]
            cache[ids, which] = rows.view(count, page_size, kv_heads, d)
        first += count
        start += n
    if layout == "HND":
        cache = cache.transpose(2, 3).contiguous()
    paged = cache if fused else (cache[:, 0], cache[:, 1])
    indptr = lambda lens: torch.tensor([0, *torch.tensor(lens).cumsum(0).tolist()], dtype=torch.int32)
    last = torch.tensor([(n - 1) % page_size + 1 if n else 0 for n in lens_kv], dtype=torch.int32)
    return q, k, v, indptr(lens_q), indptr(lens_kv), paged, indptr(pages_each), order[:sum(pages_each)], last


@pytest.mark.parametrize("head_dim,page_size", [(64, 16), (64, 64), (128, 16), (128, 32), (128, 64), (256, 16),
                                                (256, 32), (256, 64)])
@pytest.mark.parametrize("causal", [False, True])
def test_paged(head_dim, page_size, causal):
    lens_q = [1, 17, 128, 300, 64, 5]
    lens_kv = [1, 40, 128, 301, 1000, 0]
    q, k, v, qo_indptr, kv_indptr, paged, page_indptr, indices, last = _paged(
        lens_q, lens_kv, 8, 2, head_dim, page_size, "NHD", head_dim + page_size)
    wrapper = cutefi.BatchPrefillWithPagedKVCacheWrapper(torch.empty(1 << 20, dtype=torch.uint8, device="cuda"))
    wrapper.plan(qo_indptr, page_indptr, indices.cuda(), last, 8, 2, head_dim, page_size, causal=causal,
                 q_data_type=torch.bfloat16)
    out = torch.full_like(q, float("nan"))
    out, lse = wrapper.run(q, paged, out=out, return_lse=True)
    _check(out, lse, *_ragged_reference(q, k, v, qo_indptr, kv_indptr, causal))


@pytest.mark.parametrize("head_dim,page_size", [(128, 1), (64, 3), (128, 8), (256, 5), (128, 128)])
def test_paged_any_page_size(head_dim, page_size):
    """Page sizes the TMA kernel has no build for run on the mma.sync kernel (a page table
    lookup a row), on Hopper too; requests end mid-page."""
    lens_q = [3, 130, 1, 77]
    lens_kv = [10, 300, 1, 200]
    q, k, v, qo_indptr, kv_indptr, paged, page_indptr, indices, last = _paged(
        lens_q, lens_kv, 4, 2, head_dim, page_size, "HND", page_size)
    wrapper = cutefi.BatchPrefillWithPagedKVCacheWrapper(torch.empty(1 << 20, dtype=torch.uint8, device="cuda"),
                                                         "HND")
    wrapper.plan(qo_indptr, page_indptr, indices.cuda(), last, 4, 2, head_dim, page_size, causal=True,
                 q_data_type=torch.bfloat16)
    out = torch.full_like(q, float("nan"))
    out, lse = wrapper.run(q, paged, out=out, return_lse=True)
    _check(out, lse, *_ragged_reference(q, k, v, qo_indptr, kv_indptr, True))


@pytest.mark.parametrize("layout,fused", [("HND", False), ("NHD", True), ("HND", True)])
def test_paged_layouts(layout, fused):
    lens_q, lens_kv = [200, 33], [700, 33]
    q, k, v, qo_indptr, kv_indptr, paged, page_indptr, indices, last = _paged(
        lens_q, lens_kv, 16, 4, 128, 16, layout, 3, fused)
    wrapper = cutefi.BatchPrefillWithPagedKVCacheWrapper(torch.empty(1 << 20, dtype=torch.uint8, device="cuda"),
                                                         layout)
    wrapper.plan(qo_indptr, page_indptr, indices, last, 16, 4, 128, 16, causal=True, q_data_type="bfloat16")
    _check(wrapper.run(q, paged), None, *_ragged_reference(q, k, v, qo_indptr, kv_indptr, True))


def test_paged_cuda_graph_replay_after_replan():
    lens_q, lens_kv = [100, 1, 300], [400, 50, 300]
    q, k, v, qo_indptr, kv_indptr, paged, page_indptr, indices, last = _paged(lens_q, lens_kv, 8, 8, 128, 32,
                                                                               "NHD", 5)
    indices_buf = torch.empty(4096, dtype=torch.int32, device="cuda")
    wrapper = cutefi.BatchPrefillWithPagedKVCacheWrapper(torch.empty(1 << 20, dtype=torch.uint8, device="cuda"),
                                                         use_cuda_graph=True, paged_kv_indices_buf=indices_buf)
    wrapper.plan(qo_indptr, page_indptr, indices, last, 8, 8, 128, 32, causal=True, q_data_type=torch.bfloat16)
    out = torch.full_like(q, float("nan"))
    wrapper.run(q, paged, out=out)
    _check(out, None, *_ragged_reference(q, k, v, qo_indptr, kv_indptr, True))
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        wrapper.run(q, paged, out=out)
    # the same cache, a new page order and lengths: plan again, replay
    lens_kv2 = [300, 60, 390]
    q2, k2, v2, qo2, kv2, paged2, page_indptr2, indices2, last2 = _paged(lens_q, lens_kv2, 8, 8, 128, 32, "NHD", 6)
    for dst, src in zip(paged, paged2):
        dst[:src.shape[0]].copy_(src)
    q.copy_(q2)
    wrapper.plan(qo2, page_indptr2, indices2, last2, 8, 8, 128, 32, causal=True, q_data_type=torch.bfloat16)
    out.fill_(float("nan"))
    graph.replay()
    torch.cuda.synchronize()
    _check(out, None, *_ragged_reference(q2, k2, v2, qo2, kv2, True))


def test_paged_refusals():
    wrapper = cutefi.BatchPrefillWithPagedKVCacheWrapper(torch.empty(1 << 20, dtype=torch.uint8, device="cuda"))
    indptr = torch.tensor([0, 1], dtype=torch.int32)
    with pytest.raises(ValueError, match="page_size must be >= 1"):
        wrapper.plan(indptr, indptr, torch.zeros(1, dtype=torch.int32), torch.ones(1, dtype=torch.int32), 4, 4, 128, 0)
    with pytest.raises(ValueError, match="last_page_len"):
        wrapper.plan(indptr, indptr, torch.zeros(1, dtype=torch.int32), torch.tensor([17], dtype=torch.int32), 4, 4,
                     128, 16)


@pytest.mark.parametrize("page_size", [16, 3])
def test_paged_sinks(page_size):
    lens_q, lens_kv = [17, 200], [100, 150]
    q, k, v, qo_indptr, kv_indptr, paged, page_indptr, indices, last = _paged(
        lens_q, lens_kv, 8, 4, 128, page_size, "NHD", page_size + 40)
    sinks = torch.randn(8, device="cuda") * 3
    wrapper = cutefi.BatchPrefillWithPagedKVCacheWrapper(torch.empty(1 << 20, dtype=torch.uint8, device="cuda"))
    wrapper.plan(qo_indptr, page_indptr, indices.cuda(), last, 8, 4, 128, page_size, causal=True,
                 q_data_type=torch.bfloat16)
    out, lse = wrapper.run(q, paged, sinks=sinks, return_lse=True)
    _check(out, lse, *_ragged_reference(q, k, v, qo_indptr, kv_indptr, True, sinks=sinks))
