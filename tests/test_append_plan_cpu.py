"""CPU tier: the plans of append_paged_kv_cache and append_paged_mla_kv_cache, past a stubbed
device check: every kernel parameter passed once, each row set's width and strides (bytes) its
own, caches viewed as (page, entry, head), the grid over the wider set's pieces; and the MLA
op's clear refusals."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

import cutefi
from cutefi._plans import PlanCache
from cutefi.attention import api, launch, plan

I32 = torch.int32


class _Recorder:
    """Both builds' launches, in one list: (grid, params, by_rows)."""

    def __init__(self):
        self.calls = []

    def kernel(self, spec, device):
        return SimpleNamespace(contract=spec.launch_contract(),
                               launch=lambda grid, device, **params: self.calls.append(
                                   (grid, params, spec.option_dict["by_rows"])))

    @property
    def contract(self):
        return launch.append_contract()


@pytest.fixture
def recorder(monkeypatch):
    kernel = _Recorder()
    monkeypatch.setattr(plan, "require_cuda", lambda name, tensor: 0)
    monkeypatch.setattr(plan, "require_same_device", lambda *named: None)
    monkeypatch.setattr(plan, "get_kernel", kernel.kernel)
    monkeypatch.setattr(plan, "device_info", lambda device: SimpleNamespace(sms=132))
    monkeypatch.setattr(api, "_PLANS", PlanCache())  # (no plan of another test's kernel)
    return kernel


def _indices(nnz: int) -> tuple[torch.Tensor, ...]:
    return (torch.zeros(nnz, dtype=I32), torch.arange(nnz, dtype=I32), torch.arange(4, dtype=I32),
            torch.tensor([0, 4], dtype=I32), torch.tensor([nnz], dtype=I32))


def test_mla_rows_and_caches(recorder):
    latent = torch.randn(5, 576).to(torch.bfloat16)
    ckv_cache, kpe_cache = torch.zeros(4, 16, 512, dtype=torch.bfloat16), torch.zeros(4, 16, 64, dtype=torch.bfloat16)
    batch, positions, indices, indptr, last = _indices(5)
    cutefi.append_paged_mla_kv_cache(latent[:, :512], latent[:, 512:], batch, positions, ckv_cache, kpe_cache, indices,
                                     indptr, last)
    (grid, params, by_rows), = recorder.calls
    assert set(params) == {p.name for p in recorder.contract.params}
    assert by_rows and grid == (5, 1, 2)  # (a CTA per token and row set: the K rows' 64 pieces the wider)
    assert (params["k_row_chunks"], params["v_row_chunks"], params["token_pieces"], params["heads"]) == (64, 8, 72, 1)
    assert params["value"] == latent.data_ptr() + 1024 and params["key_stride_token"] == 1152
    assert (params["k_cache_stride_page"], params["k_cache_stride_entry"]) == (16 * 1024, 1024)
    assert (params["v_cache_stride_page"], params["v_cache_stride_entry"]) == (16 * 128, 128)


def test_k_and_v_caches_may_have_their_own_strides(recorder):
    key = torch.randn(5, 2, 64).to(torch.bfloat16)
    k_cache = torch.zeros(4, 16, 2, 64, dtype=torch.bfloat16)
    v_cache = torch.zeros(4, 2, 20, 64, dtype=torch.bfloat16)[:, :, :16].transpose(1, 2)  # (its own page stride)
    cutefi.append_paged_kv_cache(key, key * 2, *_indices(5)[:2], (k_cache, v_cache), *_indices(5)[2:])
    (grid, params, by_rows), = recorder.calls
    assert by_rows and grid == (5, 1, 2) and params["token_pieces"] == 32
    assert [params[f"k_cache_stride_{d}"] for d in ("page", "entry", "head")] == [4096, 256, 128]
    assert [params[f"v_cache_stride_{d}"] for d in ("page", "entry", "head")] == [2 * 20 * 128, 128, 20 * 128]


@pytest.mark.parametrize("pieces, per_cta", [
    (5 * 72, 128), (64 * 256, 128), (1056 * 128, 128), (1056 * 128 + 1, 256), (64 * 16 * 256, 256),
    (64 * 64 * 72, 384), (1056 * 384, 384), (1056 * 384 + 1, 512), (64 * 512 * 256, 512), (10 ** 9, 512)])
