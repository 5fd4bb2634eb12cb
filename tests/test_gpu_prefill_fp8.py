"""FP8 KV caches (float8_e4m3fn / float8_e5m2) and FlashInfer's q_scale / k_scale / v_scale on
the GPU, each test twice: the mma.sync kernel widening K and V in shared memory (every GPU), and
K/V widened in a copy for Hopper's TMA kernel (``ops.FP8_WIDEN_ROWS`` 0: every plan; elsewhere
the mma.sync kernel again); the float32 reference reads the same FP8 values (``reference`` upcasts k and v), scaled as
FlashInfer defines them: sm_scale * q_scale * k_scale on the scores, v_scale on the output."""

from __future__ import annotations

import pytest
import torch

import cutefi
from cutefi.prefill import ops
from test_gpu_prefill import _check, _qkv, _ragged, _ragged_reference, pytestmark, reference
from test_gpu_prefill_paged import _paged

__all__ = ["pytestmark"]
FP8 = [torch.float8_e4m3fn, torch.float8_e5m2]


@pytest.fixture(autouse=True, params=["in_kernel", "widened"])
def _widen(request, monkeypatch):
    monkeypatch.setattr(ops, "FP8_WIDEN_ROWS", 0 if request.param == "widened" else 1 << 30)


def _fp8(t: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    return (t * 2).to(dtype)  # (spread over the format's binades)


@pytest.mark.parametrize("kv_dtype", FP8)
@pytest.mark.parametrize("head_dim", [64, 128, 256])
@pytest.mark.parametrize("causal", [False, True])
def test_single_fp8_kv(kv_dtype, head_dim, causal):
    q, k, v = _qkv(150, 333, 8, 2, head_dim, torch.bfloat16, seed=head_dim)
    k, v = _fp8(k, kv_dtype), _fp8(v, kv_dtype)
    out, lse = cutefi.single_prefill_with_kv_cache(q, k, v, causal=causal, return_lse=True)
    _check(out, lse, *reference(q, k, v, causal))


@pytest.mark.parametrize("software", [False, True])
def test_ragged_fp8_kv_with_scales(software, monkeypatch):
    """``software``: sm_80/86's integer e4m3 widening (a test build) on this GPU."""
    monkeypatch.setattr(ops, "SOFTWARE_FP8", software)
    lens_q, lens_kv = [1, 200, 64, 9], [1, 260, 64, 500]
    q, k, v, qo_indptr, kv_indptr = _ragged(lens_q, lens_kv, 8, 4, 128, torch.bfloat16, 3)
    k8, v8 = _fp8(k, torch.float8_e4m3fn), _fp8(v, torch.float8_e4m3fn)
    wrapper = cutefi.BatchPrefillWithRaggedKVCacheWrapper(torch.empty(1 << 20, dtype=torch.uint8, device="cuda"))
    wrapper.plan(qo_indptr, kv_indptr, 8, 4, 128, causal=True, q_data_type=torch.bfloat16,
                 kv_data_type=torch.float8_e4m3fn, logits_soft_cap=30.0)
    out, lse = wrapper.run(q, k8, v8, k_scale=0.5, v_scale=3.0, q_scale=1.5, return_lse=True)
    outs, lses = [], []
    for b in range(len(lens_q)):
        qs, ks = slice(qo_indptr[b], qo_indptr[b + 1]), slice(kv_indptr[b], kv_indptr[b + 1])
        o, s = reference(q[qs], k8[ks], v8[ks], True, sm_scale=128 ** -0.5 * 0.75, cap=30.0)
        outs.append(o * 3.0)
        lses.append(s)
    _check(out, lse, torch.cat(outs), torch.cat(lses))


@pytest.mark.parametrize("kv_dtype", FP8)
@pytest.mark.parametrize("page_size", [16, 5])
def test_paged_fp8_kv(kv_dtype, page_size):
    lens_q, lens_kv = [7, 130, 1], [40, 300, 17]
    q, k, v, qo_indptr, kv_indptr, paged, page_indptr, indices, last = _paged(lens_q, lens_kv, 4, 2, 128, page_size,
                                                                              "NHD", page_size, fused=True)
    paged8 = _fp8(paged, kv_dtype)
    k8 = _fp8(k, kv_dtype)
    v8 = _fp8(v, kv_dtype)
    wrapper = cutefi.BatchPrefillWithPagedKVCacheWrapper(torch.empty(1 << 20, dtype=torch.uint8, device="cuda"))
    wrapper.plan(qo_indptr, page_indptr, indices.cuda(), last, 4, 2, 128, page_size, causal=True,
                 q_data_type=torch.bfloat16, kv_data_type=kv_dtype)
    out = wrapper.run(q, paged8, v_scale=0.5)
    ref, _ = _ragged_reference(q, k8, v8, qo_indptr, kv_indptr, True)
    _check(out, None, ref * 0.5, None)


@pytest.mark.parametrize("page_size", [0, 32])
def test_hnd_fp8_kv(page_size):
    """HND K/V ([kv_heads, tokens, d] ragged, [pages, kv_heads, page_size, d] paged): the
    widening kernel's strided rows, and the mma.sync kernel's."""
    lens_q, lens_kv = [300, 5], [320, 70]
    if page_size:
        q, k, v, qo_indptr, kv_indptr, paged, page_indptr, indices, last = _paged(
            lens_q, lens_kv, 8, 2, 128, page_size, "HND", 61, fused=True)
        wrapper = cutefi.BatchPrefillWithPagedKVCacheWrapper(torch.empty(1 << 20, dtype=torch.uint8, device="cuda"),
                                                             kv_layout="HND")
        wrapper.plan(qo_indptr, page_indptr, indices.cuda(), last, 8, 2, 128, page_size, causal=True,
                     q_data_type=torch.bfloat16, kv_data_type=torch.float8_e5m2)
        out = wrapper.run(q, _fp8(paged, torch.float8_e5m2), v_scale=2.0)
    else:
        q, k, v, qo_indptr, kv_indptr = _ragged(lens_q, lens_kv, 8, 2, 128, torch.bfloat16, 62)
        wrapper = cutefi.BatchPrefillWithRaggedKVCacheWrapper(torch.empty(1 << 20, dtype=torch.uint8, device="cuda"),
                                                              kv_layout="HND")
        wrapper.plan(qo_indptr, kv_indptr, 8, 2, 128, causal=True, q_data_type=torch.bfloat16,
                     kv_data_type=torch.float8_e5m2)
        hnd = lambda t: _fp8(t, torch.float8_e5m2).transpose(0, 1).contiguous()
        out = wrapper.run(q, hnd(k), hnd(v), v_scale=2.0)
    k8, v8 = _fp8(k, torch.float8_e5m2), _fp8(v, torch.float8_e5m2)
    ref, _ = _ragged_reference(q, k8, v8, qo_indptr, kv_indptr, True)
    _check(out, None, ref * 2.0, None)


def test_paged_fp8_cuda_graph_replay_after_replan():
    """A captured FP8 run replays after a plan with new lengths and page order (graph-mode
    plans keep FP8 pages FP8, on the mma.sync kernel: a widened copy of one plan's pages would
    not serve the next)."""
    lens_q, lens_kv = [100, 1, 300], [400, 50, 300]
    q, k, v, qo_indptr, kv_indptr, paged, page_indptr, indices, last = _paged(lens_q, lens_kv, 8, 8, 128, 32,
                                                                               "NHD", 5, fused=True)
    paged8 = _fp8(paged, torch.float8_e4m3fn)
    indices_buf = torch.empty(4096, dtype=torch.int32, device="cuda")
    wrapper = cutefi.BatchPrefillWithPagedKVCacheWrapper(torch.empty(1 << 20, dtype=torch.uint8, device="cuda"),
                                                         use_cuda_graph=True, paged_kv_indices_buf=indices_buf)
    plan = dict(causal=True, q_data_type=torch.bfloat16, kv_data_type=torch.float8_e4m3fn)
    wrapper.plan(qo_indptr, page_indptr, indices, last, 8, 8, 128, 32, **plan)
    out = torch.full_like(q, float("nan"))
    wrapper.run(q, paged8, out=out, k_scale=0.5)
    fp8 = lambda t: _fp8(t, torch.float8_e4m3fn)
    _check(out, None, *_ragged_reference(q * 0.5, fp8(k), fp8(v), qo_indptr, kv_indptr, True))
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        wrapper.run(q, paged8, out=out, k_scale=0.5)
    lens_kv2 = [300, 60, 390]
    q2, k2, v2, qo2, kv2, paged2, page_indptr2, indices2, last2 = _paged(lens_q, lens_kv2, 8, 8, 128, 32, "NHD", 6,
                                                                         fused=True)
    paged8[:paged2.shape[0]].copy_(_fp8(paged2, torch.float8_e4m3fn))
    q.copy_(q2)
    wrapper.plan(qo2, page_indptr2, indices2, last2, 8, 8, 128, 32, **plan)
    out.fill_(float("nan"))
    graph.replay()
    torch.cuda.synchronize()
    _check(out, None, *_ragged_reference(q2 * 0.5, fp8(k2), fp8(v2), qo2, kv2, True))


@pytest.mark.parametrize("kv_dtype", FP8)
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_widen_kernel_is_exact(kv_dtype, dtype):
    """The widening kernel against torch's cast, bit for bit: ragged K/V as strided views of a
    fused buffer, and pages gathered through a page table with ids outside the cache."""
    if not ops.uses_tma_kernel(torch.cuda.current_device(), 0):
        pytest.skip("the widening kernel serves Hopper's TMA kernel")
    gen = torch.Generator(device="cuda").manual_seed(7)
    fused = (torch.randn(300, 3, 4, 128, device="cuda", generator=gen) * 8).to(kv_dtype)  # [tokens, qkv, heads, d]
    k, v = fused[:, 1], fused[:, 2]
    k_out, v_out, _ = ops._widened(dtype, k.transpose(0, 1), v.transpose(0, 1), None, 0, 0, False)
    assert torch.equal(k_out.transpose(0, 1), k.to(dtype)) and torch.equal(v_out.transpose(0, 1), v.to(dtype))
    cache = (torch.randn(10, 2, 16, 4, 64, device="cuda", generator=gen) * 8).to(kv_dtype)  # NHD pages
    ids = torch.tensor([3, 7, 0, 12, -1, 9], dtype=torch.int32, device="cuda")
    k_pages, v_pages = cache[:, 0].transpose(1, 2), cache[:, 1].transpose(1, 2)  # [pages, heads, rows, d]
    k_out, v_out, order = ops._widened(dtype, k_pages, v_pages, ids, 16, 5, False)
    kept = ids[:5].long().clamp(0, 9)
    gather = lambda pages: pages.contiguous().view(torch.uint8)[kept].view(kv_dtype).to(dtype)  # (no float8 index)
    assert torch.equal(k_out, gather(k_pages)) and torch.equal(v_out, gather(v_pages))
    assert order.tolist() == [0, 1, 2, 3, 4]


def test_scales_on_sixteen_bit_kv():
    """q_scale, k_scale and v_scale apply to bf16 caches too (v_scale in either kernel's epilogue)."""
    q, k, v, qo_indptr, kv_indptr = _ragged([100, 3], [120, 40], 4, 4, 64, torch.bfloat16, 5)
    wrapper = cutefi.BatchPrefillWithRaggedKVCacheWrapper(torch.empty(1 << 20, dtype=torch.uint8, device="cuda"))
    wrapper.plan(qo_indptr, kv_indptr, 4, 4, 64, causal=False, q_data_type=torch.bfloat16)
    out = wrapper.run(q, k, v, q_scale=2.0, k_scale=0.25, v_scale=4.0)
    ref, _ = _ragged_reference(q * 0.5, k, v, qo_indptr, kv_indptr, False)
    _check(out, None, ref * 4.0, None)


def test_fp8_refusals():
    q, k, v = _qkv(8, 8, 4, 4, 128, torch.bfloat16)
    with pytest.raises(TypeError, match="both be float8"):
        cutefi.single_prefill_with_kv_cache(q, k.to(torch.float8_e4m3fn), v)
    wrapper = cutefi.BatchPrefillWithRaggedKVCacheWrapper(torch.empty(1 << 20, dtype=torch.uint8, device="cuda"))
    indptr = torch.tensor([0, 8], dtype=torch.int32)
    with pytest.raises(TypeError, match="kv_data_type"):
        wrapper.plan(indptr, indptr, 4, 4, 128, q_data_type=torch.bfloat16, kv_data_type=torch.float32)
    wrapper.plan(indptr, indptr, 4, 4, 128, q_data_type=torch.bfloat16, kv_data_type=torch.float8_e4m3fn)
    with pytest.raises(ValueError, match="differ from the plan"):
        wrapper.run(q, k, v)
    with pytest.raises(ValueError, match="v_scale must be finite"):
        wrapper.run(q, k.to(torch.float8_e4m3fn), v.to(torch.float8_e4m3fn), v_scale=0.0)
