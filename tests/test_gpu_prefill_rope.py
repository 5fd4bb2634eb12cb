"""In-kernel Llama RoPE (FlashInfer's ``pos_encoding_mode="ROPE_LLAMA"``, on the mma.sync
kernel): q row r of a request at position ``r + kv_len - qo_len`` (append), key t at ``t``;
the reference rotates q and k in float32 (dims i and i + d/2 pair up, angle position /
rope_scale * rope_theta^(-2i/d)) and then attends as ``test_gpu_prefill.reference``."""

from __future__ import annotations

import pytest
import torch

import cutefi
from test_gpu_prefill import _check, _qkv, _ragged, pytestmark, reference
from test_gpu_prefill_paged import _paged

__all__ = ["pytestmark"]


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
