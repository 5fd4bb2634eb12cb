"""GPU tier: prefill attention on Hopper (single_prefill_with_kv_cache and the ragged-KV
wrapper) against a float32 reference written here: causal (aligned to the end of the KV) and
not, append (qo_len < kv_len), more queries than keys (rows with nothing to see: 0 and lse
-inf), sliding window, soft cap, GQA groups, every head_dim, NHD and HND, ragged batches with
lengths 1 and ones that end inside a tile, CUDA graphs and a side stream. Fresh random inputs;
given outputs are poisoned (NaN) first, so a row never written is seen."""

from __future__ import annotations

import math

import pytest
import torch

import cutefi

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(
    not torch.cuda.is_available() or torch.cuda.get_device_capability() < (8, 0), reason="prefill: sm_80 and newer")]

LN2 = math.log(2.0)


def reference(q, k, v, causal=False, window_left=-1, sm_scale=None, cap=None, kv_layout="NHD", custom=None,
              sinks=None):
    """(out, base-2 lse) in float32: q [qo, H, d], k/v [kv, Hk, d] (NHD) or [Hk, kv, d] (HND);
    ``custom``: a [qo, kv] bool mask (True: kept); ``sinks``: [H] logits with no value that
    join every row's denominator."""
    if kv_layout == "HND":
        k, v = k.transpose(0, 1), v.transpose(0, 1)
    q, k, v = q.float(), k.float(), v.float()
    qo, heads, d = q.shape
    kv = k.shape[0]
    group = heads // k.shape[1]
    k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
    s = torch.einsum("qhd,khd->hqk", q, k) * (sm_scale if sm_scale is not None else d**-0.5)
    if cap:
        s = cap * torch.tanh(s / cap)
    rows = torch.arange(qo, device=q.device)[:, None] + (kv - qo)
    cols = torch.arange(kv, device=q.device)[None, :]
    visible = torch.ones(qo, kv, dtype=torch.bool, device=q.device) if custom is None else custom.clone()
    if causal:
        visible &= cols <= rows
    if window_left >= 0:
        visible &= cols >= rows - window_left
    s = s.masked_fill(~visible, -math.inf)
    if sinks is not None:
        lse = torch.logsumexp(torch.cat([s, sinks.float()[:, None, None].expand(-1, qo, 1)], dim=-1), dim=-1)
    else:
        lse = torch.logsumexp(s, dim=-1)  # [H, qo]
    p = torch.exp(s - lse[..., None]).nan_to_num(0.0)
    out = torch.einsum("hqk,khd->qhd", p, v)
    return out, (lse / LN2).transpose(0, 1)


def _check(out, lse, ref_out, ref_lse):
    assert not torch.isnan(out).any(), "NaN in out: a row was never written"
    err = (out.float() - ref_out).abs().max().item()
    scale = ref_out.abs().max().item()
    assert err <= 1.5e-2 * max(scale, 1.0), f"max error {err:.3e} (output scale {scale:.2f})"
    if lse is not None:
        finite = torch.isfinite(ref_lse)
        assert torch.equal(torch.isfinite(lse), finite), "lse: -inf rows differ"
        torch.testing.assert_close(lse[finite], ref_lse[finite], rtol=1e-3, atol=1e-3)


def _qkv(qo, kv, heads, kv_heads, d, dtype, layout="NHD", seed=0):
    gen = torch.Generator(device="cuda").manual_seed(seed)
    q = torch.randn(qo, heads, d, device="cuda", dtype=dtype, generator=gen)
    shape = (kv, kv_heads, d) if layout == "NHD" else (kv_heads, kv, d)
    k = torch.randn(shape, device="cuda", dtype=dtype, generator=gen)
    v = torch.randn(shape, device="cuda", dtype=dtype, generator=gen)
    return q, k, v


