"""GPU tier: append_paged_kv_cache against a reference written here (a loop over the appended
tokens into a copy of the cache), for both layouts, both cache forms, 16-bit and FP8 caches,
ragged batches, strided inputs and caches, out-of-range positions (nothing written) and CUDA graphs.
The caches start full of random bytes, so every element the reference leaves alone is checked too.
"""

from __future__ import annotations

import pytest
import torch

import cutefi

pytestmark = pytest.mark.gpu


def random_cache(pages, page_size, heads, head_dim, dtype, layout, fused):
    shape = (pages, page_size, heads, head_dim) if layout == "NHD" else (pages, heads, page_size, head_dim)
    if fused:
        raw = torch.randint(0, 255, (pages, 2, *shape[1:]), device="cuda", dtype=torch.uint8)
    else:
        raw = torch.randint(0, 255, (2, *shape), device="cuda", dtype=torch.uint8)
    raw = raw.view(torch.int8).float().div(16).to(dtype) if dtype.itemsize > 1 else raw.view(dtype)
    if fused:
        return raw, (raw[:, 0], raw[:, 1])
    return (raw[0], raw[1]), (raw[0], raw[1])


def batch(lengths_before, appended, page_size, pages_total, device="cuda"):
    """Pages for each request (lengths after the append), shuffled page ids; the index tensors."""
    lengths = [b + a for b, a in zip(lengths_before, appended)]
    pages = [-(-n // page_size) for n in lengths]
    order = torch.randperm(pages_total)[: sum(pages)].to(torch.int32)
    kv_indptr = torch.tensor([0] + list(torch.tensor(pages).cumsum(0).tolist()), dtype=torch.int32)
    last = torch.tensor([n - (p - 1) * page_size if p else 0 for n, p in zip(lengths, pages)], dtype=torch.int32)
    append_indptr = torch.tensor([0] + list(torch.tensor(appended).cumsum(0).tolist()), dtype=torch.int32)
    return (order.to(device), kv_indptr.to(device), last.to(device), append_indptr.to(device),
            torch.tensor(lengths, dtype=torch.int32, device=device))


def reference(k_cache, v_cache, key, value, batch_indices, positions, kv_indices, kv_indptr, page_size, layout):
    k_ref, v_ref = k_cache.clone(), v_cache.clone()
    for t, (b, p) in enumerate(zip(batch_indices.tolist(), positions.tolist())):
        slot = kv_indptr[b].item() + p // page_size
        if slot >= kv_indptr[b + 1].item():
            continue
        page, entry = kv_indices[slot].item(), p % page_size
        for ref, src in ((k_ref, key), (v_ref, value)):
            if layout == "NHD":
                ref[page, entry] = src[t]
            else:
                ref[page, :, entry] = src[t]
    return k_ref, v_ref


def same_bits(a, b):
    return torch.equal(a.contiguous().view(torch.uint8), b.contiguous().view(torch.uint8))


@pytest.mark.parametrize("layout", ["NHD", "HND"])
@pytest.mark.parametrize("fused", [False, True], ids=["pair", "5d"])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float8_e4m3fn])
@pytest.mark.parametrize("page_size, head_dim", [(1, 128), (16, 64), (16, 128), (32, 256)])
def test_append(layout, fused, dtype, page_size, head_dim):
    torch.manual_seed(page_size + head_dim)
    heads = 4
    before, appended = [0, 5, 17, 31, 3], [7, 1, 0, 33, 16]  # a request appending nothing; page crossings
    kv_indices, kv_indptr, last, append_indptr, lengths = batch(before, appended, page_size, 200)
    cache, (k_cache, v_cache) = random_cache(200, page_size, heads, head_dim, dtype, layout, fused)
    nnz = sum(appended)
    key = torch.randn(nnz, heads, head_dim, device="cuda").to(dtype)
    value = torch.randn(nnz, heads, head_dim, device="cuda").to(dtype)
    batch_indices, positions = cutefi.get_batch_indices_positions(append_indptr, lengths, nnz)
    k_ref, v_ref = reference(k_cache, v_cache, key, value, batch_indices, positions, kv_indices, kv_indptr,
                             page_size, layout)
    assert cutefi.append_paged_kv_cache(key, value, batch_indices, positions, cache, kv_indices, kv_indptr, last,
                                        kv_layout=layout) is None
    assert same_bits(k_cache, k_ref) and same_bits(v_cache, v_ref)


