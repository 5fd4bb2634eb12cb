"""GPU tier: rope_quantize_fp8_append_paged_kv_cache against a float64 reference written here:
q's parts rotated / passed through, times quant_scale_q, in FP8 (as test_gpu_rope_quant.py);
K (rotated part then the rest) and V times quant_scale_kv in FP8 at each token's page and
entry, found here from batch_indices / positions / kv_indptr / kv_indices in plain torch. The
q outputs and both caches are poisoned (NaN codes) first; every cache byte not at an appended
slot must keep its poison. GQA NHD / HND and MLA, page sizes 1 / 16 / 64, decode and prefill
batches, padding and out-of-range tokens, int64 indices, strided caches, CUDA graphs, PDL and
torch.compile."""

from __future__ import annotations

import pytest
import torch

import cutefi
from test_gpu_rope_quant import E4M3, E5M2, assert_fp8, poisoned, quantize, random_cache, rotate

pytestmark = pytest.mark.gpu
POISON = 0x7F


class Batch:
    """Requests with ``existing`` tokens already cached and ``appended`` new ones each, their
    pages shuffled through a pool with spare pages: what a server passes."""

    def __init__(self, existing: list[int], appended: list[int], page_size: int, seed: int):
        gen = torch.Generator().manual_seed(seed)
        self.page_size = page_size
        pages_each = [-(-(e + a) // page_size) for e, a in zip(existing, appended)]
        self.num_pages = sum(pages_each) + 5  # (pages no request owns: must stay poisoned)
        order = torch.randperm(self.num_pages, generator=gen)[: sum(pages_each)]
        self.kv_indices = order.to(torch.int32).cuda()
        self.kv_indptr = torch.tensor([0] + pages_each, dtype=torch.int32).cumsum(0).to(torch.int32).cuda()
        batch, pos = [], []
        for b, (e, a) in enumerate(zip(existing, appended)):
            batch += [b] * a
            pos += list(range(e, e + a))
        self.batch_indices = torch.tensor(batch, dtype=torch.int32).cuda()
        self.positions = torch.tensor(pos, dtype=torch.int32).cuda()
        self.nnz = len(batch)

    def slots(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(tokens with a valid slot, their pages, their entries), in plain torch."""
        b, p = self.batch_indices.long(), self.positions.long()
        valid = b >= 0
        slot = torch.where(valid, self.kv_indptr.long()[b.clamp(min=0)] + p // self.page_size, 0)
        valid &= slot < self.kv_indptr.long()[(b + 1).clamp(min=0, max=self.kv_indptr.numel() - 1)]
        tokens = valid.nonzero().squeeze(1)
        pages = self.kv_indices.long()[slot[tokens]]
        return tokens, pages, p[tokens] % self.page_size


def place(expected: torch.Tensor, rows: torch.Tensor, batch: Batch, layout: str) -> torch.Tensor:
    """``expected`` (a float64 cache of NaN) with ``rows`` [nnz, (heads,) dim] at their slots;
    returns the mask of written elements."""
    tokens, pages, entries = batch.slots()
    written = torch.zeros(expected.shape, dtype=torch.bool, device="cuda")
    if layout == "HND":  # [pages, heads, page_size, dim]
        expected[pages, :, entries] = rows[tokens]
        written[pages, :, entries] = True
    else:
        expected[pages, entries] = rows[tokens]
        written[pages, entries] = True
    return written


def assert_cache(got: torch.Tensor, expected: torch.Tensor, written: torch.Tensor) -> None:
    assert (got.view(torch.uint8)[~written] == POISON).all(), "a cache byte outside the appended slots changed"
    assert_fp8(got[written], expected[written].to(got.dtype))


def gqa_call(batch: Batch, heads: int, kv_heads: int, rope_dim: int, nope_dim: int, layout: str, interleave: bool,
             dtype: torch.dtype, in_dtype: torch.dtype, seed: int, cache_views=None, **kw):
    torch.manual_seed(seed)
    nnz, head_dim = batch.nnz, rope_dim + nope_dim
    q = torch.randn(nnz, heads, head_dim, device="cuda", dtype=in_dtype)
    k = torch.randn(nnz, kv_heads, head_dim, device="cuda", dtype=in_dtype)
    v = torch.randn(nnz, kv_heads, head_dim, device="cuda", dtype=in_dtype)
    cos_sin = random_cache(4096, rope_dim)
    pos_ids = torch.randint(0, 4096, (nnz,), device="cuda")
    shape = (batch.num_pages, batch.page_size, kv_heads, head_dim) if layout == "NHD" else \
        (batch.num_pages, kv_heads, batch.page_size, head_dim)
    k_cache, v_cache = cache_views(shape, dtype) if cache_views else (poisoned(shape, dtype), poisoned(shape, dtype))
    q_nope = q[..., rope_dim:] if nope_dim else None
    k_nope = k[..., rope_dim:] if nope_dim else None
    q_rope_out = poisoned((nnz, heads, rope_dim), dtype)
    q_nope_out = poisoned((nnz, heads, nope_dim), dtype)
    got = cutefi.rope_quantize_fp8_append_paged_kv_cache(
        q[..., :rope_dim], k[..., :rope_dim], q_nope, k_nope, v, cos_sin, pos_ids, (k_cache, v_cache),
        batch.kv_indices, batch.kv_indptr, batch.batch_indices, batch.positions, is_neox=not interleave,
        quant_scale_q=0.5, quant_scale_kv=2.0, page_size=batch.page_size, kv_layout=layout, q_rope_out=q_rope_out,
        q_nope_out=q_nope_out, **kw)
    assert got[0] is q_rope_out and got[1] is q_nope_out
    assert_fp8(q_rope_out, quantize(rotate(q[..., :rope_dim], cos_sin, pos_ids, interleave), 0.5, dtype))
    if nope_dim:
        assert_fp8(q_nope_out, quantize(q[..., rope_dim:].double(), 0.5, dtype))
    k_rows = torch.cat([rotate(k[..., :rope_dim], cos_sin, pos_ids, interleave), k[..., rope_dim:].double()], -1)
    for cache, rows in ((k_cache, k_rows), (v_cache, v.double())):
        expected = torch.full(cache.shape, float("nan"), dtype=torch.float64, device="cuda")
        written = place(expected, quantize(rows, 2.0, dtype).double(), batch, layout)
        assert_cache(cache, expected, written)
    return k_cache, v_cache


@pytest.mark.parametrize("layout", ["NHD", "HND"])
@pytest.mark.parametrize("interleave", [False, True], ids=["neox", "gptj"])
@pytest.mark.parametrize("dtype", [E4M3, E5M2], ids=["e4m3", "e5m2"])
@pytest.mark.parametrize("in_dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
def test_gqa_decode(layout, interleave, dtype, in_dtype):
    """One new token a request (decode), 32 / 8 heads, a 64-of-128 rotary split, page 16,
    lengths ending mid-page and on a page boundary."""
    batch = Batch([0, 15, 16, 100, 2047], [1] * 5, 16, seed=1)
    gqa_call(batch, 32, 8, 64, 64, layout, interleave, dtype, in_dtype, seed=2)


@pytest.mark.parametrize("page_size", [1, 16, 64])
@pytest.mark.parametrize("layout", ["NHD", "HND"])
def test_gqa_prefill_chunks(page_size, layout):
    """Prefill / chunked prefill: 1 ... 300 tokens a request after 0 ... 70 cached; full
    rotary head (no nope parts), MHA (8 / 8 heads)."""
    batch = Batch([0, 70, 3, 0], [300, 1, 129, 17], page_size, seed=page_size)
    gqa_call(batch, 8, 8, 128, 0, layout, False, E4M3, torch.bfloat16, seed=3)


def test_gqa_head_dim_256_and_pdl():
    """head_dim 256 (rotary 64 + 192), 16 / 2 heads, with PDL on and off: identical bytes."""
    batch = Batch([5, 40], [33, 64], 16, seed=4)
    caches = [gqa_call(batch, 16, 2, 64, 192, "NHD", False, E4M3, torch.bfloat16, seed=5, enable_pdl=pdl)
              for pdl in (False, True)]
    for a, b in zip(*caches):
        assert torch.equal(a.view(torch.uint8), b.view(torch.uint8))


def test_strided_caches_from_one_buffer():
    """(k_cache, v_cache) as views of one [pages, 2, page_size, heads, dim] buffer (strided
    pages), the layout FlashInfer's other kernels use."""
    def views(shape, dtype):
        whole = poisoned((shape[0], 2, *shape[1:]), dtype)
        return whole[:, 0], whole[:, 1]

    batch = Batch([10, 0, 31], [7, 1, 40], 16, seed=6)
    gqa_call(batch, 32, 8, 64, 64, "NHD", True, E4M3, torch.bfloat16, seed=7, cache_views=views)


def test_padding_and_out_of_range_tokens_write_no_kv():
    """batch index -1 (padding), a position past the request's pages, a page id outside the
    cache: no K/V written for them (the reference's slots() skips the first two; the third is
    checked by the poison), q still written for every token."""
    batch = Batch([0, 20], [3, 3], 16, seed=8)
    batch.batch_indices[1] = -1
    batch.positions[4] = 10_000  # request 1 owns 2 pages: slot past its indptr range
    batch.kv_indices[batch.kv_indptr[1] + 1] = batch.num_pages + 3  # the page of request 1's tokens 20, 22
    tokens, pages, _ = batch.slots()
    keep = pages < batch.num_pages
    real_slots = batch.slots

    def in_range_slots():
        return tokens[keep], pages[keep], real_slots()[2][keep]

    batch.slots = in_range_slots
    gqa_call(batch, 4, 2, 64, 64, "NHD", False, E4M3, torch.bfloat16, seed=9)


@pytest.mark.parametrize("interleave", [False, True], ids=["neox", "gptj"])
@pytest.mark.parametrize("dtype", [E4M3, E5M2], ids=["e4m3", "e5m2"])
def test_mla(interleave, dtype):
    """DeepSeek MLA: q [nnz, 128, 576] split (512 nope, 64 rope), the latent k [nnz, 512] into
    ckv_cache [pages, 64, 512] and its rope part [nnz, 64] into kpe_cache; int64 indices
    (converted) and pos_ids."""
    torch.manual_seed(10)
    batch = Batch([0, 63, 64, 500], [1, 1, 70, 1], 64, seed=11)
    nnz = batch.nnz
    q = torch.randn(nnz, 128, 576, device="cuda", dtype=torch.bfloat16)
    k_nope = torch.randn(nnz, 512, device="cuda", dtype=torch.bfloat16)
    k_rope = torch.randn(nnz, 64, device="cuda", dtype=torch.bfloat16)
    cos_sin, pos_ids = random_cache(8192, 64), torch.randint(0, 8192, (nnz,), device="cuda")
    ckv, kpe = poisoned((batch.num_pages, 64, 512), dtype), poisoned((batch.num_pages, 64, 64), dtype)
    q_rope_out, q_nope_out = cutefi.rope_quantize_fp8_append_paged_kv_cache(
        q[..., 512:], k_rope, q[..., :512], k_nope, None, cos_sin, pos_ids, (ckv, kpe), batch.kv_indices.long(),
        batch.kv_indptr.long(), batch.batch_indices.long(), batch.positions.long(), is_neox=not interleave,
        quant_scale_q=1.0, quant_scale_kv=0.7, page_size=64)
    assert q_rope_out.dtype == dtype  # (taken from the caches)
    assert_fp8(q_rope_out, quantize(rotate(q[..., 512:], cos_sin, pos_ids, interleave), 1.0, dtype))
    assert_fp8(q_nope_out, quantize(q[..., :512].double(), 1.0, dtype))
    for cache, rows in ((ckv, k_nope.double()), (kpe, rotate(k_rope, cos_sin, pos_ids, interleave))):
        expected = torch.full(cache.shape, float("nan"), dtype=torch.float64, device="cuda")
        written = place(expected, quantize(rows, 0.7, dtype).double(), batch, "NHD")
        assert_cache(cache, expected, written)


def test_saturation():
    """Values past the format's range saturate to its largest finite value in q and the caches."""
    batch = Batch([0], [4], 16, seed=12)
    q = torch.full((4, 2, 64), 3000.0, device="cuda", dtype=torch.bfloat16)
    k = -q[:, :1].clone()
    v = q[:, :1].clone()
    cos_sin = torch.cat([torch.ones(8, 16), torch.zeros(8, 16)], -1).cuda()  # (angle 0: no rotation)
    k_cache, v_cache = poisoned((batch.num_pages, 16, 1, 64), E4M3), poisoned((batch.num_pages, 16, 1, 64), E4M3)
    q8, _ = cutefi.rope_quantize_fp8_append_paged_kv_cache(
        q[..., :32], k[..., :32], q[..., 32:], k[..., 32:], v, cos_sin, torch.zeros(4, dtype=torch.int32,
                                                                                    device="cuda"),
        (k_cache, v_cache), batch.kv_indices, batch.kv_indptr, batch.batch_indices, batch.positions)
    assert (q8.float() == 448.0).all()
    page = batch.kv_indices[0].long()
    assert (k_cache[page, :4].float() == -448.0).all() and (v_cache[page, :4].float() == 448.0).all()


def test_cuda_graph_replay_with_new_tokens():
    """Captured once, replayed after the inputs and slots changed in place."""
    batch = Batch([3, 50], [1, 1], 16, seed=13)
    torch.manual_seed(14)
    q, k, v = (torch.randn(2, h, 128, device="cuda", dtype=torch.bfloat16) for h in (8, 2, 2))
    cos_sin, pos_ids = random_cache(256, 64), torch.tensor([3, 50], device="cuda", dtype=torch.int32)
    k_cache, v_cache = poisoned((batch.num_pages, 16, 2, 128), E4M3), poisoned((batch.num_pages, 16, 2, 128), E4M3)
    q_rope_out, q_nope_out = poisoned((2, 8, 64), E4M3), poisoned((2, 8, 64), E4M3)

    def call():
        cutefi.rope_quantize_fp8_append_paged_kv_cache(
            q[..., :64], k[..., :64], q[..., 64:], k[..., 64:], v, cos_sin, pos_ids, (k_cache, v_cache),
            batch.kv_indices, batch.kv_indptr, batch.batch_indices, batch.positions, q_rope_out=q_rope_out,
            q_nope_out=q_nope_out)

    call()  # (plans and loads outside the capture)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        call()
    k_cache.view(torch.uint8).fill_(POISON)
    v_cache.view(torch.uint8).fill_(POISON)
    for t in (q, k, v):
        t.copy_(torch.randn_like(t))
    batch.positions.add_(1)
    pos_ids.add_(1)
    graph.replay()
    torch.cuda.synchronize()
    assert_fp8(q_rope_out, quantize(rotate(q[..., :64], cos_sin, pos_ids, False), 1.0, E4M3))
    k_rows = torch.cat([rotate(k[..., :64], cos_sin, pos_ids, False), k[..., 64:].double()], -1)
    for cache, rows in ((k_cache, k_rows), (v_cache, v.double())):
        expected = torch.full(cache.shape, float("nan"), dtype=torch.float64, device="cuda")
        assert_cache(cache, expected, place(expected, quantize(rows, 1.0, E4M3).double(), batch, "NHD"))


def test_torch_compile_fullgraph_matches_eager():
    batch = Batch([7, 0], [2, 5], 16, seed=15)
    torch.manual_seed(16)
    q, k, v = (torch.randn(7, h, 128, device="cuda", dtype=torch.bfloat16) for h in (8, 2, 2))
    cos_sin, pos_ids = random_cache(64, 64), torch.randint(0, 64, (7,), device="cuda")

    def step(q, k, v, k_cache, v_cache):
        q8, qn8 = cutefi.rope_quantize_fp8_append_paged_kv_cache(
            q[..., :64], k[..., :64], q[..., 64:], k[..., 64:], v, cos_sin, pos_ids, (k_cache, v_cache),
            batch.kv_indices, batch.kv_indptr, batch.batch_indices, batch.positions, quant_scale_kv=0.5)
        return q8.float() + qn8.float()  # (an op after it: the outputs flow on in the graph)

    results = []
    for fn in (step, torch.compile(step, fullgraph=True)):
        caches = [poisoned((batch.num_pages, 16, 2, 128), E4M3) for _ in range(2)]
        results.append((fn(q, k, v, *caches), *caches))
    for eager, compiled in zip(*results):
        assert torch.equal(eager.view(torch.uint8) if eager.dtype == E4M3 else eager,
                           compiled.view(torch.uint8) if compiled.dtype == E4M3 else compiled)
