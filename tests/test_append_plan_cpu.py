"""CPU tier: the plans of append_paged_kv_cache and append_paged_mla_kv_cache, past a stubbed
device check: every kernel parameter passed once, each row set's width and strides (bytes) its
own, caches viewed as (page, entry, head), the grid over the wider set's pieces; and the MLA
op's clear refusals."""

from __future__ import annotations

import pytest
import torch

import cutefi
from cutefi._plans import PlanCache
from cutefi.attention import api, launch, plan

I32 = torch.int32


class _Recorder:
    def __init__(self):
        self.contract = launch.append_contract()
        self.calls = []

    def launch(self, grid, device, **params):
        self.calls.append((grid, params))


@pytest.fixture
def recorder(monkeypatch):
    kernel = _Recorder()
    monkeypatch.setattr(plan, "require_cuda", lambda name, tensor: 0)
    monkeypatch.setattr(plan, "require_same_device", lambda *named: None)
    monkeypatch.setattr(plan, "get_kernel", lambda spec, device: kernel)
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
    (grid, params), = recorder.calls
    assert set(params) == {p.name for p in recorder.contract.params}
    assert grid == (5, 1, 2)
    assert (params["k_row_chunks"], params["v_row_chunks"], params["row_pieces"], params["heads"]) == (64, 8, 64, 1)
    assert params["value"] == latent.data_ptr() + 1024 and params["key_stride_token"] == 1152
    assert (params["k_cache_stride_page"], params["k_cache_stride_entry"]) == (16 * 1024, 1024)
    assert (params["v_cache_stride_page"], params["v_cache_stride_entry"]) == (16 * 128, 128)


def test_k_and_v_caches_may_have_their_own_strides(recorder):
    key = torch.randn(5, 2, 64).to(torch.bfloat16)
    k_cache = torch.zeros(4, 16, 2, 64, dtype=torch.bfloat16)
    v_cache = torch.zeros(4, 2, 20, 64, dtype=torch.bfloat16)[:, :, :16].transpose(1, 2)  # (its own page stride)
    cutefi.append_paged_kv_cache(key, key * 2, *_indices(5)[:2], (k_cache, v_cache), *_indices(5)[2:])
    (grid, params), = recorder.calls
    assert grid == (5, 1, 2) and params["row_pieces"] == 16
    assert [params[f"k_cache_stride_{d}"] for d in ("page", "entry", "head")] == [4096, 256, 128]
    assert [params[f"v_cache_stride_{d}"] for d in ("page", "entry", "head")] == [2 * 20 * 128, 128, 20 * 128]


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
