"""GPU tier: decode and prefill attention on randomly drawn calls (seeded, so a failure is
reproducible by its id), each against the float32 reference of its own test module: ragged
lengths (0 and 1 included) that end anywhere in a page or tile, every head_dim, GQA groups 1-16
(odd ones too), page sizes 1-64 (odd ones too), both layouts and cache forms, 16-bit and FP8
caches, soft cap, sliding window, sm_scale, attention sinks, ROPE_LLAMA and forced split sizes,
in the combinations the seeds draw. The fixed-matrix tests cover each option alone; these look
for the interactions between them. Every case prints its draw (``-s``)."""

from __future__ import annotations

import random

import pytest
import torch

import cutefi

from test_gpu_decode import FP8, FP8_SCALES, run_decode
from test_gpu_prefill import _check, _ragged, _ragged_reference
from test_gpu_prefill_paged import _paged

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(
    not torch.cuda.is_available() or torch.cuda.get_device_capability() < (8, 0), reason="attention: sm_80 and newer")]

DECODE_SEEDS = range(48)
PREFILL_SEEDS = range(40)


def decode_draw(seed: int) -> dict:
    rng = random.Random(seed)
    kv_heads = rng.choice([1, 2, 4, 8])
    batch = rng.choice([1, 2, 3, 7, 16, 33, 64, 130])
    head_dim = rng.choice([64, 128, 256])
    # (the cache is drawn on the host: at most ~32M elements of K, so a case takes seconds)
    longest = min(rng.choice([1, 17, 300, 2000, 9000]), max(1, (32 << 20) // (batch * kv_heads * head_dim)))
    lengths = [rng.randint(0, longest) for _ in range(batch)]
    lengths[rng.randrange(batch)] = longest  # (at least one request of the drawn length)
    kv_dtype = rng.choice([None, None, None, *FP8])
    draw = dict(lengths=lengths, qo_heads=kv_heads * rng.choice([1, 2, 3, 4, 5, 6, 8, 16]), kv_heads=kv_heads,
                head_dim=head_dim, page_size=rng.choice([1, 3, 8, 16, 16, 32, 64]),
                dtype=rng.choice([torch.bfloat16, torch.float16]), layout=rng.choice(["NHD", "HND"]),
                fused=rng.random() < 0.3, seed=seed, cap=rng.choice([None, None, 30.0, 5.0]),
                window_left=rng.choice([-1, -1, 0, rng.randint(1, 600)]), sm_scale=rng.choice([None, None, 0.07]),
                sinks=rng.random() < 0.25, kv_dtype=kv_dtype, fixed_split=rng.choice([None, None, None, 16, 64, 1000]),
                rope=(1.0, 1e4) if rng.random() < 0.15 else None, poison_tail=rng.random() < 0.3)
    if kv_dtype is not None:
        draw.update(FP8_SCALES)
    return draw


@pytest.mark.parametrize("seed", DECODE_SEEDS)
def test_decode_random_calls(seed):
    draw = decode_draw(seed)
    print({k: v for k, v in draw.items() if k != "lengths"}, "lengths", draw["lengths"][:8], len(draw["lengths"]))
    run_decode(**draw)


def prefill_draw(seed: int) -> dict:
    rng = random.Random(1000 + seed)
    batch = rng.choice([1, 2, 5, 16])
    longest = rng.choice([1, 50, 700, 3000])
    lens_kv = [rng.randint(1, longest) for _ in range(batch)]
    lens_kv[rng.randrange(batch)] = longest
    causal = rng.random() < 0.6
    # append rows (qo < kv), whole prompts (qo = kv), and, without the causal mask, more queries than keys
    lens_q = [rng.choice([n, rng.randint(1, n), rng.randint(1, 2 * n) if not causal else n]) for n in lens_kv]
    kv_heads = rng.choice([1, 2, 4])
    paged = rng.random() < 0.5
    return dict(lens_q=lens_q, lens_kv=lens_kv, kv_heads=kv_heads, heads=kv_heads * rng.choice([1, 2, 4, 8]),
                head_dim=rng.choice([64, 128, 256]), causal=causal,
                window_left=rng.choice([-1, -1, 0, rng.randint(1, 400)]), cap=rng.choice([None, None, 20.0]),
                sinks=rng.random() < 0.2, paged=paged, page_size=rng.choice([1, 5, 16, 16, 32, 64]),
                layout=rng.choice(["NHD", "HND"]) if paged else "NHD", fused=paged and rng.random() < 0.3,
                dtype=torch.bfloat16 if paged else rng.choice([torch.bfloat16, torch.float16]))


@pytest.mark.parametrize("seed", PREFILL_SEEDS)
def test_prefill_random_calls(seed):
    d = prefill_draw(seed)
    print({k: v for k, v in d.items() if k not in ("lens_q", "lens_kv")}, "lens", d["lens_q"][:6], d["lens_kv"][:6])
    heads, kv_heads, head_dim = d["heads"], d["kv_heads"], d["head_dim"]
    workspace = torch.empty(1 << 20, dtype=torch.uint8, device="cuda")
    options = dict(causal=d["causal"], window_left=d["window_left"], logits_soft_cap=d["cap"], q_data_type=d["dtype"])
    if d["paged"]:
        q, k, v, qo_indptr, kv_indptr, cache, page_indptr, indices, last = _paged(
            d["lens_q"], d["lens_kv"], heads, kv_heads, head_dim, d["page_size"], d["layout"], seed, d["fused"])
        wrapper = cutefi.BatchPrefillWithPagedKVCacheWrapper(workspace, d["layout"])
        wrapper.plan(qo_indptr, page_indptr, indices.cuda(), last, heads, kv_heads, head_dim, d["page_size"], **options)
        inputs = (q, cache)
    else:
        q, k, v, qo_indptr, kv_indptr = _ragged(d["lens_q"], d["lens_kv"], heads, kv_heads, head_dim, d["dtype"], seed)
        wrapper = cutefi.BatchPrefillWithRaggedKVCacheWrapper(workspace)
        wrapper.plan(qo_indptr, kv_indptr, heads, kv_heads, head_dim, **options)
        inputs = (q, k, v)
    sinks = torch.randn(heads, device="cuda") * 3 if d["sinks"] else None
    out = torch.full_like(q, float("nan"))
    out, lse = wrapper.run(*inputs, out=out, sinks=sinks, return_lse=True)
    _check(out, lse, *_ragged_reference(q, k, v, qo_indptr, kv_indptr, d["causal"], d["window_left"], sinks,
                                        d["cap"]))