def test_pieces_per_cta(pieces, per_cta):
    """One piece a thread while the grid has at most 8 CTAs an SM (132 SMs: 1056 CTAs), then as
    many as keep it there (multiples of 128), at most 4 (a CTA of 512 pieces)."""
    assert launch.append_pieces_per_cta(pieces, 132) == per_cta


@pytest.mark.parametrize("nnz, heads, head_dim, by_rows", [
    (528, 8, 128, True), (529, 8, 128, False), (263, 3, 64, True), (132, 32, 128, True), (133, 32, 128, False),
    (8, 128, 512, True), (9, 128, 512, False)])
def test_by_rows_while_its_grid_fits_8_ctas_an_sm(recorder, nnz, heads, head_dim, by_rows):
    """The by-rows build while nnz x ceil(heads x row chunks / 128) x 2 <= 8 x 132 CTAs."""
    key = torch.randn(nnz, heads, head_dim).to(torch.bfloat16)
    cache = torch.zeros(4, 16, heads, head_dim, dtype=torch.bfloat16)
    cutefi.append_paged_kv_cache(key, key, *_indices(nnz)[:2], (cache, cache), *_indices(nnz)[2:])
    (grid, params, chosen), = recorder.calls
    assert chosen == by_rows
    if by_rows:
        assert grid == (nnz, -(-heads * head_dim * 2 // 16 // 128), 2)


def test_grid_covers_every_piece(recorder):
    key = torch.randn(5001, 1, 512).to(torch.bfloat16)
    cache = torch.zeros(313, 16, 1, 512, dtype=torch.bfloat16)
    indices = (torch.zeros(5001, dtype=I32), torch.arange(5001, dtype=I32), torch.arange(313, dtype=I32),
               torch.tensor([0, 313], dtype=I32), torch.tensor([9], dtype=I32))
    cutefi.append_paged_kv_cache(key, key, *indices[:2], (cache, cache), *indices[2:])
    (grid, params, by_rows), = recorder.calls
    assert not by_rows  # (by rows: 5001 x 1 x 2 CTAs, more than 8 an SM)
    assert params["token_pieces"] == 128 and params["pieces_per_cta"] == 512  # (640128 pieces / 1056 CTAs: 4.7)
    assert grid == (1251, 1, 1)  # (ceil(640128 / 512): the last CTA has one token's pieces)


@pytest.mark.parametrize("change, exc, pattern", [
    (dict(append_ckv=torch.randn(5, 2, 512)), ValueError, r"^append_ckv must be 2-D"),
    (dict(append_kpe=torch.randn(4, 64).to(torch.bfloat16)), ValueError,
     r"^append_kpe .* must have append_ckv's nnz"),
    (dict(kpe_cache=torch.zeros(4, 16, 32, dtype=torch.bfloat16)), ValueError,
     r"^kpe_cache must be \[pages, page_size, 64\]"),
    (dict(ckv_cache=torch.zeros(4, 16, 512, dtype=torch.float16)), TypeError, r"^ckv_cache dtype"),
    (dict(kpe_cache=torch.zeros(4, 8, 64, dtype=torch.bfloat16)), ValueError, r"must have the same pages and page size"),
    (dict(append_kpe=torch.randn(5, 4).to(torch.bfloat16), kpe_cache=torch.zeros(4, 16, 4, dtype=torch.bfloat16)),
     ValueError, r"multiple of 16 bytes"),
    (dict(positions=torch.arange(5.0)), TypeError, r"^positions must be int32"),
])
def test_mla_bad_arguments(change, exc, pattern):
    args = dict(append_ckv=torch.randn(5, 512).to(torch.bfloat16), append_kpe=torch.randn(5, 64).to(torch.bfloat16),
                batch_indices=torch.zeros(5, dtype=I32), positions=torch.arange(5, dtype=I32),
                ckv_cache=torch.zeros(4, 16, 512, dtype=torch.bfloat16),
                kpe_cache=torch.zeros(4, 16, 64, dtype=torch.bfloat16), kv_indices=torch.arange(4, dtype=I32),
                kv_indptr=torch.tensor([0, 4], dtype=I32), kv_last_page_len=torch.tensor([5], dtype=I32))
    args.update(change)
    with pytest.raises(exc, match=pattern):
        cutefi.append_paged_mla_kv_cache(**args)