def test_strided_inputs_and_caches():
    """K and V as slices of a fused qkv buffer (row stride 3x) and a cache whose pages are a slice
    of a bigger allocation (page stride larger than a page)."""
    torch.manual_seed(11)
    dtype, heads, head_dim, page_size = torch.bfloat16, 2, 128, 8
    qkv = torch.randn(20, 3 * heads, head_dim, device="cuda", dtype=dtype)
    key, value = qkv[:, heads:2 * heads], qkv[:, 2 * heads:]
    big = torch.randn(64, 2, page_size + 3, heads, head_dim, device="cuda").to(dtype)
    cache = big[:, :, :page_size]  # [pages, 2, page_size, heads, head_dim], page stride of 11 entries
    k_cache, v_cache = cache[:, 0], cache[:, 1]
    kv_indices, kv_indptr, last, append_indptr, lengths = batch([3, 9], [12, 8], page_size, 64)
    batch_indices, positions = cutefi.get_batch_indices_positions(append_indptr, lengths, 20)
    k_ref, v_ref = reference(k_cache, v_cache, key, value, batch_indices, positions, kv_indices, kv_indptr,
                             page_size, "NHD")
    untouched = big[:, :, page_size:].clone()
    cutefi.append_paged_kv_cache(key, value, batch_indices, positions, cache, kv_indices, kv_indptr, last)
    assert torch.equal(k_cache, k_ref) and torch.equal(v_cache, v_ref)
    assert torch.equal(big[:, :, page_size:], untouched)  # the entries between pages


def test_misaligned_appended_rows_go_through_copies():
    torch.manual_seed(12)
    dtype, heads, head_dim = torch.float16, 2, 64
    flat = torch.randn(5 * heads * head_dim + 1, device="cuda").to(dtype)
    key = flat[1:].view(5, heads, head_dim)  # 2 bytes past a 16-byte boundary
    value = torch.randn(5, heads, head_dim, device="cuda").to(dtype)
    (k_cache, v_cache), _ = random_cache(8, 4, heads, head_dim, dtype, "NHD", False)
    kv_indices, kv_indptr, last, append_indptr, lengths = batch([2], [5], 4, 8)
    batch_indices, positions = cutefi.get_batch_indices_positions(append_indptr, lengths, 5)
    k_ref, v_ref = reference(k_cache, v_cache, key, value, batch_indices, positions, kv_indices, kv_indptr, 4, "NHD")
    cutefi.append_paged_kv_cache(key, value, batch_indices, positions, (k_cache, v_cache), kv_indices, kv_indptr, last)
    assert torch.equal(k_cache, k_ref) and torch.equal(v_cache, v_ref)


def test_out_of_range_positions_and_pages_write_nothing():
    dtype, heads, head_dim, page_size = torch.bfloat16, 2, 64, 4
    (k_cache, v_cache), _ = random_cache(6, page_size, heads, head_dim, dtype, "NHD", False)
    before = (k_cache.clone(), v_cache.clone())
    kv_indices = torch.tensor([0, 1, 99, -1], device="cuda", dtype=torch.int32)  # two bad page ids
    kv_indptr = torch.tensor([0, 2, 4], device="cuda", dtype=torch.int32)
    last = torch.tensor([4, 4], device="cuda", dtype=torch.int32)
    batch_indices = torch.tensor([0, 0, 1, 1, 5, -1], device="cuda", dtype=torch.int32)  # bad requests
    positions = torch.tensor([8, -1, 0, 4, 0, 0], device="cuda", dtype=torch.int32)  # past its pages; negative
    key = torch.randn(6, heads, head_dim, device="cuda").to(dtype)
    cutefi.append_paged_kv_cache(key, key, batch_indices, positions, (k_cache, v_cache), kv_indices, kv_indptr, last)
    assert torch.equal(k_cache, before[0]) and torch.equal(v_cache, before[1])