@pytest.mark.parametrize("head_dim", [64, 128, 256])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("qo,kv", [(1, 1), (7, 300), (128, 128), (200, 1000), (1000, 200), (513, 777)])
def test_single(head_dim, causal, qo, kv):
    q, k, v = _qkv(qo, kv, 8, 2, head_dim, torch.bfloat16, seed=qo * 7 + kv)
    out, lse = cutefi.single_prefill_with_kv_cache(q, k, v, causal=causal, return_lse=True)
    _check(out, lse, *reference(q, k, v, causal))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("layout", ["NHD", "HND"])
@pytest.mark.parametrize("heads,kv_heads", [(4, 4), (32, 8), (8, 1)])
def test_single_layouts_and_groups(dtype, layout, heads, kv_heads):
    q, k, v = _qkv(300, 450, heads, kv_heads, 128, dtype, layout, seed=heads)
    out, lse = cutefi.single_prefill_with_kv_cache(q, k, v, causal=True, kv_layout=layout, return_lse=True)
    _check(out, lse, *reference(q, k, v, True, kv_layout=layout))


@pytest.mark.parametrize("head_dim", [64, 128, 256])
@pytest.mark.parametrize("window_left,cap,sm_scale", [(100, None, None), (0, None, None), (300, 30.0, None),
                                                      (-1, 5.0, 0.3), (-1, None, 0.02)])
def test_single_window_cap_scale(head_dim, window_left, cap, sm_scale):
    q, k, v = _qkv(333, 1200, 4, 2, head_dim, torch.bfloat16, seed=head_dim + window_left)
    out, lse = cutefi.single_prefill_with_kv_cache(q, k, v, causal=True, window_left=window_left,
                                                   logits_soft_cap=cap, sm_scale=sm_scale, return_lse=True)
    _check(out, lse, *reference(q, k, v, True, window_left, sm_scale, cap))


@pytest.mark.parametrize("head_dim", [64, 128, 256])
@pytest.mark.parametrize("growth", [0.5, 4.0])
def test_scores_growing_tile_by_tile(head_dim, growth):
    """Scores that grow by about ``growth`` (base 2) a 64-key step in the order the kernels take
    KV tiles (last first): each row's maximum keeps outgrowing the softmax reference, past the
    lazy rescale's 2^8 slack (4.0) and within it (0.5)."""
    q, k, v = _qkv(200, 1500, 4, 4, head_dim, torch.bfloat16, seed=head_dim)
    # q a positive direction, k[t] along it with a ramp: score(t) ~ ramp(t) + noise
    q = ((1 + 0.1 * q.float()) / head_dim ** 0.5).to(torch.bfloat16)
    ramp = (1500 - torch.arange(1500, device="cuda")) / 64 * growth * 0.6931  # (natural-log units)
    k = (ramp[:, None, None] + 0.1 * k.float()).to(torch.bfloat16)
    out, lse = cutefi.single_prefill_with_kv_cache(q, k, v, causal=True, return_lse=True)
    _check(out, lse, *reference(q, k, v, True))


def _ragged(lens_q, lens_kv, heads, kv_heads, d, dtype, seed):
    gen = torch.Generator(device="cuda").manual_seed(seed)
    q = torch.randn(sum(lens_q), heads, d, device="cuda", dtype=dtype, generator=gen)
    k = torch.randn(sum(lens_kv), kv_heads, d, device="cuda", dtype=dtype, generator=gen)
    v = torch.randn(sum(lens_kv), kv_heads, d, device="cuda", dtype=dtype, generator=gen)
    indptr = lambda lens: torch.tensor([0, *torch.tensor(lens).cumsum(0).tolist()], dtype=torch.int32)
    return q, k, v, indptr(lens_q), indptr(lens_kv)


def _ragged_reference(q, k, v, qo_indptr, kv_indptr, causal, window_left=-1, sinks=None, cap=None):
    outs, lses = [], []
    for b in range(qo_indptr.shape[0] - 1):
        qs, qe, ks, ke = qo_indptr[b].item(), qo_indptr[b + 1].item(), kv_indptr[b].item(), kv_indptr[b + 1].item()
        o, s = reference(q[qs:qe], k[ks:ke], v[ks:ke], causal, window_left, cap=cap, sinks=sinks)
        outs.append(o)
        lses.append(s)
    return torch.cat(outs), torch.cat(lses)


