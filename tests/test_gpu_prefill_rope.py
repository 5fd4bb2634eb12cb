"""Llama RoPE (FlashInfer's ``pos_encoding_mode="ROPE_LLAMA"``), each test twice: on the GPU's
own path (Hopper: q and k turned in copies by the rope kernel, then the TMA kernel; paged
caches on the mma.sync kernel) and with the mma.sync kernel forced (RoPE inside): q row r of a request at position ``r + kv_len - qo_len`` (append), key t at ``t``;
the reference rotates q and k in float32 (dims i and i + d/2 pair up, angle position /
rope_scale * rope_theta^(-2i/d)) and then attends as ``test_gpu_prefill.reference``."""

from __future__ import annotations

import pytest
import torch

import cutefi
from cutefi.prefill import ops
from test_gpu_prefill import _check, _qkv, _ragged, pytestmark, reference
from test_gpu_prefill_paged import _paged

__all__ = ["pytestmark"]


@pytest.fixture(autouse=True, params=["native", "mma_sync"])
def _kernel(request, monkeypatch):
    monkeypatch.setattr(ops, "MMA_SYNC_ONLY", request.param == "mma_sync")


def _rotated(x: torch.Tensor, positions: torch.Tensor, scale: float, theta: float) -> torch.Tensor:
    half = x.shape[-1] // 2
    freq = theta ** (-2.0 * torch.arange(half, device=x.device, dtype=torch.float64) / x.shape[-1])
    angle = (positions.double()[:, None] / scale * freq[None]).float()
    cos, sin = angle.cos()[:, None, :], angle.sin()[:, None, :]
    x1, x2 = x[..., :half].float(), x[..., half:].float()
    # (rounded to x's dtype, as the kernel stores the rotated rows before its MMAs, as FlashInfer's)
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1).to(x.dtype)


def _reference(q, k, v, causal, scale, theta):
    qo, kv = q.shape[0], k.shape[0]
    q_rot = _rotated(q, torch.arange(qo, device="cuda") + kv - qo, scale, theta)
    k_rot = _rotated(k, torch.arange(kv, device="cuda"), scale, theta)
    return reference(q_rot, k_rot, v, causal)


@pytest.mark.parametrize("head_dim", [64, 128, 256])
@pytest.mark.parametrize("qo,kv", [(1, 1), (100, 700), (300, 300)])
def test_single_rope(head_dim, qo, kv):
    q, k, v = _qkv(qo, kv, 8, 2, head_dim, torch.bfloat16, seed=head_dim + qo)
    out, lse = cutefi.single_prefill_with_kv_cache(q, k, v, causal=True, pos_encoding_mode="ROPE_LLAMA",
                                                   rope_scale=2.0, rope_theta=5e5, return_lse=True)
    _check(out, lse, *_reference(q, k, v, True, 2.0, 5e5))


@pytest.mark.parametrize("kv_layout", ["NHD", "HND"])
def test_ragged_rope_layouts_and_groups(kv_layout):
    """GQA (4 q heads a kv head), HND K/V (strided rows for the rope kernel), a window and a
    soft cap: RoPE composes with each."""
    lens_q, lens_kv = [130, 3, 257], [130, 500, 400]
    q, k, v, qo_indptr, kv_indptr = _ragged(lens_q, lens_kv, 8, 2, 64, torch.bfloat16, 17)
    k_in, v_in = (k, v) if kv_layout == "NHD" else (k.transpose(0, 1).contiguous(), v.transpose(0, 1).contiguous())
    wrapper = cutefi.BatchPrefillWithRaggedKVCacheWrapper(torch.empty(1 << 20, dtype=torch.uint8, device="cuda"),
                                                          kv_layout=kv_layout)
    wrapper.plan(qo_indptr, kv_indptr, 8, 2, 64, causal=True, pos_encoding_mode="ROPE_LLAMA", rope_scale=4.0,
                 rope_theta=5e5, q_data_type=torch.bfloat16, window_left=200, logits_soft_cap=20.0)
    out, lse = wrapper.run(q, k_in, v_in, return_lse=True)
    outs, lses = [], []
    for b in range(len(lens_q)):
        qs, ks = slice(qo_indptr[b], qo_indptr[b + 1]), slice(kv_indptr[b], kv_indptr[b + 1])
        qo, kv = lens_q[b], lens_kv[b]
        q_rot = _rotated(q[qs], torch.arange(qo, device="cuda") + kv - qo, 4.0, 5e5)
        k_rot = _rotated(k[ks], torch.arange(kv, device="cuda"), 4.0, 5e5)
        o, s = reference(q_rot, k_rot, v[ks], True, window_left=200, cap=20.0)
        outs.append(o)
        lses.append(s)
    _check(out, lse, torch.cat(outs), torch.cat(lses))