def test_inside_a_cuda_graph():
    torch.manual_seed(13)
    dtype, heads, head_dim, page_size = torch.bfloat16, 8, 128, 16
    kv_indices, kv_indptr, last, append_indptr, lengths = batch([100, 7, 0], [1, 1, 1], page_size, 32)
    (k_cache, v_cache), _ = random_cache(32, page_size, heads, head_dim, dtype, "HND", False)
    key = torch.randn(3, heads, head_dim, device="cuda").to(dtype)
    value = torch.randn(3, heads, head_dim, device="cuda").to(dtype)
    batch_indices, positions = cutefi.get_batch_indices_positions(append_indptr, lengths, 3)
    args = (key, value, batch_indices, positions, (k_cache, v_cache), kv_indices, kv_indptr, last, "HND")
    cutefi.append_paged_kv_cache(*args)  # load the kernel outside the capture
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        cutefi.append_paged_kv_cache(*args)
    k_cache.copy_(torch.randn_like(k_cache))  # fresh contents: the replay must write the tokens again
    v_cache.copy_(torch.randn_like(v_cache))
    k_ref, v_ref = reference(k_cache, v_cache, key, value, batch_indices, positions, kv_indices, kv_indptr,
                             page_size, "HND")
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(k_cache, k_ref) and torch.equal(v_cache, v_ref)


def test_bad_inputs_are_refused_clearly():
    key = torch.randn(3, 2, 64, device="cuda", dtype=torch.bfloat16)
    i32 = dict(device="cuda", dtype=torch.int32)
    cache = torch.zeros(4, 2, 4, 2, 64, device="cuda", dtype=torch.bfloat16)
    good = dict(append_key=key, append_value=key, batch_indices=torch.zeros(3, **i32),
                positions=torch.arange(3, **i32), paged_kv_cache=cache, kv_indices=torch.arange(4, **i32),
                kv_indptr=torch.tensor([0, 4], **i32), kv_last_page_len=torch.tensor([3], **i32))
    cases = [
        (dict(kv_layout="NDH"), ValueError, "kv_layout must be 'NHD' or 'HND'"),
        (dict(append_value=key.half()), ValueError, "append_value .* must match append_key"),
        (dict(paged_kv_cache=cache.half()), TypeError, "k_cache dtype torch.float16 must match"),
        (dict(paged_kv_cache=cache[..., :1, :]), ValueError, "must hold 2 heads of head_dim 64"),
        (dict(paged_kv_cache=[cache[:, 0]]), TypeError, "paged_kv_cache must be a \\(k_cache, v_cache\\) pair"),
        (dict(positions=torch.arange(3, device="cuda", dtype=torch.int16)), TypeError, "positions must be int32"),
        (dict(kv_last_page_len=torch.tensor([3, 3], **i32)), ValueError, "kv_last_page_len must be 1-D \\[1\\]"),
        (dict(kv_indptr=torch.tensor([0, 4], dtype=torch.int32)), ValueError, "one device"),
    ]
    for change, exc, pattern in cases:
        with pytest.raises(exc, match=pattern):
            cutefi.append_paged_kv_cache(**{**good, **change})


@pytest.mark.parametrize("layout", ["NHD", "HND"])
@pytest.mark.parametrize("fused", [False, True], ids=["pair", "4d"])
def test_token_cache_and_int64_indices(layout, fused):
    """SGLang's token-granular cache (page size 1, no page dimension: a (k, v) pair of 3-D
    [slots, heads, head_dim] or one [slots, 2, heads, head_dim]) and int64 index tensors, which
    FlashInfer converts to int32."""
    torch.manual_seed(3)
    dtype, heads, head_dim = torch.bfloat16, 4, 128
    before, appended = [0, 5, 31], [7, 1, 33]
    kv_indices, kv_indptr, last, append_indptr, lengths = batch(before, appended, 1, 120)
    cache, (k_cache, v_cache) = random_cache(120, 1, heads, head_dim, dtype, layout, fused)
    page_dim = 1 if layout == "NHD" else 2  # (of the 4-D k_cache / v_cache)
    given = cache.squeeze(page_dim + 1) if fused else tuple(c.squeeze(page_dim) for c in cache)
    nnz = sum(appended)
    key = torch.randn(nnz, heads, head_dim, device="cuda").to(dtype)
    value = torch.randn(nnz, heads, head_dim, device="cuda").to(dtype)
    batch_indices, positions = cutefi.get_batch_indices_positions(append_indptr, lengths, nnz)
    k_ref, v_ref = reference(k_cache, v_cache, key, value, batch_indices, positions, kv_indices, kv_indptr, 1, layout)
    long = [t.long() for t in (batch_indices, positions, kv_indices, kv_indptr, last)]
    cutefi.append_paged_kv_cache(key, value, long[0], long[1], given, *long[2:], kv_layout=layout)
    assert same_bits(k_cache, k_ref) and same_bits(v_cache, v_ref)