@pytest.mark.parametrize("head_dim", [64, 128, 256])
@pytest.mark.parametrize("causal", [False, True])
def test_ragged(head_dim, causal):
    lens_q = [1, 17, 128, 300, 1, 129, 64]
    lens_kv = [1, 40, 128, 300, 900, 129, 1000]  # append where kv > qo
    q, k, v, qo_indptr, kv_indptr = _ragged(lens_q, lens_kv, 16, 4, head_dim, torch.bfloat16, head_dim)
    wrapper = cutefi.BatchPrefillWithRaggedKVCacheWrapper(torch.empty(1 << 20, dtype=torch.uint8, device="cuda"))
    wrapper.plan(qo_indptr, kv_indptr, 16, 4, head_dim, causal=causal, q_data_type=torch.bfloat16)
    out = torch.full_like(q, float("nan"))
    lse = torch.full(q.shape[:2], float("nan"), device="cuda")
    result = wrapper.run(q, k, v, out=out, lse=lse, return_lse=True)
    assert result[0] is out and result[1] is lse
    _check(out, lse, *_ragged_reference(q, k, v, qo_indptr, kv_indptr, causal))


def test_ragged_rows_of_other_requests_untouched():
    """A tile past a request's end holds the next request's rows: it must not overwrite them,
    and rows after the batch's last request stay as they were."""
    lens = [5, 3, 130]
    q, k, v, qo_indptr, kv_indptr = _ragged(lens, lens, 4, 4, 128, torch.float16, 9)
    q = torch.cat([q, torch.randn(10, 4, 128, device="cuda", dtype=q.dtype)])  # 10 rows outside every request
    wrapper = cutefi.BatchPrefillWithRaggedKVCacheWrapper(torch.empty(1 << 20, dtype=torch.uint8, device="cuda"))
    wrapper.plan(qo_indptr, kv_indptr, 4, 4, 128, causal=True, q_data_type="float16")
    out = torch.full_like(q, float("nan"))
    wrapper.run(q, k, v, out=out)
    _check(out[:138], None, *_ragged_reference(q, k, v, qo_indptr, kv_indptr, True))
    assert torch.isnan(out[138:]).all()


def test_cuda_graph_replay_after_replan():
    """Capture run() once, plan a new layout of the same batch size, refill the inputs in
    place and replay: the work array keeps its address and size."""
    lens_q, lens_kv = [100, 1, 300], [400, 50, 300]
    lens_q2, lens_kv2 = [200, 150, 51], [200, 500, 49]
    q, k, v, qo_indptr, kv_indptr = _ragged(lens_q, lens_kv, 8, 8, 128, torch.bfloat16, 5)
    wrapper = cutefi.BatchPrefillWithRaggedKVCacheWrapper(torch.empty(1 << 20, dtype=torch.uint8, device="cuda"),
                                                          use_cuda_graph=True)
    wrapper.plan(qo_indptr, kv_indptr, 8, 8, 128, causal=True, q_data_type=torch.bfloat16)
    out = torch.full_like(q, float("nan"))
    wrapper.run(q, k, v, out=out)  # (loads the kernel outside the capture)
    _check(out, None, *_ragged_reference(q, k, v, qo_indptr, kv_indptr, True))
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        wrapper.run(q, k, v, out=out)
    q2, k2, v2, qo2, kv2 = _ragged(lens_q2, lens_kv2, 8, 8, 128, torch.bfloat16, 6)
    wrapper.plan(qo2, kv2, 8, 8, 128, causal=True, q_data_type=torch.bfloat16)
    q[:q2.shape[0]].copy_(q2)
    k[:k2.shape[0]].copy_(k2)
    v[:v2.shape[0]].copy_(v2)
    out.fill_(float("nan"))
    graph.replay()
    torch.cuda.synchronize()
    _check(out[:q2.shape[0]], None, *_ragged_reference(q2, k2, v2, qo2, kv2, True))