def test_ragged_and_paged_rope():
    lens_q, lens_kv = [5, 200, 1], [40, 260, 17]
    q, k, v, qo_indptr, kv_indptr = _ragged(lens_q, lens_kv, 4, 4, 128, torch.bfloat16, 91)
    wrapper = cutefi.BatchPrefillWithRaggedKVCacheWrapper(torch.empty(1 << 20, dtype=torch.uint8, device="cuda"))
    wrapper.plan(qo_indptr, kv_indptr, 4, 4, 128, causal=True, pos_encoding_mode="ROPE_LLAMA",
                 q_data_type=torch.bfloat16)
    out, lse = wrapper.run(q, k, v, return_lse=True)
    outs, lses = [], []
    for b in range(len(lens_q)):
        qs, ks = slice(qo_indptr[b], qo_indptr[b + 1]), slice(kv_indptr[b], kv_indptr[b + 1])
        o, s = _reference(q[qs], k[ks], v[ks], True, 1.0, 1e4)
        outs.append(o)
        lses.append(s)
    _check(out, lse, torch.cat(outs), torch.cat(lses))

    q, k, v, qo_indptr, kv_indptr, paged, page_indptr, indices, last = _paged(lens_q, lens_kv, 4, 4, 64, 16, "NHD", 92)
    wrapper = cutefi.BatchPrefillWithPagedKVCacheWrapper(torch.empty(1 << 20, dtype=torch.uint8, device="cuda"))
    wrapper.plan(qo_indptr, page_indptr, indices.cuda(), last, 4, 4, 64, 16, causal=False,
                 pos_encoding_mode="ROPE_LLAMA", rope_theta=1e6, q_data_type=torch.bfloat16)
    out = wrapper.run(q, paged)
    outs = []
    for b in range(len(lens_q)):
        qs, ks = slice(qo_indptr[b], qo_indptr[b + 1]), slice(kv_indptr[b], kv_indptr[b + 1])
        outs.append(_reference(q[qs], k[ks], v[ks], False, 1.0, 1e6)[0])
    _check(out, None, torch.cat(outs), None)


@pytest.mark.parametrize("use_cuda_graph", [False, True])
def test_paged_rope_hnd(use_cuda_graph):
    """HND pages of 32, GQA: Hopper gathers the plan's pages and turns their keys first (in
    CUDA-graph mode the mma.sync kernel turns them inside)."""
    lens_q, lens_kv = [150, 2, 64], [400, 40, 64]
    q, k, v, qo_indptr, kv_indptr, paged, page_indptr, indices, last = _paged(lens_q, lens_kv, 8, 2, 128, 32, "HND",
                                                                              93)
    fixed = dict(paged_kv_indices_buf=torch.empty(4096, dtype=torch.int32, device="cuda")) if use_cuda_graph else {}
    wrapper = cutefi.BatchPrefillWithPagedKVCacheWrapper(torch.empty(1 << 20, dtype=torch.uint8, device="cuda"),
                                                         kv_layout="HND", use_cuda_graph=use_cuda_graph, **fixed)
    wrapper.plan(qo_indptr, page_indptr, indices.cuda(), last, 8, 2, 128, 32, causal=True,
                 pos_encoding_mode="ROPE_LLAMA", rope_scale=2.0, rope_theta=5e5, q_data_type=torch.bfloat16)
    out, lse = wrapper.run(q, paged, return_lse=True)
    outs, lses = [], []
    for b in range(len(lens_q)):
        qs, ks = slice(qo_indptr[b], qo_indptr[b + 1]), slice(kv_indptr[b], kv_indptr[b + 1])
        o, s = _reference(q[qs], k[ks], v[ks], True, 2.0, 5e5)
        outs.append(o)
        lses.append(s)
    _check(out, lse, torch.cat(outs), torch.cat(lses))


def test_ragged_rope_cuda_graph_replay_after_replan():
    """A captured RoPE run replays after a plan with new lengths (the positions live in the
    wrapper's fixed buffer)."""
    lens_q, lens_kv = [100, 40], [300, 40]
    q, k, v, qo_indptr, kv_indptr = _ragged(lens_q, lens_kv, 4, 4, 128, torch.bfloat16, 23)
    wrapper = cutefi.BatchPrefillWithRaggedKVCacheWrapper(torch.empty(1 << 20, dtype=torch.uint8, device="cuda"),
                                                          use_cuda_graph=True)
    options = dict(causal=True, pos_encoding_mode="ROPE_LLAMA", q_data_type=torch.bfloat16)
    wrapper.plan(qo_indptr, kv_indptr, 4, 4, 128, **options)
    out = torch.full_like(q, float("nan"))
    wrapper.run(q, k, v, out=out)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        wrapper.run(q, k, v, out=out)
    lens_q2, lens_kv2 = [60, 80], [200, 140]  # (the same batch size and token totals)
    q2, k2, v2, qo2, kv2 = _ragged(lens_q2, lens_kv2, 4, 4, 128, torch.bfloat16, 24)
    q.copy_(q2)
    k.copy_(k2)
    v.copy_(v2)
    wrapper.plan(qo2, kv2, 4, 4, 128, **options)
    out.fill_(float("nan"))
    graph.replay()
    torch.cuda.synchronize()
    outs = [_reference(q2[qo2[b]:qo2[b + 1]], k2[kv2[b]:kv2[b + 1]], v2[kv2[b]:kv2[b + 1]], True, 1.0, 1e4)[0]
            for b in range(2)]
    _check(out, None, torch.cat(outs), None)