def random_rows_cache(pages, page_size, dim, dtype):
    raw = torch.randint(0, 255, (pages, page_size, dim), device="cuda", dtype=torch.uint8)
    return raw.view(torch.int8).float().div(16).to(dtype) if dtype.itemsize > 1 else raw.view(dtype)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float8_e4m3fn])
@pytest.mark.parametrize("page_size", [1, 16, 64])
def test_append_mla(dtype, page_size):
    """append_paged_mla_kv_cache: the compressed kv (512) and rope (64) rows as the two halves of
    one latent buffer [nnz, 576] (as SGLang slices it) into ckv_cache / kpe_cache; int64 indices
    for one call; a token past its pages and a padding token write nothing."""
    torch.manual_seed(page_size)
    before, appended = [0, 5, 63, 200], [9, 1, 70, 1]
    kv_indices, kv_indptr, last, append_indptr, lengths = batch(before, appended, page_size, 400)
    ckv_cache, kpe_cache = random_rows_cache(400, page_size, 512, dtype), random_rows_cache(400, page_size, 64, dtype)
    nnz = sum(appended)
    latent = torch.randn(nnz, 576, device="cuda").to(dtype)
    ckv, kpe = latent[:, :512], latent[:, 512:]
    batch_indices, positions = cutefi.get_batch_indices_positions(append_indptr, lengths, nnz)
    batch_indices[3] = -1  # (padding)
    positions[4] += 10_000  # (past its request's pages)
    keep = [t for t in range(nnz) if t != 3]  # (the reference skips token 4 itself: its slot is past the pages)
    ckv_ref, kpe_ref = reference(ckv_cache, kpe_cache, ckv[keep], kpe[keep], batch_indices[keep], positions[keep],
                                 kv_indices, kv_indptr, page_size, "NHD")
    indices = [t.long() for t in (batch_indices, positions, kv_indices, kv_indptr, last)] if page_size == 16 else \
        [batch_indices, positions, kv_indices, kv_indptr, last]
    assert cutefi.append_paged_mla_kv_cache(ckv, kpe, indices[0], indices[1], ckv_cache, kpe_cache,
                                            *indices[2:]) is None
    assert same_bits(ckv_cache, ckv_ref) and same_bits(kpe_cache, kpe_ref)


def test_append_caches_with_their_own_strides():
    """K and V caches allocated apart with different page strides (the plan no longer asks one
    layout of both), and MLA inside a CUDA graph."""
    torch.manual_seed(14)
    dtype, heads, head_dim, page_size = torch.bfloat16, 2, 128, 16
    k_big = torch.randn(40, page_size + 5, heads, head_dim, device="cuda").to(dtype)
    k_cache, v_cache = k_big[:, :page_size], torch.randn(40, page_size, heads, head_dim, device="cuda").to(dtype)
    kv_indices, kv_indptr, last, append_indptr, lengths = batch([3, 30], [20, 2], page_size, 40)
    key = torch.randn(22, heads, head_dim, device="cuda").to(dtype)
    value = torch.randn(22, heads, head_dim, device="cuda").to(dtype)
    batch_indices, positions = cutefi.get_batch_indices_positions(append_indptr, lengths, 22)
    k_ref, v_ref = reference(k_cache, v_cache, key, value, batch_indices, positions, kv_indices, kv_indptr,
                             page_size, "NHD")
    cutefi.append_paged_kv_cache(key, value, batch_indices, positions, (k_cache, v_cache), kv_indices, kv_indptr, last)
    assert torch.equal(k_cache, k_ref) and torch.equal(v_cache, v_ref)

    ckv_cache, kpe_cache = random_rows_cache(40, page_size, 512, dtype), random_rows_cache(40, page_size, 64, dtype)
    ckv, kpe = torch.randn(22, 512, device="cuda").to(dtype), torch.randn(22, 64, device="cuda").to(dtype)
    args = (ckv, kpe, batch_indices, positions, ckv_cache, kpe_cache, kv_indices, kv_indptr, last)
    cutefi.append_paged_mla_kv_cache(*args)  # (loads the kernel outside the capture)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        cutefi.append_paged_mla_kv_cache(*args)
    ckv.copy_(torch.randn_like(ckv))
    ckv_ref, kpe_ref = reference(ckv_cache, kpe_cache, ckv, kpe, batch_indices, positions, kv_indices, kv_indptr,
                                 page_size, "NHD")
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(ckv_cache, ckv_ref) and torch.equal(kpe_cache, kpe_ref)


