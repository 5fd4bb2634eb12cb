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
        pages_each = -(-(tokens + 100) // PAGE_SIZE)  # 100 tokens already there
        pages = requests * pages_each
        kv_indices = torch.randperm(pages, device="cuda").to(torch.int32)
        kv_indptr = torch.arange(0, pages + 1, pages_each, device="cuda", dtype=torch.int32)
        lengths = torch.full((requests,), tokens + 100, device="cuda", dtype=torch.int32)
        last = lengths - (pages_each - 1) * PAGE_SIZE
        append_indptr = torch.arange(0, requests * tokens + 1, tokens, device="cuda", dtype=torch.int32)
        batch_indices, positions = cutefi.get_batch_indices_positions(append_indptr, lengths, requests * tokens)
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
