"""GPU tier, two GPUs in one process: the prefill family on cuda:0 and cuda:1 whichever device
is current, on a side stream that holds its inputs behind a sleep, inside a CUDA graph, on the
Hopper kernel and the mma.sync one (forced, and through a custom mask), against the float32
reference of ``test_gpu_prefill``; tensors of two devices in one call are refused."""

from __future__ import annotations

import pytest
import torch

import cutefi
from cutefi.prefill import ops
from test_gpu_prefill import _check, _ragged_reference, reference
from test_multi_gpu import current, delayed, pytestmark

__all__ = ["pytestmark"]


def _ragged_on(d: int, seed: int):
    """Two requests (one appending) on cuda:d, drawn there."""
    gen = torch.Generator(device=f"cuda:{d}").manual_seed(seed)
    lens_q, lens_kv = [130, 7], [300, 7]
    q = torch.randn(sum(lens_q), 8, 128, device=f"cuda:{d}", dtype=torch.bfloat16, generator=gen)
    k = torch.randn(sum(lens_kv), 2, 128, device=f"cuda:{d}", dtype=torch.bfloat16, generator=gen)
    v = torch.randn(sum(lens_kv), 2, 128, device=f"cuda:{d}", dtype=torch.bfloat16, generator=gen)
    indptr = lambda lens: torch.tensor([0, *torch.tensor(lens).cumsum(0).tolist()], dtype=torch.int32)
    return q, k, v, indptr(lens_q), indptr(lens_kv)


@pytest.fixture(autouse=True)
def _cuda0_current():
    torch.cuda.set_device(0)
    yield
    assert torch.cuda.current_device() == 0, "a test left another device current"


@pytest.mark.parametrize("mma_sync", [False, True])
@pytest.mark.parametrize("d", [0, 1])
def test_prefill_while_the_other_device_is_current(d, mma_sync, monkeypatch):
    monkeypatch.setattr(ops, "MMA_SYNC_ONLY", mma_sync)
    q, k, v, qo_indptr, kv_indptr = _ragged_on(d, 10 + d)
    workspace = torch.empty(1 << 20, dtype=torch.uint8, device=f"cuda:{d}")
    with current(1 - d):
        wrapper = cutefi.BatchPrefillWithRaggedKVCacheWrapper(workspace)
        wrapper.plan(qo_indptr, kv_indptr, 8, 2, 128, causal=True, q_data_type=torch.bfloat16)
        out, lse = wrapper.run(q, k, v, out=torch.full_like(q, float("nan")), return_lse=True)
        single = cutefi.single_prefill_with_kv_cache(q[:130], k[:300], v[:300], causal=True)
        masked = cutefi.single_prefill_with_kv_cache(q[:130], k[:300], v[:300],
                                                     custom_mask=torch.ones(130, 300, dtype=torch.bool).tril(170))
    torch.cuda.synchronize(d)
    _check(out, lse, *_ragged_reference(q, k, v, qo_indptr, kv_indptr, True))
    _check(single, None, reference(q[:130], k[:300], v[:300], True)[0], None)
    _check(masked, None, reference(q[:130], k[:300], v[:300], True)[0], None)


@pytest.mark.parametrize("d", [0, 1])
def test_prefill_side_stream_while_the_other_device_is_current(d):
    """Inputs reach the side stream only after a long sleep on it: a launch on any other stream
    reads NaN."""
    q, k, v, qo_indptr, kv_indptr = _ragged_on(d, 20 + d)
    wrapper = cutefi.BatchPrefillWithRaggedKVCacheWrapper(torch.empty(1 << 20, dtype=torch.uint8, device=f"cuda:{d}"))
    wrapper.plan(qo_indptr, kv_indptr, 8, 2, 128, causal=True, q_data_type=torch.bfloat16)
    side = torch.cuda.Stream(device=d)
    with current(1 - d), torch.cuda.stream(side):
        live = delayed({"q": q, "k": k, "v": v}, d)
        with current(1 - d):
            out = wrapper.run(live["q"], live["k"], live["v"])
    side.synchronize()
    _check(out, None, _ragged_reference(q, k, v, qo_indptr, kv_indptr, True)[0], None)


