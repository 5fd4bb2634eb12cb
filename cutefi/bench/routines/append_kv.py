"""append_paged_kv_cache routine (memory bound): decode-style appends (one token a request) or
prefill-style chunks into an NHD paged cache. Bytes: read the appended K and V, write them."""

from __future__ import annotations

from typing import Any

import torch

import cutefi

from .base import Backend, Cost, Routine, ShapeFlag, compiled, flashinfer_module, randn

PAGE_SIZE = 16


def _torch_append(key, value, batch_indices, positions, paged_kv_cache, kv_indices, kv_indptr, kv_last_page_len):
    """The append as a server would write it in torch: page and entry of each token, then an
    indexed copy into each cache (every index in range here)."""
    k_cache, v_cache = paged_kv_cache[:, 0], paged_kv_cache[:, 1]
    page = kv_indices[kv_indptr[batch_indices] + positions // PAGE_SIZE].long()
    entry = (positions % PAGE_SIZE).long()
    k_cache[page, entry] = key
    v_cache[page, entry] = value


def _request_pages(requests: int, tokens: int, page_size: int) -> tuple[torch.Tensor, ...]:
    """kv_indices (shuffled pages), kv_indptr, kv_last_page_len, batch_indices, positions: each
    request holds 100 tokens and appends ``tokens``."""
    pages_each = -(-(tokens + 100) // page_size)  # 100 tokens already there
    pages = requests * pages_each
    kv_indices = torch.randperm(pages, device="cuda").to(torch.int32)
    kv_indptr = torch.arange(0, pages + 1, pages_each, device="cuda", dtype=torch.int32)
    lengths = torch.full((requests,), tokens + 100, device="cuda", dtype=torch.int32)
    last = lengths - (pages_each - 1) * page_size
    append_indptr = torch.arange(0, requests * tokens + 1, tokens, device="cuda", dtype=torch.int32)
    batch_indices, positions = cutefi.get_batch_indices_positions(append_indptr, lengths, requests * tokens)
    return kv_indices, kv_indptr, last, batch_indices, positions


class AppendPagedKvCache(Routine):
    name = "append_paged_kv_cache"
    help = "append_paged_kv_cache: tokens_per_request new K/V rows a request into an NHD paged cache (page 16)"
    optional_backends = ("flashinfer",)
    flags = (
        ShapeFlag("requests", (1, 64, 256), (64,), "requests (batch)"),
        ShapeFlag("tokens_per_request", (1, 512), (1, 512), "appended tokens a request (1: decode)"),
        ShapeFlag("kv_heads", (8,), (8,), "KV heads"),
        ShapeFlag("head_dim", (128,), (128,), "head dimension", minimum=8),
    )
    atol = 0.0
    rtol = 0.0

    def backends(self) -> dict[str, Backend]:
        found: dict[str, Backend] = {"cutefi": self._returning(cutefi.append_paged_kv_cache),
                                     "torch": self._returning(_torch_append),
                                     "torch.compile": self._returning(compiled(_torch_append))}
        flashinfer = flashinfer_module()
        if flashinfer is not None:
            found["flashinfer"] = self._returning(flashinfer.append_paged_kv_cache)
        return found

    @staticmethod
    def _returning(fn):
        def call(*inputs):
            fn(*inputs)
            cache = inputs[4]
            return cache[:, 0], cache[:, 1]

        return call

    def make_inputs(self, shape: dict[str, int], dtype: torch.dtype) -> tuple[Any, ...]:
        requests, tokens = shape["requests"], shape["tokens_per_request"]
        heads, head_dim = shape["kv_heads"], shape["head_dim"]
        kv_indices, kv_indptr, last, batch_indices, positions = _request_pages(requests, tokens, PAGE_SIZE)
        pages = kv_indices.numel()
        cache = torch.zeros(pages, 2, PAGE_SIZE, heads, head_dim, device="cuda", dtype=dtype)
        key = randn(requests * tokens, heads, head_dim, dtype=dtype)
        value = randn(requests * tokens, heads, head_dim, dtype=dtype)
        return key, value, batch_indices, positions, cache, kv_indices, kv_indptr, last

    def reference(self, inputs: tuple[Any, ...], shape: dict[str, int]) -> tuple[torch.Tensor, ...]:
        key, value, batch_indices, positions, cache, kv_indices, kv_indptr, _ = inputs
        expected = torch.zeros_like(cache, dtype=torch.float32)
        page = kv_indices[kv_indptr[batch_indices.long()] + positions // PAGE_SIZE].long()
        entry = (positions % PAGE_SIZE).long()
        expected[page, 0, entry] = key.float()
        expected[page, 1, entry] = value.float()
        return expected[:, 0], expected[:, 1]

    def cost(self, shape: dict[str, int], dtype: torch.dtype) -> Cost:
        elem = torch.empty((), dtype=dtype).element_size()
        rows = shape["requests"] * shape["tokens_per_request"] * shape["kv_heads"]
        return Cost(bytes=2 * 2 * rows * shape["head_dim"] * elem)


CKV, KPE = 512, 64  # DeepSeek's compressed kv and rope widths


def _torch_append_mla(ckv, kpe, batch_indices, positions, ckv_cache, kpe_cache, kv_indices, kv_indptr, last):
    page_size = ckv_cache.shape[1]
    page = kv_indices[kv_indptr[batch_indices] + positions // page_size].long()
    entry = (positions % page_size).long()
    ckv_cache[page, entry] = ckv
    kpe_cache[page, entry] = kpe


class AppendPagedMlaKvCache(Routine):
    name = "append_paged_mla_kv_cache"
    help = ("append_paged_mla_kv_cache: tokens_per_request new MLA rows a request (compressed kv 512 and rope 64, "
            "halves of one latent buffer) into ckv / kpe caches")
    optional_backends = ("flashinfer",)
    flags = (
        ShapeFlag("requests", (1, 64, 256), (64,), "requests (batch)"),
        ShapeFlag("tokens_per_request", (1, 512), (1, 512), "appended tokens a request (1: decode)"),
        ShapeFlag("page_size", (1, 64), (1,), "entries a page (SGLang's FlashInfer MLA: 1)"),
    )
    atol = 0.0
    rtol = 0.0

    def backends(self) -> dict[str, Backend]:
        found: dict[str, Backend] = {"cutefi": self._returning(cutefi.append_paged_mla_kv_cache),
                                     "torch": self._returning(_torch_append_mla),
                                     "torch.compile": self._returning(compiled(_torch_append_mla))}
        flashinfer = flashinfer_module()
        function = getattr(flashinfer, "append_paged_mla_kv_cache", None) if flashinfer else None
        if function is not None:
            found["flashinfer"] = self._returning(function)
        return found

    @staticmethod
    def _returning(fn):
        def call(*inputs):
            fn(*inputs)
            return inputs[4], inputs[5]

        return call

    def make_inputs(self, shape: dict[str, int], dtype: torch.dtype) -> tuple[Any, ...]:
        requests, tokens, page_size = shape["requests"], shape["tokens_per_request"], shape["page_size"]
        kv_indices, kv_indptr, last, batch_indices, positions = _request_pages(requests, tokens, page_size)
        pages = kv_indices.numel()
        latent = randn(requests * tokens, CKV + KPE, dtype=dtype)
        caches = [torch.zeros(pages, page_size, width, device="cuda", dtype=dtype) for width in (CKV, KPE)]
        return latent[:, :CKV], latent[:, CKV:], batch_indices, positions, *caches, kv_indices, kv_indptr, last

    def reference(self, inputs: tuple[Any, ...], shape: dict[str, int]) -> tuple[torch.Tensor, ...]:
        ckv, kpe, batch_indices, positions, ckv_cache, kpe_cache, kv_indices, kv_indptr, _ = inputs
        page_size = shape["page_size"]
        expected = [torch.zeros_like(c, dtype=torch.float32) for c in (ckv_cache, kpe_cache)]
        page = kv_indices[kv_indptr[batch_indices.long()] + positions // page_size].long()
        entry = (positions % page_size).long()
        expected[0][page, entry] = ckv.float()
        expected[1][page, entry] = kpe.float()
        return tuple(expected)

    def cost(self, shape: dict[str, int], dtype: torch.dtype) -> Cost:
        elem = torch.empty((), dtype=dtype).element_size()
        return Cost(bytes=2 * shape["requests"] * shape["tokens_per_request"] * (CKV + KPE) * elem)
