"""GPU tier: decode attention over a paged KV cache (BatchDecodeWithPagedKVCacheWrapper)
against a float32 reference written here: each request's K/V gathered page by page from the
cache, softmax(q·k * sm_scale) · v with GQA, soft cap and sliding window, and the base-2
log-sum-exp. Outputs are poisoned (NaN) before each call; caches hold fresh random values and
pages are used in shuffled order. The CUDA-graph, compiled and single-request forms (FP8 caches
and ROPE_LLAMA among them) are in ``test_gpu_decode_forms``.
"""

from __future__ import annotations

import math

import pytest
import torch

import cutefi

pytestmark = pytest.mark.gpu

REL = {torch.bfloat16: 1.2e-2, torch.float16: 2e-3}  # relative L2 error of the output
FP8 = (torch.float8_e4m3fn, torch.float8_e5m2)
FP8_SCALES = dict(k_scale=0.37, v_scale=1.9)  # run()'s (and reference()'s) dequantisation scales


def random_cache(shape, g, dtype):
    """Fresh random values; FP8 ones span the format's range, subnormals included (a normal
    value times 2^-10 .. 2^2), saturated below its largest finite value."""
    values = torch.randn(shape, generator=g)
    if dtype in FP8:
        values = values * torch.exp2(torch.rand(shape, generator=g) * 12 - 10)
        values = values.clamp(-torch.finfo(dtype).max, torch.finfo(dtype).max)
    return values.to(dtype)


