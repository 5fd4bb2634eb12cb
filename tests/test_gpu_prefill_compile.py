"""torch.compile(fullgraph=True) over the prefill ops (planned outside the compiled function):
one graph with the cutefi op, the same outputs bit for bit as eager, on fresh q twice without
a recompile; the single form's custom-mask packing is traced too."""

from __future__ import annotations

import torch

import cutefi
from test_gpu_prefill import _check, _qkv, _ragged, _ragged_reference, pytestmark, reference
from test_gpu_prefill_paged import _paged

__all__ = ["pytestmark"]


def _compiled(fn):
    from torch._dynamo.testing import CompileCounterWithBackend

    torch._dynamo.reset()
    counter = CompileCounterWithBackend("inductor")
    return torch.compile(fn, fullgraph=True, backend=counter), counter


def test_compiled_ragged_and_paged_match_eager():
    lens_q, lens_kv = [300, 7], [500, 90]
    q, k, v, qo_indptr, kv_indptr = _ragged(lens_q, lens_kv, 8, 2, 128, torch.bfloat16, 61)
    ragged = cutefi.BatchPrefillWithRaggedKVCacheWrapper(torch.empty(1 << 20, dtype=torch.uint8, device="cuda"))
    ragged.plan(qo_indptr, kv_indptr, 8, 2, 128, causal=True, q_data_type=torch.bfloat16)
    _, _, _, _, _, paged_kv, page_indptr, indices, last = _paged(lens_q, lens_kv, 8, 2, 128, 16, "NHD", 62, fused=True)
    paged = cutefi.BatchPrefillWithPagedKVCacheWrapper(torch.empty(1 << 20, dtype=torch.uint8, device="cuda"))
    paged.plan(qo_indptr, page_indptr, indices.cuda(), last, 8, 2, 128, 16, causal=True, q_data_type=torch.bfloat16)
    sinks = torch.randn(8, device="cuda")

    def attend(q):
        out, lse = ragged.run(q, k, v, return_lse=True)
        paged_out = paged.run(q * 2, paged_kv, sinks=sinks)
        return out + 1, lse, paged_out

    compiled, counter = _compiled(attend)
    for seed in (1, 2):
        gen = torch.Generator("cuda").manual_seed(seed)
        q = torch.randn(q.shape, device="cuda", dtype=torch.bfloat16, generator=gen)
        got, want = compiled(q), attend(q)
        for a, b in zip(got, want):
            assert torch.equal(a, b)
    assert counter.frame_count == 1
    _check(got[0] - 1, got[1], *_ragged_reference(q, k, v, qo_indptr, kv_indptr, True))


def test_compiled_single_with_custom_mask_matches_eager():
    q, k, v = _qkv(100, 140, 4, 4, 64, torch.bfloat16, seed=71)
    mask = torch.rand(100, 140, device="cuda") < 0.5

    def attend(q, mask):
        return cutefi.single_prefill_with_kv_cache(q, k, v, custom_mask=mask, return_lse=True)

    compiled, counter = _compiled(attend)
    got, want = compiled(q, mask), attend(q, mask)
    assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1]) and counter.frame_count == 1
    _check(got[0], got[1], *reference(q, k, v, custom=mask))