def test_side_stream():
    q, k, v = _qkv(512, 2048, 8, 8, 128, torch.bfloat16, seed=11)
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        torch.cuda._sleep(1 << 20)  # the inputs are rewritten behind a sleep on this stream
        q2 = q * 2
        out = cutefi.single_prefill_with_kv_cache(q2, k, v, causal=True)
    torch.cuda.current_stream().wait_stream(stream)
    _check(out, None, *reference(q * 2, k, v, True))


def test_refusals():
    q, k, v = _qkv(8, 8, 4, 4, 96 + 32, torch.bfloat16)
    with pytest.raises(ValueError, match="custom_mask must be bool"):
        cutefi.single_prefill_with_kv_cache(q, k, v, custom_mask=torch.ones(8, 7, dtype=torch.bool, device="cuda"))
    with pytest.raises(NotImplementedError, match="pos_encoding_mode"):
        cutefi.single_prefill_with_kv_cache(q, k, v, pos_encoding_mode="ALIBI")
    with pytest.raises(ValueError, match="head_dim"):
        cutefi.single_prefill_with_kv_cache(q[..., :96], k[..., :96], v[..., :96])
    with pytest.raises(ValueError, match="multiple of num_kv_heads"):
        cutefi.single_prefill_with_kv_cache(q[:, :3], k, v)
    padded = torch.randn(8, 4, 130, device="cuda", dtype=torch.bfloat16)[..., :128]  # rows 260 bytes apart
    with pytest.raises(ValueError, match="16-byte"):
        cutefi.single_prefill_with_kv_cache(q, padded, v)


def test_unit_counter_is_back_to_zero_between_launches():
    """The CTAs take units from a counter that each launch leaves at zero: runs back to back
    (and ones with fewer units than SMs) give the same output, and the counter reads 0."""
    lens = [700, 5, 1300]
    q, k, v, qo_indptr, kv_indptr = _ragged(lens, lens, 8, 2, 64, torch.bfloat16, 21)
    wrapper = cutefi.BatchPrefillWithRaggedKVCacheWrapper(torch.empty(1 << 20, dtype=torch.uint8, device="cuda"))
    wrapper.plan(qo_indptr, kv_indptr, 8, 2, 64, causal=True, q_data_type=torch.bfloat16)
    first = wrapper.run(q, k, v)
    for _ in range(5):
        assert torch.equal(wrapper.run(q, k, v), first)
    torch.cuda.synchronize()
    assert wrapper._counter.item() == 0
    _check(first, None, *_ragged_reference(q, k, v, qo_indptr, kv_indptr, True))
    small = cutefi.single_prefill_with_kv_cache(q[:5], k[:5], v[:5])  # 8 units: fewer than the SMs
    _check(small, None, *reference(q[:5], k[:5], v[:5]))


@pytest.mark.parametrize("head_dim", [64, 128, 256])
def test_many_short_units_back_to_back(head_dim):
    """Hundreds of one- and two-tile units a CTA (the producer runs ahead of the consumers by
    whole units: the unit-index ring and the Q slots are exercised) and launches back to back
    with the ping-pong turns; two long session-15 benchmark runs hung before the index ring
    was widened and the turns balanced at exit."""
    lens_q = [128] * 300
    lens_kv = [1 + (7 * i) % 200 for i in range(300)]
    q, k, v, qo_indptr, kv_indptr = _ragged(lens_q, lens_kv, 8, 8, head_dim, torch.bfloat16, head_dim + 1)
    wrapper = cutefi.BatchPrefillWithRaggedKVCacheWrapper(torch.empty(1 << 20, dtype=torch.uint8, device="cuda"))
    wrapper.plan(qo_indptr, kv_indptr, 8, 8, head_dim, causal=True, q_data_type=torch.bfloat16)
    first = wrapper.run(q, k, v)
    for _ in range(50):
        out = wrapper.run(q, k, v)
    torch.cuda.synchronize()
    assert torch.equal(out, first) and wrapper._counter.item() == 0
    _check(first, None, *_ragged_reference(q, k, v, qo_indptr, kv_indptr, True))