def slots_reference(k_cache, v_cache, key, value, batch_indices, positions, kv_indices, kv_indptr, page_size,
                    layout="NHD"):
    """The reference above without the per-token loop (NHD or HND pages, MLA rows): every token with
    a valid slot (request in range, position within its pages, page id in the cache) written there."""
    k_ref, v_ref = k_cache.clone(), v_cache.clone()
    b, p = batch_indices.long(), positions.long()
    batch = kv_indptr.numel() - 1
    request = b.clamp(0, batch - 1)
    slot = kv_indptr.long()[request] + p.div(page_size, rounding_mode="floor")
    valid = (b >= 0) & (b < batch) & (p >= 0) & (slot < kv_indptr.long()[request + 1])
    page = kv_indices.long()[slot.clamp(0, kv_indices.numel() - 1)]
    valid &= (page >= 0) & (page < k_cache.shape[0])
    rows = valid.nonzero().squeeze(1)
    for ref, src in ((k_ref, key), (v_ref, value)):
        ref, src = ref.view(torch.uint8), src.view(torch.uint8)  # (as bytes: FP8 index_put is not in every torch)
        if layout == "NHD":
            ref[page[rows], p[rows] % page_size] = src[rows]
        else:  # [pages, heads, page_size, head_dim]: the token's heads at its entry
            ref.permute(0, 2, 1, 3)[page[rows], p[rows] % page_size] = src[rows]
    return k_ref, v_ref


@pytest.mark.parametrize("form", ["gqa", "gqa-hnd-fp8", "mla"])
@pytest.mark.parametrize("nnz", [263, 4999, 13001, 40000])
def test_many_tokens_a_cta(form, nnz):
    """Thousands of tokens in ragged requests (on 132 SMs the CTAs take 128, 256 (GQA) or 384 (MLA),
    512 and 512 pieces: CTAs straddle tokens, and the last CTA is partial), K and V rows of
    different widths (MLA: 1024 and 128 bytes), HND pages of FP8 (a token's heads a page's stride
    apart, 64-byte FP8 rows), padding tokens and out-of-range positions among
    valid ones; checked against a vectorised reference."""
    mla, layout = form == "mla", "HND" if "hnd" in form else "NHD"
    dtype = torch.float8_e4m3fn if "fp8" in form else torch.bfloat16
    torch.manual_seed(nnz + len(form))
    page_size = 16
    cuts = sorted(torch.randint(1, nnz, (nnz // 300 + 1,)).tolist())
    appended = [end - start for start, end in zip([0] + cuts, cuts + [nnz])]  # (some requests may append 0)
    pages = nnz // page_size + len(appended) + 8
    kv_indices, kv_indptr, last, append_indptr, lengths_t = batch([0] * len(appended), appended, page_size, pages)
    if mla:
        k_cache = random_rows_cache(pages, page_size, 512, dtype)
        v_cache = random_rows_cache(pages, page_size, 64, dtype)
        key, value = torch.randn(nnz, 512, device="cuda").to(dtype), torch.randn(nnz, 64, device="cuda").to(dtype)
    else:
        (k_cache, v_cache), _ = random_cache(pages, page_size, 3, 64, dtype, layout, False)
        key, value = (torch.randn(nnz, 3, 64, device="cuda").to(dtype) for _ in "kv")
    batch_indices, positions = cutefi.get_batch_indices_positions(append_indptr, lengths_t, nnz)
    batch_indices[::37] = -1  # padding
    positions[5::41] += 100_000  # past their pages
    k_ref, v_ref = slots_reference(k_cache, v_cache, key, value, batch_indices, positions, kv_indices, kv_indptr,
                                   page_size, layout)
    if mla:
        cutefi.append_paged_mla_kv_cache(key, value, batch_indices, positions, k_cache, v_cache, kv_indices,
                                         kv_indptr, last)
    else:
        cutefi.append_paged_kv_cache(key, value, batch_indices, positions, (k_cache, v_cache), kv_indices, kv_indptr,
                                     last, kv_layout=layout)
    assert same_bits(k_cache, k_ref) and same_bits(v_cache, v_ref)