def make_batch(lengths, page_size, kv_heads, head_dim, dtype, layout="NHD", spare_pages=3, fused=False, seed=0,
               poison_tail=False):
    """A paged cache holding ``lengths`` tokens per request in shuffled pages, and its page table
    (``dtype``: the cache's, FP8 included). ``poison_tail``: the rows past each request's
    length in its last page hold NaN (a kernel that reads them must not let them through)."""
    g = torch.Generator().manual_seed(seed)
    pages_per = [-(-n // page_size) for n in lengths]
    total = sum(pages_per) + spare_pages
    shape = (total, page_size, kv_heads, head_dim) if layout == "NHD" else (total, kv_heads, page_size, head_dim)
    if fused:  # one [pages, 2, ...] tensor: K and V pages interleaved (non-contiguous page stride)
        cache = random_cache((total, 2, *shape[1:]), g, dtype).cuda()
        kv = cache
        k_cache, v_cache = cache[:, 0], cache[:, 1]
    else:
        k_cache = random_cache(shape, g, dtype).cuda()
        v_cache = random_cache(shape, g, dtype).cuda()
        kv = (k_cache, v_cache)
    order = torch.randperm(total, generator=g)[:sum(pages_per)].to(torch.int32)
    indptr = torch.tensor([0, *torch.tensor(pages_per).cumsum(0).tolist()], dtype=torch.int32)
    last = torch.tensor([(n - 1) % page_size + 1 if n else 1 for n in lengths], dtype=torch.int32)
    if poison_tail:
        for b, n in enumerate(lengths):
            if n:
                page = int(order[indptr[b + 1] - 1])
                for cache in (k_cache, v_cache):
                    rows = cache[page, int(last[b]):] if layout == "NHD" else cache[page, :, int(last[b]):]
                    rows.fill_(float("nan"))
    return kv, k_cache, v_cache, indptr, order, last


def page_table(lengths, page_size, indices):
    """Host int32 (indptr, indices, last_page_len) of requests of ``lengths`` (> 0) tokens over
    the first pages of ``indices``, in order (a re-plan within a CUDA-graph wrapper's buffers)."""
    pages = [-(-n // page_size) for n in lengths]
    indptr = torch.tensor([0, *torch.tensor(pages).cumsum(0).tolist()], dtype=torch.int32)
    last = torch.tensor([(n - 1) % page_size + 1 for n in lengths], dtype=torch.int32)
    return indptr, indices[:sum(pages)], last


def gather(cache, pages, length, layout):
    """[length, kv_heads, head_dim] float32 rows of one request."""
    blocks = cache[pages.long()].float()
    if layout == "HND":
        blocks = blocks.transpose(1, 2)
    return blocks.reshape(-1, *blocks.shape[2:])[:length]


def rope_llama(x, positions, rope_scale=1.0, rope_theta=1e4):
    """FlashInfer's Llama RoPE of ``x`` [n, heads, d] at ``positions`` [n] (float64 angles):
    dims i and i + d/2 turn by position / rope_scale * rope_theta^(-2i/d)."""
    d = x.shape[-1]
    inv_freq = 1.0 / (rope_scale * rope_theta ** (torch.arange(d // 2, dtype=torch.float64, device=x.device) * 2 / d))
    angle = positions.to(torch.float64)[:, None] * inv_freq[None, :]
    cos, sin = torch.cos(angle).float()[:, None, :], torch.sin(angle).float()[:, None, :]
    x1, x2 = x[..., : d // 2], x[..., d // 2:]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)


def reference(q, k_cache, v_cache, indptr, indices, lengths, layout, sm_scale=None, cap=None, window_left=-1,
              sinks=None, k_scale=1.0, v_scale=1.0, rope=None):
    batch, qo_heads, head_dim = q.shape
    kv_heads = k_cache.shape[2] if layout == "NHD" else k_cache.shape[1]
    group = qo_heads // kv_heads
    scale = 1.0 / math.sqrt(head_dim) if sm_scale is None else sm_scale
    out = torch.zeros(batch, qo_heads, head_dim, device=q.device)
    lse = torch.full((batch, qo_heads), float("-inf"), device=q.device)
    for b, n in enumerate(lengths):
        if n == 0:  # no token: out 0, and lse the sink's alone (or -inf)
            if sinks is not None:
                lse[b] = sinks.float() / math.log(2)
            continue
        pages = indices[indptr[b]:indptr[b + 1]].to(q.device)
        k = gather(k_cache, pages, n, layout).repeat_interleave(group, dim=1) * k_scale  # [n, qo_heads, d]
        v = gather(v_cache, pages, n, layout).repeat_interleave(group, dim=1) * v_scale
        qb = q[b].float()
        if rope is not None:  # (rope_scale, rope_theta): q at position n - 1, k at 0 .. n - 1
            k = rope_llama(k, torch.arange(n, device=q.device), *rope)
            qb = rope_llama(qb[None], torch.tensor([n - 1], device=q.device), *rope)[0]
            if k_cache.dtype == q.dtype:
                # the kernel's MMAs take the rotated q and K in q's 16-bit type (FP8 caches meet f16
                # MMAs, 8x finer than bf16): round them so, or bf16's rounding of K at thousands of
                # positions moves lse by up to ~5e-3
                k, qb = k.to(q.dtype).float(), qb.to(q.dtype).float()
        s = torch.einsum("hd,nhd->hn", qb, k) * scale
        if cap:
            s = cap * torch.tanh(s / cap)
        if window_left >= 0:
            s[:, : max(0, n - 1 - window_left)] = float("-inf")
        if sinks is not None:  # one more logit a head, with no value: only the denominator grows
            s = torch.cat([s, sinks.float()[:, None]], dim=1)
            v = torch.cat([v, torch.zeros_like(v[:1])], dim=0)
        p = torch.softmax(s, dim=-1)
        out[b] = torch.einsum("hn,nhd->hd", p, v)
        lse[b] = torch.logsumexp(s, dim=-1) / math.log(2)
    return out, lse


def rope_args(rope):
    if rope is None:
        return {}
    return dict(pos_encoding_mode="ROPE_LLAMA", rope_scale=rope[0], rope_theta=rope[1])


def check(out, lse, ref_out, ref_lse, dtype):
    assert not torch.isnan(out).any(), "NaN in out: an element was never written"
    rel = ((out.float() - ref_out).norm() / ref_out.norm().clamp(min=1e-6)).item()
    assert rel < REL[dtype], f"relative error {rel:.2e}"
    if lse is not None:
        finite = torch.isfinite(ref_lse)
        assert torch.equal(torch.isneginf(lse), torch.isneginf(ref_lse))
        torch.testing.assert_close(lse[finite], ref_lse[finite], rtol=1e-3, atol=2e-3)
    return rel


def run_decode(lengths, qo_heads, kv_heads, head_dim, page_size, dtype, layout="NHD", fused=False, seed=0,
               cap=None, window_left=-1, sm_scale=None, disable_split=False, fixed_split=None, device_tables=False,
               sinks=False, kv_dtype=None, k_scale=None, v_scale=None, rope=None, poison_tail=False,
               return_wrapper=False):
    kv_dtype = kv_dtype or dtype
    kv, k_cache, v_cache, indptr, indices, last = make_batch(lengths, page_size, kv_heads, head_dim, kv_dtype, layout,
                                                             fused=fused, seed=seed, poison_tail=poison_tail)
    q = torch.randn(len(lengths), qo_heads, head_dim, generator=torch.Generator().manual_seed(seed + 1)).to(dtype).cuda()
    wrapper = cutefi.BatchDecodeWithPagedKVCacheWrapper(torch.empty(64 << 20, dtype=torch.uint8, device="cuda"), layout)
    tables = (indptr.cuda(), indices.cuda(), last.cuda()) if device_tables else (indptr, indices, last)
    wrapper.plan(*tables, qo_heads, kv_heads, head_dim, page_size, q_data_type=dtype, kv_data_type=kv_dtype,
                 logits_soft_cap=cap, window_left=window_left, sm_scale=sm_scale, disable_split_kv=disable_split,
                 fixed_split_size=fixed_split, **rope_args(rope))
    out = torch.full_like(q, float("nan"))
    lse = torch.full(q.shape[:2], float("nan"), device="cuda")
    sink = torch.randn(qo_heads, device="cuda") * 3 if sinks else None
    wrapper.run(q, kv, out=out, lse=lse, sinks=sink, k_scale=k_scale, v_scale=v_scale)
    ref_out, ref_lse = reference(q, k_cache, v_cache, indptr, indices, lengths, layout, sm_scale, cap, window_left,
                                 sink, k_scale or 1.0, v_scale or 1.0, rope)
    errors = check(out, lse, ref_out, ref_lse, dtype)
    return wrapper if return_wrapper else errors


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("head_dim", [64, 128, 256])
@pytest.mark.parametrize("qo_heads, kv_heads", [(4, 4), (8, 2), (16, 2), (32, 2), (6, 2), (64, 2)])
@pytest.mark.parametrize("page_size", [1, 16])
@pytest.mark.parametrize("layout", ["NHD", "HND"])
def test_decode_matrix(dtype, head_dim, qo_heads, kv_heads, page_size, layout):
    lengths = [1, 37, 16, 300, 1000, 2]
    run_decode(lengths, qo_heads, kv_heads, head_dim, page_size, dtype, layout, seed=head_dim + qo_heads)


@pytest.mark.parametrize("page_size", [8, 32, 64, 5])
def test_decode_page_sizes_and_split(page_size):
    # long requests in a small batch: split over the SMs, merged
    run_decode([5000, 17, 12345, 1], 32, 8, 128, page_size, torch.bfloat16, seed=page_size)


@pytest.mark.parametrize("split", [None, 1, 4])
def test_decode_split_choices(split):
    run_decode([4096, 4095, 33, 0, 7], 8, 8, 128, 16, torch.float16, fixed_split=split, seed=3)


@pytest.mark.parametrize("head_dim", [64, 128, 256])
@pytest.mark.parametrize("qo_heads, kv_heads", [(4, 4), (12, 4), (32, 8), (3, 1), (64, 2)])
def test_decode_split_requests_merged_in_kernel(head_dim, qo_heads, kv_heads):
    """Split requests are merged by the last CTA of each (request, kv head, row block) to finish:
    up to 79 parts (64 tokens a split), groups of 1, 3, 4 and 8 heads (a row's pieces shared by
    up to 8 threads) and of 32 (two wide row blocks), attention sinks, lse. Run
    twice on fresh poisoned outputs: the second run matches the first bit for bit (the
    counters are back at zero after each run, so its last CTA is the right one)."""
    lengths = [5000, 1, 700, 16]
    kv, k_cache, v_cache, indptr, indices, last = make_batch(lengths, 16, kv_heads, head_dim, torch.bfloat16,
                                                             seed=head_dim + qo_heads)
    q = torch.randn(len(lengths), qo_heads, head_dim, device="cuda").to(torch.bfloat16)
    sinks = torch.randn(qo_heads, device="cuda") * 3
    wrapper = cutefi.BatchDecodeWithPagedKVCacheWrapper(torch.empty(64 << 20, dtype=torch.uint8, device="cuda"))
    wrapper.plan(indptr, indices, last, qo_heads, kv_heads, head_dim, 16, q_data_type=torch.bfloat16,
                 fixed_split_size=1)
    assert wrapper._plan["partial_rows"] > 80
    ref_out, ref_lse = reference(q, k_cache, v_cache, indptr, indices, lengths, "NHD", sinks=sinks)
    results = []
    for _ in range(2):
        out = torch.full_like(q, float("nan"))
        lse = torch.full(q.shape[:2], float("nan"), device="cuda")
        wrapper.run(q, kv, out=out, lse=lse, sinks=sinks)
        check(out, lse, ref_out, ref_lse, torch.bfloat16)
        results.append((out, lse))
        assert not wrapper._plan["counters"].any()
    assert torch.equal(results[0][0], results[1][0]) and torch.equal(results[0][1], results[1][1])


def test_decode_no_split_and_empty_request():
    run_decode([0, 4000, 1], 8, 1, 64, 16, torch.bfloat16, disable_split=True)


@pytest.mark.parametrize("cap, window_left, sm_scale", [(30.0, -1, None), (None, 100, None), (5.0, 0, 0.3),
                                                        (None, 4096, 0.05)])
def test_decode_softcap_window_scale(cap, window_left, sm_scale):
    run_decode([3000, 50, 101, 1], 16, 4, 128, 16, torch.bfloat16, cap=cap, window_left=window_left,
               sm_scale=sm_scale, seed=11)


@pytest.mark.parametrize("layout", ["NHD", "HND"])
def test_decode_fused_cache_and_device_tables(layout):
    run_decode([700, 3, 2048], 32, 8, 128, 16, torch.bfloat16, layout, fused=True, device_tables=True)


def test_decode_long_single_request():
    run_decode([131072], 32, 8, 128, 16, torch.bfloat16, seed=5)


def test_decode_plan_and_run_in_a_thread_that_never_touched_cuda():
    """plan's table upload (driver calls, not torch's) in a thread with no current context yet:
    the wrapper and the cache are made here, the thread calls plan first, then run."""
    import threading

    lengths = [900, 3, 4096]
    kv, k_cache, v_cache, indptr, indices, last = make_batch(lengths, 16, 8, 128, torch.bfloat16, seed=11)
    q = torch.randn(len(lengths), 32, 128, device="cuda").to(torch.bfloat16)
    wrapper = cutefi.BatchDecodeWithPagedKVCacheWrapper(torch.empty(64 << 20, dtype=torch.uint8, device="cuda"))
    out = torch.full_like(q, float("nan"))
    failures = []

    def work():
        try:
            wrapper.plan(indptr, indices, last, 32, 8, 128, 16, q_data_type=torch.bfloat16)
            wrapper.run(q, kv, out=out)
            torch.cuda.synchronize()
        except Exception as exc:  # reported by the test's thread
            failures.append(exc)

    thread = threading.Thread(target=work)
    thread.start()
    thread.join()
    assert not failures, failures
    ref_out, _ = reference(q, k_cache, v_cache, indptr, indices, lengths, "NHD")
    check(out, None, ref_out, None, torch.bfloat16)


@pytest.mark.parametrize("non_blocking", [True, False])
def test_decode_back_to_back_plans_keep_each_table(non_blocking):
    """Plans issued while the previous run is still on the GPU: each upload waits for the last
    one to leave the pinned buffer, so every run sees its own plan's tables."""
    page_size, batches = 16, ([30000, 5, 7000], [3, 12000, 64], [4096, 4096, 1])
    made = [make_batch(lengths, page_size, 8, 128, torch.bfloat16, seed=20 + i) for i, lengths in enumerate(batches)]
    wrapper = cutefi.BatchDecodeWithPagedKVCacheWrapper(torch.empty(64 << 20, dtype=torch.uint8, device="cuda"))
    qs = [torch.randn(3, 32, 128, device="cuda").to(torch.bfloat16) for _ in batches]
    outs = []
    for q, (kv, _, _, indptr, indices, last) in zip(qs, made):
        wrapper.plan(indptr, indices, last, 32, 8, 128, page_size, q_data_type=torch.bfloat16,
                     non_blocking=non_blocking)
        outs.append(wrapper.run(q, kv))
    for q, out, lengths, (_, k_cache, v_cache, indptr, indices, _) in zip(qs, outs, batches, made):
        ref_out, _ = reference(q, k_cache, v_cache, indptr, indices, lengths, "NHD")
        check(out, None, ref_out, None, torch.bfloat16)


def test_decode_run_errors():
    wrapper = cutefi.BatchDecodeWithPagedKVCacheWrapper(torch.empty(1 << 20, dtype=torch.uint8, device="cuda"))
    q = torch.randn(2, 8, 128, device="cuda", dtype=torch.float16)
    with pytest.raises(RuntimeError, match="before plan"):
        wrapper.run(q, (q, q))
    kv, *_, indptr, indices, last = make_batch([10, 20], 16, 8, 128, torch.float16)
    wrapper.plan(indptr, indices, last, 8, 8, 128, 16)
    with pytest.raises(ValueError, match="q must be"):
        wrapper.run(q[:1], kv)
    with pytest.raises(TypeError, match="q dtype"):
        wrapper.run(q.bfloat16(), kv)
    with pytest.raises(ValueError, match="paged_kv_cache"):
        wrapper.run(q, (kv[0][:, :8], kv[1][:, :8]))


@pytest.mark.parametrize("narrow", [True, False])
@pytest.mark.parametrize("head_dim", [128, 256])
@pytest.mark.parametrize("kv_dtype", [None, torch.float8_e4m3fn])
def test_decode_shallow_rings(monkeypatch, head_dim, kv_dtype, narrow):
    """The shallower rings the plan takes on GPUs with less shared memory (sm_80/86/89/120)."""
    from cutefi.attention import decode, launch

    stages = launch.mma_decode_stage_options("fp8e4m3" if kv_dtype else "bf16", head_dim)[-1]
    monkeypatch.setattr(decode, "NARROW", narrow)
    monkeypatch.setattr(decode, "decode_build", lambda device, d, kv, full_batch=False: (stages, 2))
    run_decode([3000, 1, 77, 640], 16, 2, head_dim, 16, torch.bfloat16, seed=head_dim, kv_dtype=kv_dtype)


@pytest.mark.parametrize("kv_dtype", [None, *FP8])
@pytest.mark.parametrize("head_dim", [64, 128, 256])
@pytest.mark.parametrize("qo_heads, kv_heads", [(4, 4), (8, 2), (24, 4)])
def test_decode_narrow_rings(monkeypatch, kv_dtype, head_dim, qo_heads, kv_heads):
    """Every ring a narrow build has (groups up to 8: heads as the MMAs' N), against the
    reference, with a request split over CTAs and one ending mid-tile."""
    from cutefi.attention import decode, launch

    name = {None: "bf16", torch.float8_e4m3fn: "fp8e4m3", torch.float8_e5m2: "fp8e5m2"}[kv_dtype]
    assert decode.narrow_build(qo_heads // kv_heads, rope=False)
    for stages, ctas in launch.mma_decode_rings(name, head_dim, narrow=True):
        monkeypatch.setattr(decode, "decode_build", lambda device, d, kv, full_batch=False, option=(stages, ctas): option)
        run_decode([4100, 1, 77, 640, 33], qo_heads, kv_heads, head_dim, 16, torch.bfloat16, seed=stages,
                   kv_dtype=kv_dtype, **(FP8_SCALES if kv_dtype else {}))


def _packs() -> bool:
    """Whether plans pack kv heads on this GPU (Hopper: where it was measured)."""
    return torch.cuda.get_device_capability()[0] == 9


PACKED_CASES = [  # (qo_heads, kv_heads, head_dim, page_size, layout): groups 1-4 pack 8-2 kv heads a CTA
    (32, 8, 128, 16, "NHD"), (8, 8, 128, 16, "NHD"), (16, 8, 128, 1, "HND"), (24, 8, 128, 5, "NHD"),
    (12, 6, 128, 16, "HND"), (16, 4, 256, 16, "NHD"),
]


@pytest.mark.parametrize("kv_dtype", [None, *FP8])
@pytest.mark.parametrize("qo_heads, kv_heads, head_dim, page_size, layout", PACKED_CASES)
def test_decode_packed_kv_heads(monkeypatch, kv_dtype, qo_heads, kv_heads, head_dim, page_size, layout):
    """Narrow plans with kv heads packed into a CTA's tiles (forced for any batch: PACK_FILL 0),
    against the reference: ragged lengths ending mid-tile and mid-page, split requests, sinks,
    soft cap and a window."""
    from cutefi.attention import decode

    if not _packs():
        pytest.skip("kv heads are packed on Hopper only")
    monkeypatch.setattr(decode, "PACK_FILL", 0.0)
    name = {None: "bf16", torch.float8_e4m3fn: "fp8e4m3", torch.float8_e5m2: "fp8e5m2"}[kv_dtype]
    shift = decode.pack_shift(qo_heads // kv_heads, kv_heads, True, name, head_dim)
    assert shift > 0
    for extra in ({"sinks": True}, {"cap": 30.0, "window_left": 700}):
        wrapper = run_decode([4100, 1, 77, 640, 33, 9], qo_heads, kv_heads, head_dim, page_size, torch.bfloat16,
                             layout, seed=qo_heads + page_size, kv_dtype=kv_dtype, return_wrapper=True, **extra,
                             **(FP8_SCALES if kv_dtype else {}))
        assert wrapper._plan["pack_shift"] == shift


def test_decode_pack_only_where_the_batch_fills_the_gpu():
    """Packing is planned for a batch whose packed CTAs fill the GPU, not for a small one (it
    would split requests more); both against the reference."""
    from cutefi.attention import decode

    if not _packs():
        pytest.skip("kv heads are packed on Hopper only")
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    _, ctas = decode.decode_build(torch.cuda.current_device(), 128, "bf16")
    big = -(-int(decode.PACK_FILL * ctas * sms) // 4)  # requests x 4 packed CTAs (32/8 heads)
    for batch, shift in ((big, 1), (8, 0)):
        lengths = [int(n) for n in torch.randint(1, 300, (batch,), generator=torch.Generator().manual_seed(batch))]
        wrapper = run_decode(lengths, 32, 8, 128, 16, torch.bfloat16, seed=batch, return_wrapper=True)
        assert wrapper._plan["pack_shift"] == shift


def test_decode_full_batch_ring():
    """A batch whose CTAs fill the GPU at the narrow FP8 head_dim 128 full-batch ring (4 CTAs an
    SM) takes it, and one that does not keeps the plan's usual ring; both against the reference."""
    from cutefi.attention import decode, decode_ops, launch

    full = decode.decode_build(torch.cuda.current_device(), 128, "fp8e4m3", full_batch=True)
    usual = decode.decode_build(torch.cuda.current_device(), 128, "fp8e4m3")
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    if full == usual:
        pytest.skip(f"no full-batch ring fits this GPU ({full})")
    assert full == launch.MMA_DECODE_FULL_BATCH_RINGS[True, 128]
    ctas = decode_ops.ctas_per_item(8, 4, True, decode.pack_shift(4, 8, True, "fp8e4m3"))  # a request's CTAs
    big = -(-int(decode.FULL_BATCH * full[1] * sms) // ctas)  # requests x their CTAs fill the slots
    for batch, ring in ((big, full), (big // 4, usual)):
        lengths = [int(n) for n in torch.randint(1, 400, (batch,), generator=torch.Generator().manual_seed(batch))]
        wrapper = run_decode(lengths, 32, 8, 128, 16, torch.bfloat16, seed=batch, kv_dtype=torch.float8_e4m3fn,
                             return_wrapper=True, **FP8_SCALES)
        assert wrapper._plan["stages"] == ring[0]


@pytest.mark.parametrize("qo_heads, kv_heads", [(4, 4), (8, 2), (6, 2)])
@pytest.mark.parametrize("kv_dtype", [None, torch.float8_e4m3fn])
def test_decode_wide_small_groups(monkeypatch, qo_heads, kv_heads, kv_dtype):
    """Small groups on the wide builds (heads as the MMAs' M), which RoPE plans take."""
    from cutefi.attention import decode

    monkeypatch.setattr(decode, "NARROW", False)
    run_decode([3000, 1, 77, 640], qo_heads, kv_heads, 128, 16, torch.float16, seed=qo_heads, kv_dtype=kv_dtype,
               cap=20.0, **(FP8_SCALES if kv_dtype else {}))


def test_decode_plan_errors():
    wrapper = cutefi.BatchDecodeWithPagedKVCacheWrapper(torch.empty(1 << 20, dtype=torch.uint8, device="cuda"))
    i32 = dict(dtype=torch.int32)
    indptr, indices, last = torch.tensor([0, 2, 3], **i32), torch.arange(3, **i32), torch.tensor([5, 16], **i32)
    ok = (indptr, indices, last, 8, 2, 128, 16)
    with pytest.raises(ValueError, match="head_dim must be one of"):
        wrapper.plan(indptr, indices, last, 8, 2, 96, 16)
    with pytest.raises(ValueError, match="num_qo_heads .* multiple of num_kv_heads"):
        wrapper.plan(indptr, indices, last, 6, 4, 128, 16)
    with pytest.raises(ValueError, match="last_page_len must be in"):
        wrapper.plan(indptr, indices, torch.tensor([5, 17], **i32), 8, 2, 128, 16)
    with pytest.raises(ValueError, match="never decrease"):
        wrapper.plan(torch.tensor([0, 3, 2], **i32), indices, last, 8, 2, 128, 16)
    with pytest.raises(ValueError, match="indices holds"):
        wrapper.plan(torch.tensor([0, 2, 9], **i32), indices, last, 8, 2, 128, 16)
    with pytest.raises(TypeError, match="indptr must be int32"):
        wrapper.plan(indptr.long(), indices, last, 8, 2, 128, 16)
    with pytest.raises(NotImplementedError, match="pos_encoding_mode"):
        wrapper.plan(*ok, pos_encoding_mode="ALIBI")
    with pytest.raises(ValueError, match="rope_theta"):
        wrapper.plan(*ok, pos_encoding_mode="ROPE_LLAMA", rope_theta=-1.0)
    with pytest.raises(TypeError, match="kv_data_type"):
        wrapper.plan(*ok, kv_data_type=torch.float32)
    with pytest.raises(ValueError, match="backend must be"):
        cutefi.BatchDecodeWithPagedKVCacheWrapper(torch.empty(16, dtype=torch.uint8, device="cuda"),
                                                  backend="trtllm-gen")
    for extra, pattern in ((dict(block_tables=indices), "block_tables"), (dict(seq_lens=last), "seq_lens"),
                           (dict(q_len_per_req=2), "q_len_per_req"), (dict(window_right=3), "window_right"),
                           (dict(o_data_type=torch.float32), "o_data_type")):
        with pytest.raises(NotImplementedError, match=pattern):
            wrapper.plan(*ok, **extra)
    with pytest.raises(ValueError, match="use_cuda_graph=True needs"):
        cutefi.BatchDecodeWithPagedKVCacheWrapper(torch.empty(16, dtype=torch.uint8, device="cuda"), use_cuda_graph=True)
    wrapper.plan(*ok, q_data_type="float16")
    # the checked arguments are remembered by value and type: a float head_dim or page size
    # is still refused after an int one planned, and an unhashable argument gets the same error
    with pytest.raises(TypeError, match="head_dim must be an int"):
        wrapper.plan(indptr, indices, last, 8, 2, 128.0, 16, q_data_type="float16")
    with pytest.raises(TypeError, match="page_size must be an int"):
        wrapper.plan(indptr, indices, last, 8, 2, 128, 16.0, q_data_type="float16")
    with pytest.raises(TypeError, match="sm_scale must be a real number"):
        wrapper.plan(*ok, q_data_type="float16", sm_scale=[0.1])
    with pytest.raises(TypeError, match="logits_soft_cap must be a real number"):
        wrapper.plan(*ok, q_data_type="float16", logits_soft_cap=True)
    wrapper.plan(*ok, q_data_type="float16")
    kv, *_ = make_batch([19, 16], 16, 2, 128, torch.float16)
    q = torch.randn(2, 8, 128, device="cuda", dtype=torch.float16)
    with pytest.raises(ValueError, match="window_left"):
        wrapper.run(q, kv, window_left=5)
    with pytest.raises(ValueError, match="sinks must be"):
        wrapper.run(q, kv, sinks=torch.zeros(7, device="cuda"))
    with pytest.raises(RuntimeError, match="use_cuda_graph=True"):
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            wrapper.run(q, kv)


def test_flashinfer_call_patterns():
    """How vLLM and SGLang drive FlashInfer's wrapper, with cutefi's: backend "fa2", plan with
    FlashInfer's positional order (o_data_type, block_tables and seq_lens in it),
    ``fixed_split_size=-1``, ``data_type`` standing for the KV type only, ``begin_forward``,
    ``forward`` with its own sm_scale and soft cap (FlashInfer's forward replaces the plan's),
    ``forward_return_lse`` / ``run_return_lse``, the planned values read back; against the
    float32 reference."""
    lengths, qo_heads, kv_heads, head_dim, page_size = [37, 300, 1], 16, 4, 128, 16
    kv, k_cache, v_cache, indptr, indices, last = make_batch(lengths, page_size, kv_heads, head_dim, torch.bfloat16,
                                                             seed=3)
    q = torch.randn(len(lengths), qo_heads, head_dim, device="cuda", dtype=torch.bfloat16)
    wrapper = cutefi.BatchDecodeWithPagedKVCacheWrapper(torch.empty(64 << 20, dtype=torch.uint8, device="cuda"),
                                                        "NHD", False, False, None, None, None, "fa2")
    # pos_encoding_mode, window_left, logits_soft_cap, q_data_type, kv_data_type, o_data_type, data_type,
    # sm_scale, rope_scale, rope_theta, non_blocking, block_tables, seq_lens, fixed_split_size,
    # disable_split_kv: vLLM's positional call
    wrapper.plan(indptr, indices, last, qo_heads, kv_heads, head_dim, page_size, "NONE", -1, 30.0, torch.bfloat16,
                 None, torch.bfloat16, None, 0.05, None, None, True, None, None, -1, False)
    assert (wrapper._sm_scale, wrapper._logits_soft_cap, wrapper._window_left) == (0.05, 30.0, -1)
    out, lse = wrapper.run_return_lse(q, kv)
    ref_out, ref_lse = reference(q, k_cache, v_cache, indptr, indices, lengths, "NHD", sm_scale=0.05, cap=30.0)
    check(out, lse, ref_out, ref_lse, torch.bfloat16)
    # SGLang: data_type is the KV type, q_data_type given; begin_forward; forward's own scales
    wrapper.begin_forward(indptr, indices, last, qo_heads, kv_heads, head_dim, page_size, data_type=torch.bfloat16,
                          q_data_type=torch.bfloat16)
    out = wrapper.forward(q, kv, sm_scale=0.02, logits_soft_cap=10.0)
    ref_out, ref_lse = reference(q, k_cache, v_cache, indptr, indices, lengths, "NHD", sm_scale=0.02, cap=10.0)
    check(out, None, ref_out, None, torch.bfloat16)
    out, lse = wrapper.forward_return_lse(q, kv)  # forward's defaults: 1/sqrt(d), no cap
    ref_out, ref_lse = reference(q, k_cache, v_cache, indptr, indices, lengths, "NHD")
    check(out, lse, ref_out, ref_lse, torch.bfloat16)
    with pytest.raises(ValueError, match="window_left"):
        wrapper.forward(q, kv, window_left=8)
    wrapper.end_forward()


@pytest.mark.parametrize("layout", ["NHD", "HND"])
@pytest.mark.parametrize("fused", [False, True])
def test_page_size_one_caches_without_their_page_dimension(layout, fused):
    """SGLang's token-granular cache: page size 1, passed as a (k, v) pair of 3-D [slots, heads,
    head_dim] tensors or one 4-D [slots, 2, heads, head_dim] tensor (FlashInfer adds the page
    dimension), against the float32 reference."""
    lengths, qo_heads, kv_heads, head_dim = [70, 1, 333], 8, 2, 128
    kv, k_cache, v_cache, indptr, indices, last = make_batch(lengths, 1, kv_heads, head_dim, torch.float16,
                                                             layout=layout, fused=fused, seed=5)
    page_dim = 1 if layout == "NHD" else 2
    squeezed = kv.squeeze(page_dim + 1) if fused else tuple(c.squeeze(page_dim) for c in kv)
    q = torch.randn(len(lengths), qo_heads, head_dim, device="cuda", dtype=torch.float16)
    wrapper = cutefi.BatchDecodeWithPagedKVCacheWrapper(torch.empty(16 << 20, dtype=torch.uint8, device="cuda"), layout)
    wrapper.plan(indptr, indices, last, qo_heads, kv_heads, head_dim, 1, q_data_type=torch.float16)
    out, lse = wrapper.run(q, squeezed, return_lse=True)
    ref_out, ref_lse = reference(q, k_cache, v_cache, indptr, indices, lengths, layout)
    check(out, lse, ref_out, ref_lse, torch.float16)


@pytest.mark.parametrize("split", [None, 1])
def test_decode_attention_sinks(split):
    """gpt-oss's sinks: a per-head logit in the softmax denominator, counted once a request
    however it is split (an empty request then attends to the sink alone: out 0)."""
    run_decode([3000, 1, 0, 999], 64, 8, 64, 16, torch.bfloat16, fixed_split=split, sinks=True, seed=9)


@pytest.mark.parametrize("kv_dtype", FP8)
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("head_dim", [64, 128, 256])
@pytest.mark.parametrize("qo_heads, kv_heads", [(8, 8), (32, 4), (20, 1)])
@pytest.mark.parametrize("layout", ["NHD", "HND"])
def test_decode_fp8_kv(kv_dtype, dtype, head_dim, qo_heads, kv_heads, layout):
    """FP8 caches with k_scale / v_scale: the reference dequantises exactly (float32 of each
    code, times the scale); values span the format, subnormals included."""
    run_decode([1, 37, 300, 2000, 16], qo_heads, kv_heads, head_dim, 16, dtype, layout, seed=head_dim + qo_heads,
               kv_dtype=kv_dtype, k_scale=0.37, v_scale=1.9)


@pytest.mark.parametrize("kv_dtype", FP8)
def test_decode_fp8_kv_split_sinks_cap_page1(kv_dtype):
    run_decode([9000, 1, 0, 513], 64, 8, 128, 1, torch.bfloat16, seed=4, kv_dtype=kv_dtype, k_scale=2.0,
               sinks=True, cap=30.0, fixed_split=1)
    run_decode([12345, 77], 32, 8, 128, 16, torch.float16, "HND", fused=True, device_tables=True, seed=6,
               kv_dtype=kv_dtype, v_scale=0.5, window_left=1000)


@pytest.mark.parametrize("kv_dtype", [None, torch.float8_e4m3fn])
@pytest.mark.parametrize("head_dim", [64, 128, 256])
@pytest.mark.parametrize("layout", ["NHD", "HND"])
def test_decode_rope_llama(kv_dtype, head_dim, layout):
    """pos_encoding_mode="ROPE_LLAMA": q turned at position length - 1 and each K row at its
    token index inside the kernel, against float64-angle RoPE in the reference (split requests,
    a 1-token request, a window)."""
    run_decode([3000, 1, 77, 1500], 32, 8, head_dim, 16, torch.bfloat16, layout, seed=head_dim, kv_dtype=kv_dtype,
               rope=(1.0, 1e4))
    run_decode([700, 2048], 8, 2, head_dim, 5, torch.float16, layout, seed=7, kv_dtype=kv_dtype, rope=(2.0, 5e5),
               window_left=600, fixed_split=9)


@pytest.mark.parametrize("kv_dtype", [torch.bfloat16, torch.float8_e4m3fn])
@pytest.mark.parametrize("page_size, head_dim", [(16, 128), (64, 128), (16, 64), (32, 256), (5, 128)])
def test_decode_rows_past_the_end_hold_nan(kv_dtype, page_size, head_dim):
    """NaN in the rows past each request's length in its last page (a cache's unwritten rows):
    they must not reach the output (0 * NaN is NaN, so masking the scores alone would not do)."""
    run_decode([1000, 17, 1, 4095, 33, 300], 32, 8, head_dim, page_size, torch.bfloat16, kv_dtype=kv_dtype,
               poison_tail=True, seed=page_size + head_dim, k_scale=0.5 if kv_dtype != torch.bfloat16 else None)


@pytest.mark.parametrize("layout", ["NHD", "HND"])
def test_decode_page_ids_outside_the_cache_read_zeros(layout):
    """A page id past the cache (or negative) reads as zero K and V rows (the kernel's documented
    behaviour; nothing is read out of bounds)."""
    qo_heads, kv_heads, head_dim, page_size = 8, 2, 128, 16
    kv, k_cache, v_cache, indptr, indices, last = make_batch([64, 40], page_size, kv_heads, head_dim, torch.float16,
                                                             layout, seed=5)
    bad = indices.clone()
    bad[1] = k_cache.shape[0] + 7
    bad[4] = -3
    wrapper = cutefi.BatchDecodeWithPagedKVCacheWrapper(torch.empty(64 << 20, dtype=torch.uint8, device="cuda"), layout)
    wrapper.plan(indptr, bad, last, qo_heads, kv_heads, head_dim, page_size, q_data_type=torch.float16)
    q = torch.randn(2, qo_heads, head_dim, device="cuda", dtype=torch.float16)
    out = wrapper.run(q, kv)
    # the reference: the same cache with two zero pages where the bad ids point
    zero_k, zero_v = (torch.cat([c, torch.zeros_like(c[:2])]) for c in (k_cache, v_cache))
    fixed = bad.clone()
    fixed[1], fixed[4] = k_cache.shape[0], k_cache.shape[0] + 1
    ref_out, _ = reference(q, zero_k, zero_v, indptr, fixed, [64, 40], layout)
    check(out, None, ref_out, None, torch.float16)


@pytest.mark.parametrize("kv_heads", [8, 1])
def test_decode_fp8_software_widening(monkeypatch, kv_heads):
    """sm_80/86's integer e4m3 widening (2^-8 short, folded in the kernel's scales), run here
    through a test build where the GPU converts in hardware."""
    from cutefi.attention import decode, launch

    monkeypatch.setattr(decode, "NARROW", False)
    monkeypatch.setattr(decode, "decode_build", lambda device, d, kv, full_batch=False: (4, 2))
    monkeypatch.setitem(launch.MMA_DECODE_SPECS, ("bf16", "fp8e4m3", 128, 4, False),
                        launch.MMA_DECODE_SOFTWARE_FP8_SPEC)
    run_decode([3000, 1, 77, 640], 16, kv_heads, 128, 16, torch.bfloat16, seed=kv_heads,
               kv_dtype=torch.float8_e4m3fn, k_scale=0.8, v_scale=3.0, cap=25.0)