@pytest.mark.parametrize("head_dim", [64, 128, 256])
def test_ragged_sinks(head_dim):
    """Attention sinks (gpt-oss): a logit a head with no value in every row's denominator;
    rows with no visible key get 0 and the sink as lse."""
    lens_q, lens_kv = [300, 5, 40], [200, 90, 40]  # (request 0: 100 rows see nothing)
    q, k, v, qo_indptr, kv_indptr = _ragged(lens_q, lens_kv, 8, 2, head_dim, torch.bfloat16, head_dim + 7)
    sinks = torch.randn(8, device="cuda") * 3
    wrapper = cutefi.BatchPrefillWithRaggedKVCacheWrapper(torch.empty(1 << 20, dtype=torch.uint8, device="cuda"))
    wrapper.plan(qo_indptr, kv_indptr, 8, 2, head_dim, causal=True, q_data_type=torch.bfloat16)
    out, lse = wrapper.run(q, k, v, sinks=sinks, return_lse=True, out=torch.full_like(q, float("nan")))
    _check(out, lse, *_ragged_reference(q, k, v, qo_indptr, kv_indptr, True, sinks=sinks))
    with pytest.raises(ValueError, match="sinks must be float32"):
        wrapper.run(q, k, v, sinks=sinks[:4])


def test_single_under_cuda_graph_capture():
    """The single form captures once its lengths have run eagerly (its work array is cached);
    lengths never seen are refused during capture with a clear error, not a capture failure."""
    q, k, v = _qkv(77, 333, 4, 2, 128, torch.bfloat16, seed=81)
    out = cutefi.single_prefill_with_kv_cache(q, k, v, causal=True)
    graph = torch.cuda.CUDAGraph()
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        with torch.cuda.graph(graph, stream=stream):
            captured = cutefi.single_prefill_with_kv_cache(q, k, v, causal=True)
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(captured, out)
    with pytest.raises(RuntimeError, match="before capturing"):
        with torch.cuda.graph(torch.cuda.CUDAGraph()):
            cutefi.single_prefill_with_kv_cache(q[:5], k, v, causal=True)


def test_single_captured_arrays_outlive_cache_eviction(monkeypatch):
    """The work array and unit counter a captured single prefill uses stay alive when newer
    lengths and streams evict them from their caches: freed, their memory could be handed to
    other tensors (poisoned here) and every replay would read those."""
    from cutefi.prefill import api, ops

    monkeypatch.setattr(api._SINGLE_WORK._arrays, "limit", 2)
    monkeypatch.setattr(ops._COUNTERS, "limit", 2)
    q, k, v = _qkv(77, 333, 4, 2, 128, torch.bfloat16, seed=82)
    expected = cutefi.single_prefill_with_kv_cache(q, k, v, causal=True)
    stream = torch.cuda.Stream()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.stream(stream):
        cutefi.single_prefill_with_kv_cache(q, k, v, causal=True)  # this stream's counter, outside the capture
        with torch.cuda.graph(graph, stream=stream):
            captured = cutefi.single_prefill_with_kv_cache(q, k, v, causal=True)
    for n in (5, 6, 7):  # other lengths on other streams: the captured entries are evicted
        with torch.cuda.stream(torch.cuda.Stream()):
            cutefi.single_prefill_with_kv_cache(q[:n], k, v, causal=True)
    torch.cuda.synchronize()
    poison = [torch.full((n,), -7, dtype=torch.int32, device="cuda")  # takes freed blocks of every small size
              for n in (1, 32, 64, 128, 256, 512, 1024) for _ in range(16)]
    captured.fill_(float("nan"))
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(captured, expected)
    del poison