def test_prefill_cuda_graph_on_cuda1_while_cuda0_is_current():
    q, k, v, qo_indptr, kv_indptr = _ragged_on(1, 31)
    wrapper = cutefi.BatchPrefillWithRaggedKVCacheWrapper(torch.empty(1 << 20, dtype=torch.uint8, device="cuda:1"),
                                                          use_cuda_graph=True)
    wrapper.plan(qo_indptr, kv_indptr, 8, 2, 128, causal=True, q_data_type=torch.bfloat16)
    out = torch.empty_like(q)
    wrapper.run(q, k, v, out=out)
    graph = torch.cuda.CUDAGraph()
    stream = torch.cuda.Stream(device=1)
    with torch.cuda.stream(stream), torch.cuda.graph(graph, stream=stream):
        wrapper.run(q, k, v, out=out)
    torch.cuda.set_device(0)
    out.fill_(float("nan"))
    graph.replay()
    torch.cuda.synchronize(1)
    _check(out, None, _ragged_reference(q, k, v, qo_indptr, kv_indptr, True)[0], None)


@pytest.mark.parametrize("d", [0, 1])
def test_hopper_prepasses_on_a_side_stream_while_the_other_device_is_current(d, monkeypatch):
    """The passes that run before Hopper's kernel (FP8 K/V widened, RoPE turned; on other GPUs
    the mma.sync kernel takes these calls) and MLA's build, on cuda:d's side stream with the
    other device current: FP8 codes and q reach the stream only after a long sleep on it."""
    monkeypatch.setattr(ops, "FP8_WIDEN_ROWS", 0)
    q, k, v, qo_indptr, kv_indptr = _ragged_on(d, 50 + d)
    k8, v8 = k.to(torch.float8_e4m3fn), v.to(torch.float8_e4m3fn)
    workspace = torch.empty(1 << 20, dtype=torch.uint8, device=f"cuda:{d}")
    fp8 = cutefi.BatchPrefillWithRaggedKVCacheWrapper(workspace)
    fp8.plan(qo_indptr, kv_indptr, 8, 2, 128, causal=True, q_data_type=torch.bfloat16,
             kv_data_type=torch.float8_e4m3fn)
    rope = cutefi.BatchPrefillWithRaggedKVCacheWrapper(workspace)
    rope.plan(qo_indptr, kv_indptr, 8, 2, 128, causal=True, q_data_type=torch.bfloat16, pos_encoding_mode="ROPE_LLAMA")
    side = torch.cuda.Stream(device=d)
    with current(1 - d), torch.cuda.stream(side):
        live = delayed({"q": q, "k8": k8.view(torch.uint8), "v8": v8.view(torch.uint8)}, d)
        with current(1 - d):
            out_fp8 = fp8.run(live["q"], live["k8"].view(torch.float8_e4m3fn), live["v8"].view(torch.float8_e4m3fn))
            out_rope = rope.run(live["q"], k, v)
            out_mla = cutefi.single_prefill_with_kv_cache(
                torch.cat([live["q"], live["q"][..., :64]], -1)[:130], torch.cat([k, k[..., :64]], -1)[:300],
                v[:300], causal=True)
    side.synchronize()
    _check(out_fp8, None, _ragged_reference(q, k8, v8, qo_indptr, kv_indptr, True)[0], None)
    rope_ref = cutefi.BatchPrefillWithRaggedKVCacheWrapper(workspace)  # (the same RoPE, checked elsewhere)
    rope_ref.plan(qo_indptr, kv_indptr, 8, 2, 128, causal=True, q_data_type=torch.bfloat16,
                  pos_encoding_mode="ROPE_LLAMA")
    with current(d):
        expected = rope_ref.run(q, k, v)
    torch.testing.assert_close(out_rope, expected, rtol=0, atol=0)
    mla = reference(torch.cat([q, q[..., :64]], -1)[:130], torch.cat([k, k[..., :64]], -1)[:300], v[:300], True)[0]
    _check(out_mla, None, mla, None)


def test_prefill_tensors_of_two_devices_are_refused():
    q, k, v, _, _ = _ragged_on(0, 41)
    with pytest.raises(ValueError, match="device"):
        cutefi.single_prefill_with_kv_cache(q, k.to("cuda:1"), v.to("cuda:1"))
    q1, k1, v1, qo_indptr, kv_indptr = _ragged_on(1, 42)
    wrapper = cutefi.BatchPrefillWithRaggedKVCacheWrapper(torch.empty(1 << 20, dtype=torch.uint8, device="cuda:0"))
    wrapper.plan(qo_indptr, kv_indptr, 8, 2, 128, q_data_type=torch.bfloat16)
    with pytest.raises(ValueError, match="device"):
        wrapper.run(q1, k1, v1)
