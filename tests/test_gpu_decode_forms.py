"""GPU tier: decode attention's other call forms against the float32 reference of
``test_gpu_decode``: CUDA-graph capture and replay with new lengths (FP8 caches and ROPE_LLAMA
included), ``torch.compile``, ``single_decode_with_kv_cache`` (plain, FP8, RoPE, in a graph) and
``fast_decode_plan``. Outputs are poisoned (NaN) before each call."""

from __future__ import annotations

import math

import pytest
import torch

import cutefi

from test_gpu_decode import FP8_SCALES, make_batch, page_table, rope_llama, reference, rope_args, check, _packs

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("pack", [False, True])
def test_decode_cuda_graph_replay_with_new_lengths(monkeypatch, pack):
    from cutefi.attention import decode

    monkeypatch.setattr(decode, "PACK_FILL", 0.0 if pack else float("inf"))  # kv heads packed or not
    qo_heads, kv_heads, head_dim, page_size, batch = 32, 8, 128, 16, 4
    kv, k_cache, v_cache, indptr, indices, last = make_batch([4000] * batch, page_size, kv_heads, head_dim,
                                                             torch.bfloat16)
    bufs = (torch.empty(batch + 1, dtype=torch.int32, device="cuda"),
            torch.empty(indices.numel(), dtype=torch.int32, device="cuda"),
            torch.empty(batch, dtype=torch.int32, device="cuda"))
    wrapper = cutefi.CUDAGraphBatchDecodeWithPagedKVCacheWrapper(
        torch.empty(64 << 20, dtype=torch.uint8, device="cuda"), *bufs)
    q = torch.randn(batch, qo_heads, head_dim, device="cuda").to(torch.bfloat16)
    out = torch.empty_like(q)
    # the first plan is the smallest (one page a request): later plans hold more pages
    wrapper.plan(torch.arange(batch + 1, dtype=torch.int32), indices[:batch], torch.full((batch,), 16, dtype=torch.int32),
                 qo_heads, kv_heads, head_dim, page_size, q_data_type=torch.bfloat16)
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        wrapper.run(q, kv, out=out)  # warm up (loads the kernels) outside the capture
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, stream=stream):
            wrapper.run(q, kv, out=out)
    torch.cuda.current_stream().wait_stream(stream)
    for lengths in ([4000, 1, 999, 64], [17, 3000, 4000, 2]):
        pages = [-(-n // page_size) for n in lengths]
        new_indptr = torch.tensor([0, *torch.tensor(pages).cumsum(0).tolist()], dtype=torch.int32)
        new_last = torch.tensor([(n - 1) % page_size + 1 for n in lengths], dtype=torch.int32)
        new_indices = indices[:sum(pages)]
        wrapper.plan(new_indptr, new_indices, new_last, qo_heads, kv_heads, head_dim, page_size,
                     q_data_type=torch.bfloat16)
        out.fill_(float("nan"))
        graph.replay()
        ref_out, _ = reference(q, k_cache, v_cache, new_indptr, new_indices, lengths, "NHD")
        check(out, None, ref_out, None, torch.bfloat16)
        assert wrapper._plan["pack_shift"] == (1 if pack and _packs() else 0)



GRAPH_CASES = [  # kv cache dtype (None: q's), q dtype, rope (rope_scale, rope_theta), layout, wrapper form
    pytest.param(torch.float8_e4m3fn, torch.bfloat16, None, "NHD", "CUDAGraph", id="e4m3-NHD"),
    pytest.param(torch.float8_e5m2, torch.float16, None, "HND", "use_cuda_graph", id="e5m2-fp16-HND"),
    pytest.param(None, torch.bfloat16, (1.0, 1e4), "NHD", "use_cuda_graph", id="rope-NHD"),
    pytest.param(torch.float8_e4m3fn, torch.float16, (2.0, 5e5), "HND", "CUDAGraph", id="e4m3-rope-fp16-HND"),
    pytest.param(torch.float8_e5m2, torch.bfloat16, (1.0, 1e4), "NHD", "CUDAGraph", id="e5m2-rope-NHD"),
]



@pytest.mark.parametrize("kv_dtype, dtype, rope, layout, form", GRAPH_CASES)
def test_decode_cuda_graph_fp8_rope_replay(kv_dtype, dtype, rope, layout, form):
    """FP8 caches (k_scale / v_scale baked into the capture) and ROPE_LLAMA in a captured run:
    planned outside the capture, re-planned with new lengths before each replay (RoPE turns q at
    the new length - 1), fresh q each replay, out and lse poisoned, against the float32 reference."""
    qo_heads, kv_heads, head_dim, page_size, batch = 32, 8, 128, 16, 4
    cache_dtype = kv_dtype or dtype
    scales = FP8_SCALES if kv_dtype else {}
    kv, k_cache, v_cache, _, indices, _ = make_batch([4000] * batch, page_size, kv_heads, head_dim, cache_dtype,
                                                     layout, seed=31)
    workspace = torch.empty(64 << 20, dtype=torch.uint8, device="cuda")
    bufs = (torch.empty(batch + 1, dtype=torch.int32, device="cuda"),
            torch.empty(indices.numel(), dtype=torch.int32, device="cuda"),
            torch.empty(batch, dtype=torch.int32, device="cuda"))
    if form == "CUDAGraph":
        wrapper = cutefi.CUDAGraphBatchDecodeWithPagedKVCacheWrapper(workspace, *bufs, kv_layout=layout)
    else:
        wrapper = cutefi.BatchDecodeWithPagedKVCacheWrapper(workspace, layout, use_cuda_graph=True,
                                                            paged_kv_indptr_buffer=bufs[0],
                                                            paged_kv_indices_buffer=bufs[1],
                                                            paged_kv_last_page_len_buffer=bufs[2])
    assert wrapper.is_cuda_graph_enabled
    planned = dict(q_data_type=dtype, kv_data_type=cache_dtype, **rope_args(rope))
    g = torch.Generator().manual_seed(32)
    q = torch.randn(batch, qo_heads, head_dim, generator=g).to(dtype).cuda()
    out = torch.full_like(q, float("nan"))
    lse = torch.full((batch, qo_heads), float("nan"), device="cuda")
    # the first plan is the smallest (one page a request): later plans hold more pages
    wrapper.plan(*page_table([page_size] * batch, page_size, indices), qo_heads, kv_heads, head_dim, page_size,
                 **planned)
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        wrapper.run(q, kv, out=out, lse=lse, **scales)  # warm up (loads the kernels) outside the capture
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, stream=stream):
            wrapper.run(q, kv, out=out, lse=lse, **scales)
    torch.cuda.current_stream().wait_stream(stream)
    for lengths in ([4000, 1, 999, 64], [17, 3000, 4000, 2], [1, 4000, 2, 3999]):
        indptr, used, last = page_table(lengths, page_size, indices)
        wrapper.plan(indptr, used, last, qo_heads, kv_heads, head_dim, page_size, **planned)
        q.copy_(torch.randn(q.shape, generator=g))
        out.fill_(float("nan"))
        lse.fill_(float("nan"))
        graph.replay()
        ref_out, ref_lse = reference(q, k_cache, v_cache, indptr, used, lengths, layout, rope=rope, **scales)
        check(out, lse, ref_out, ref_lse, dtype)



@pytest.mark.parametrize("layout", ["NHD", "HND"])
@pytest.mark.parametrize("kv_len", [1, 100, 20000])
def test_single_decode(layout, kv_len):
    torch.manual_seed(kv_len)
    qo_heads, kv_heads, d = 32, 8, 128
    q = torch.randn(qo_heads, d, device="cuda", dtype=torch.float16)
    shape = (kv_len, kv_heads, d) if layout == "NHD" else (kv_heads, kv_len, d)
    k = torch.randn(shape, device="cuda", dtype=torch.float16)
    v = torch.randn(shape, device="cuda", dtype=torch.float16)
    out, lse = cutefi.single_decode_with_kv_cache(q, k, v, kv_layout=layout, return_lse=True)
    k_nhd, v_nhd = (k, v) if layout == "NHD" else (k.transpose(0, 1), v.transpose(0, 1))
    s = torch.einsum("hd,nhd->hn", q.float(), k_nhd.float().repeat_interleave(4, dim=1)) / math.sqrt(d)
    ref = torch.einsum("hn,nhd->hd", torch.softmax(s, -1), v_nhd.float().repeat_interleave(4, dim=1))
    check(out[None], lse[None], ref[None], (torch.logsumexp(s, -1) / math.log(2))[None], torch.float16)



def test_decode_compiles_without_a_graph_break():
    qo_heads, kv_heads, head_dim, page_size = 32, 8, 128, 16
    kv, k_cache, v_cache, indptr, indices, last = make_batch([500, 7000, 1], page_size, kv_heads, head_dim,
                                                             torch.bfloat16, fused=True)
    wrapper = cutefi.BatchDecodeWithPagedKVCacheWrapper(torch.empty(64 << 20, dtype=torch.uint8, device="cuda"))
    wrapper.plan(indptr, indices, last, qo_heads, kv_heads, head_dim, page_size, q_data_type=torch.bfloat16,
                 logits_soft_cap=20.0)

    def attend(q):
        out, lse = wrapper.run(q * 2, kv, return_lse=True)
        return out.float() + 1, lse

    q = torch.randn(3, qo_heads, head_dim, device="cuda", dtype=torch.bfloat16)
    torch._dynamo.reset()
    compiled = torch.compile(attend, fullgraph=True)
    got, want = compiled(q), attend(q)
    torch.testing.assert_close(got[0], want[0], rtol=0, atol=0)
    torch.testing.assert_close(got[1], want[1], rtol=0, atol=0)
    ref_out, ref_lse = reference(q * 2, k_cache, v_cache, indptr, indices, [500, 7000, 1], "NHD", cap=20.0)
    check(got[0] - 1, got[1], ref_out, ref_lse, torch.bfloat16)



COMPILE_CASES = [  # kv cache dtype (None: q's), q dtype, rope (rope_scale, rope_theta), layout, fused cache
    pytest.param(torch.float8_e4m3fn, torch.bfloat16, None, "NHD", True, id="e4m3-NHD-fused"),
    pytest.param(torch.float8_e5m2, torch.float16, None, "HND", False, id="e5m2-fp16-HND"),
    pytest.param(None, torch.bfloat16, (2.0, 5e5), "NHD", False, id="rope-NHD"),
    pytest.param(torch.float8_e4m3fn, torch.bfloat16, (1.0, 1e4), "HND", False, id="e4m3-rope-HND"),
    pytest.param(torch.float8_e5m2, torch.bfloat16, (2.0, 5e5), "NHD", True, id="e5m2-rope-NHD-fused"),
]



@pytest.mark.parametrize("kv_dtype, dtype, rope, layout, fused", COMPILE_CASES)
def test_decode_compiled_fp8_rope(kv_dtype, dtype, rope, layout, fused):
    """torch.compile(fullgraph=True) of run over FP8 caches (k_scale / v_scale) and with
    ROPE_LLAMA, planned outside the compiled function: one graph holding the cutefi op, which
    writes the poisoned out / lse buffers given it bit for bit as eager does, on fresh q twice
    (no recompile), against the float32 reference."""
    from torch._dynamo.testing import CompileCounterWithBackend

    qo_heads, kv_heads, head_dim, page_size = 32, 8, 128, 16
    lengths = [500, 7000, 1]
    cache_dtype = kv_dtype or dtype
    scales = FP8_SCALES if kv_dtype else {}
    kv, k_cache, v_cache, indptr, indices, last = make_batch(lengths, page_size, kv_heads, head_dim, cache_dtype,
                                                             layout, fused=fused, seed=41)
    wrapper = cutefi.BatchDecodeWithPagedKVCacheWrapper(torch.empty(64 << 20, dtype=torch.uint8, device="cuda"), layout)
    wrapper.plan(indptr, indices, last, qo_heads, kv_heads, head_dim, page_size, q_data_type=dtype,
                 kv_data_type=cache_dtype, **rope_args(rope))

    def attend(q, out, lse):
        out, lse = wrapper.run(q * 2, kv, out=out, lse=lse, return_lse=True, **scales)
        return out.float() + 1, lse

    def poisoned(q):
        return torch.full_like(q, float("nan")), torch.full(q.shape[:2], float("nan"), device=q.device)

    torch._dynamo.reset()
    counter = CompileCounterWithBackend("inductor")
    compiled = torch.compile(attend, fullgraph=True, backend=counter)
    g = torch.Generator().manual_seed(42)
    for _ in range(2):
        q = torch.randn(len(lengths), qo_heads, head_dim, generator=g).to(dtype).cuda()
        got_out, got_lse = poisoned(q)
        want_out, want_lse = poisoned(q)
        got, want = compiled(q, got_out, got_lse), attend(q, want_out, want_lse)
        torch.testing.assert_close(got[0], want[0], rtol=0, atol=0)
        torch.testing.assert_close(got[1], want[1], rtol=0, atol=0)
        torch.testing.assert_close(got_out, want_out, rtol=0, atol=0)  # the buffers given were written
        torch.testing.assert_close(got_lse, want_lse, rtol=0, atol=0)
        ref_out, ref_lse = reference(q * 2, k_cache, v_cache, indptr, indices, lengths, layout, rope=rope, **scales)
        check(got_out, got_lse, ref_out, ref_lse, dtype)
    assert counter.frame_count == 1, f"{counter.frame_count} graphs: a recompile or a graph break"
    assert "torch.ops.cutefi.batch_decode_out" in counter.graphs[0].code



def test_single_decode_in_a_cuda_graph(monkeypatch):
    """single_decode captured in a CUDA graph (after a first call with these shapes made its
    plan) replays with new q values, also after newer lengths evicted its plan from the cache
    (the captured wrapper and its buffers stay alive: freed blocks are poisoned here); an unseen
    length during capture is refused clearly."""
    from cutefi.attention import decode_forms

    monkeypatch.setattr(decode_forms._SINGLE, "limit", 2)
    torch.manual_seed(9)
    kv_len, qo_heads, kv_heads, d = 9000, 32, 8, 128
    q = torch.randn(qo_heads, d, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(kv_len, kv_heads, d, device="cuda", dtype=torch.bfloat16)
    v = torch.randn(kv_len, kv_heads, d, device="cuda", dtype=torch.bfloat16)
    cutefi.single_decode_with_kv_cache(q, k, v)  # (the plan, outside the capture)
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.stream(stream):
        with torch.cuda.graph(graph, stream=stream):
            out = cutefi.single_decode_with_kv_cache(q, k, v)
        with pytest.raises(RuntimeError, match="call it once with them before capturing"):
            with torch.cuda.graph(torch.cuda.CUDAGraph(), stream=stream):
                cutefi.single_decode_with_kv_cache(q, k[:77], v[:77])
    torch.cuda.current_stream().wait_stream(stream)
    for n in (100, 200, 300):  # evict the captured plan
        cutefi.single_decode_with_kv_cache(q, k[:n], v[:n])
    torch.cuda.synchronize()
    poison = [torch.full((n,), -7, dtype=torch.int32, device="cuda")  # takes freed blocks of many sizes
              for n in (1, 64, 1024, 16384, 131072) for _ in range(8)]
    for _ in range(2):
        q.copy_(torch.randn_like(q))
        out.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        s = torch.einsum("hd,nhd->hn", q.float(), k.float().repeat_interleave(4, dim=1)) / math.sqrt(d)
        ref = torch.einsum("hn,nhd->hd", torch.softmax(s, -1), v.float().repeat_interleave(4, dim=1))
        check(out[None], None, ref[None], None, torch.bfloat16)
    del poison



def test_single_decode_fp8():
    torch.manual_seed(1)
    q = torch.randn(32, 128, device="cuda", dtype=torch.bfloat16)
    k = (torch.randn(5000, 8, 128, device="cuda") * 3).to(torch.float8_e4m3fn)
    v = (torch.randn(5000, 8, 128, device="cuda") * 3).to(torch.float8_e4m3fn)
    out = cutefi.single_decode_with_kv_cache(q, k, v, k_scale=0.25, v_scale=0.5)
    s = torch.einsum("hd,nhd->hn", q.float(), k.float().repeat_interleave(4, dim=1) * 0.25) / math.sqrt(128)
    ref = torch.einsum("hn,nhd->hd", torch.softmax(s, -1), v.float().repeat_interleave(4, dim=1) * 0.5)
    check(out[None], None, ref[None], None, torch.bfloat16)



def test_single_decode_rope_llama():
    torch.manual_seed(2)
    q = torch.randn(16, 128, device="cuda", dtype=torch.float16)
    k = torch.randn(1234, 4, 128, device="cuda", dtype=torch.float16)
    v = torch.randn(1234, 4, 128, device="cuda", dtype=torch.float16)
    out = cutefi.single_decode_with_kv_cache(q, k, v, pos_encoding_mode="ROPE_LLAMA", rope_theta=5e5)
    kr = rope_llama(k.float(), torch.arange(1234, device="cuda"), 1.0, 5e5).repeat_interleave(4, dim=1)
    qr = rope_llama(q.float()[None], torch.tensor([1233], device="cuda"), 1.0, 5e5)[0]
    s = torch.einsum("hd,nhd->hn", qr, kr) / math.sqrt(128)
    ref = torch.einsum("hn,nhd->hd", torch.softmax(s, -1), v.float().repeat_interleave(4, dim=1))
    check(out[None], None, ref[None], None, torch.float16)



def test_fast_decode_plan_with_host_indptr_override():
    """FlashInfer's fast_decode_plan(wrapper, ...): device tables, the host copy of indptr given
    (no device-to-host copy), the same result as plan."""
    lengths = [900, 1, 4000]
    kv, k_cache, v_cache, indptr, indices, last = make_batch(lengths, 16, 2, 128, torch.float16, seed=12)
    wrapper = cutefi.BatchDecodeWithPagedKVCacheWrapper(torch.empty(64 << 20, dtype=torch.uint8, device="cuda"))
    cutefi.fast_decode_plan(wrapper, indptr.cuda(), indices.cuda(), last.cuda(), 16, 2, 128, 16,
                            q_data_type=torch.float16, global_override_indptr_cpu=indptr)
    q = torch.randn(3, 16, 128, device="cuda", dtype=torch.float16)
    out = wrapper.run(q, kv)
    ref_out, _ = reference(q, k_cache, v_cache, indptr, indices, lengths, "NHD")
    check(out, None, ref_out, None, torch.float16)



@pytest.mark.parametrize("graph", [False, True])
def test_workspace_size_is_what_plan_needs(graph):
    """FlashInfer's ``workspace_size``: the float workspace a plan of these arguments needs (split
    requests' partial states; a CUDA-graph wrapper's fixed grid) and no int workspace. A
    workspace of that size plans and runs right; one byte less is refused where it is needed."""
    qo_heads, kv_heads, head_dim, page_size, lengths = 32, 8, 128, 16, [9000, 1, 700]
    kv, k_cache, v_cache, indptr, indices, last = make_batch(lengths, page_size, kv_heads, head_dim, torch.bfloat16)
    args = (indptr, indices, last, qo_heads, kv_heads, head_dim, page_size)

    def wrapper_of(workspace_bytes: int):
        workspace = torch.empty(workspace_bytes, dtype=torch.uint8, device="cuda")
        if not graph:
            return cutefi.BatchDecodeWithPagedKVCacheWrapper(workspace)
        bufs = (torch.empty(len(lengths) + 1, dtype=torch.int32, device="cuda"),
                torch.empty(indices.numel(), dtype=torch.int32, device="cuda"),
                torch.empty(len(lengths), dtype=torch.int32, device="cuda"))
        return cutefi.CUDAGraphBatchDecodeWithPagedKVCacheWrapper(workspace, *bufs)

    float_bytes, int_bytes = wrapper_of(16).workspace_size(*args, q_data_type=torch.bfloat16)
    assert int_bytes == 0 and float_bytes > 0  # (a batch of 3 on every GPU: the 9000-token request splits)
    wrapper = wrapper_of(float_bytes)
    assert wrapper.workspace_size(*args, q_data_type=torch.bfloat16) == (float_bytes, 0)  # (no state changed)
    wrapper.plan(*args, q_data_type=torch.bfloat16)
    q = torch.randn(len(lengths), qo_heads, head_dim, device="cuda").to(torch.bfloat16)
    out = torch.full_like(q, float("nan"))
    wrapper.run(q, kv, out=out)
    ref_out, _ = reference(q, k_cache, v_cache, indptr, indices, lengths, "NHD")
    check(out, None, ref_out, None, torch.bfloat16)
    with pytest.raises(ValueError, match="float_workspace_buffer holds"):
        wrapper_of(float_bytes - 1).plan(*args, q_data_type=torch.bfloat16)
