"""Prefill attention routines (compute bound): many query tokens over a KV sequence.

``batch_prefill``: cutefi's BatchPrefillWithRaggedKVCacheWrapper over ``batch`` requests of
``seq_len`` queries and keys each (``ragged=1``: lengths uniform in [128, seq_len], seeded),
planned outside the timing; peers: torch's SDPA over the padded batch ``[batch, heads, seq_len,
head_dim]`` (cuDNN's kernel, FlashAttention-2's, and the one torch picks; ragged batches run
one SDPA call a request), and FlashInfer's wrapper when it imports. ``single_prefill``:
single_prefill_with_kv_cache, one request, against the same peers.

``head_dim_vo`` (0: ``head_dim``): V's and the output's head dim, e.g. 192 / 128 for
DeepSeek-style MLA prefill. ``kv_fp8=1`` (``=2``): cutefi's K/V hold float8_e4m3fn
(float8_e5m2) codes with k_scale and v_scale; the peers read the same values in q's type.

FLOPs: 2 * heads * (head_dim + head_dim_vo) per visible (query, key) pair, counting L^2 / 2
pairs for a causal square request (FlashAttention's and cuDNN's convention); bytes: q, k, v and
out once.
"""

from __future__ import annotations

from typing import Any

import torch

import cutefi

from .base import Backend, BenchInputError, Cost, Routine, ShapeFlag, check_attention_heads, flashinfer_module, randn


def _lengths(shape: dict[str, int]) -> list[int]:
    batch, seq_len = shape.get("batch", 1), shape["seq_len"]
    if not shape.get("ragged"):
        return [seq_len] * batch
    g = torch.Generator().manual_seed(batch * 7919 + seq_len)
    return torch.randint(min(128, seq_len), seq_len + 1, (batch,), generator=g).tolist()


_FP8 = (None, torch.float8_e4m3fn, torch.float8_e5m2)  # by the kv_fp8 flag


def _head_dim_vo(shape: dict[str, int]) -> int:
    return shape.get("head_dim_vo", 0) or shape["head_dim"]


def _indptr(lengths: list[int]) -> torch.Tensor:
    return torch.tensor([0, *torch.tensor(lengths).cumsum(0).tolist()], dtype=torch.int32)


def _paged_cache(k: torch.Tensor, v: torch.Tensor, lengths: list[int], page_size: int):
    """(cache [pages, 2, page_size, kv_heads, d], page indptr, page ids, last page lengths) holding
    each request's K/V rows in pages taken in a shuffled order."""
    pages_each = [-(-n // page_size) for n in lengths]
    order = torch.randperm(sum(pages_each), generator=torch.Generator().manual_seed(len(lengths)))
    cache = torch.zeros(sum(pages_each), 2, page_size, *k.shape[1:], device="cuda", dtype=k.dtype)
    first = start = 0
    for n, count in zip(lengths, pages_each):
        ids = order[first:first + count].cuda()
        for which, dense in ((0, k), (1, v)):
            rows = torch.zeros(count * page_size, *k.shape[1:], device="cuda", dtype=k.dtype)
            rows[:n] = dense[start:start + n]
            cache[ids, which] = rows.view(count, page_size, *k.shape[1:])
        first, start = first + count, start + n
    last = torch.tensor([(n - 1) % page_size + 1 for n in lengths], dtype=torch.int32)
    return cache, _indptr(pages_each), order.to(torch.int32).cuda(), last


def _sdpa(backend=None):
    """SDPA over each request (padded batch when lengths are equal): q/k/v [b, heads, L, d]."""
    def one(q, k, v, causal):
        if backend is None:
            return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=True)
        with torch.nn.attention.sdpa_kernel(backend):
            return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=True)

    def run(state, q, k, v):
        causal = state["causal"]
        if state["dense"] is not None:
            dq, dk, dv = state["dense"]
            return one(dq, dk, dv, causal).transpose(1, 2).reshape(*q.shape[:2], v.shape[2])
        outs = []
        for start, end in zip(state["indptr"][:-1].tolist(), state["indptr"][1:].tolist()):
            outs.append(one(q[start:end].transpose(0, 1)[None], k[start:end].transpose(0, 1)[None],
                            v[start:end].transpose(0, 1)[None], causal)[0].transpose(0, 1))
        return torch.cat(outs)

    return run


class BatchPrefill(Routine):
    name = "batch_prefill"
    help = "BatchPrefillWithRaggedKVCacheWrapper: batch x seq_len (q = kv), vs SDPA (cuDNN, FA2)"
    bound = "compute"
    optional_backends = ("flashinfer",)
    flags = (
        ShapeFlag("batch", (1, 4, 16), (4,), "requests"),
        ShapeFlag("seq_len", (1024, 4096, 8192, 16384), (4096,), "query and key tokens a request (the longest if ragged)"),
        ShapeFlag("qo_heads", (32,), (32,), "query heads"),
        ShapeFlag("kv_heads", (32,), (32,), "KV heads"),
        ShapeFlag("head_dim", (128,), (128,), "head dimension", minimum=64),
        ShapeFlag("causal", (1,), (1,), "1: causal mask, 0: none", minimum=0),
        ShapeFlag("ragged", (0,), (0,), "1: lengths uniform in [128, seq_len]", minimum=0),
        ShapeFlag("page_size", (0,), (0,), "0: contiguous K/V; 16, 32, 64: cutefi reads a paged cache (NHD, "
                  "pages shuffled) with BatchPrefillWithPagedKVCacheWrapper", minimum=0),
        ShapeFlag("head_dim_vo", (0,), (0,), "V's head dimension (0: head_dim; 128 with head_dim 192: MLA)",
                  minimum=0),
        ShapeFlag("kv_fp8", (0,), (0,), "1: float8_e4m3fn K/V for cutefi, 2: float8_e5m2 (0: q's type)", minimum=0),
    )

    def check_shape(self, shape: dict[str, int]) -> None:
        mla = (shape["head_dim"], _head_dim_vo(shape)) == (192, 128)
        check_attention_heads({**shape, "head_dim": 128} if mla else shape)
        if _head_dim_vo(shape) != shape["head_dim"] and not mla:
            raise BenchInputError("head_dim_vo must be 0 (head_dim), or 128 with head_dim 192 (MLA)")
        if shape.get("page_size", 0) not in (0, 16, 32, 64):
            raise BenchInputError("page_size must be 0 (contiguous K/V), 16, 32 or 64")
        if shape.get("kv_fp8", 0) not in range(len(_FP8)):
            raise BenchInputError("kv_fp8 must be 0, 1 (e4m3) or 2 (e5m2)")
        if mla and shape.get("page_size", 0):
            raise BenchInputError("head_dim_vo != head_dim (MLA) runs on contiguous K/V only (page_size 0)")

    def backends(self) -> dict[str, Backend]:
        sdpa = torch.nn.attention.SDPBackend
        found: dict[str, Backend] = {
            "cutefi": lambda state, q, k, v: state["cutefi"](q, k, v),
            "torch": _sdpa(),
            "cudnn": _sdpa([sdpa.CUDNN_ATTENTION]),
            "flash": _sdpa([sdpa.FLASH_ATTENTION]),
        }
        if flashinfer_module() is not None:
            found["flashinfer"] = lambda state, q, k, v: state["flashinfer"].run(q, k, v)
        return found

    def make_inputs(self, shape: dict[str, int], dtype: torch.dtype) -> tuple[Any, ...]:
        lengths = _lengths(shape)
        heads, kv_heads, d, d_vo = shape["qo_heads"], shape["kv_heads"], shape["head_dim"], _head_dim_vo(shape)
        total = sum(lengths)
        q = randn(total, heads, d, dtype=dtype)
        k = randn(total, kv_heads, d, dtype=dtype)
        v = randn(total, kv_heads, d_vo, dtype=dtype)
        kv_dtype = _FP8[shape.get("kv_fp8", 0)] or dtype
        scales: dict[str, float] = {}
        k_run, v_run = k, v  # (cutefi's K/V)
        if kv_dtype != dtype:  # the peers and the reference see the FP8 values (times the scales)
            scales = {"k_scale": 0.5, "v_scale": 0.25}
            k_run, v_run = (k * 2).to(kv_dtype), (v * 4).to(kv_dtype)
            k.copy_(k_run.to(dtype) * 0.5)
            v.copy_(v_run.to(dtype) * 0.25)
        indptr = _indptr(lengths)
        causal = bool(shape["causal"])
        dense = None
        if len(set(lengths)) == 1:  # the peers' padded batch: the same memory, [b, heads, L, d] views
            b, n = len(lengths), lengths[0]
            dense = tuple(t.view(b, n, *t.shape[1:]).transpose(1, 2) for t in (q, k, v))
        state: dict[str, Any] = {"indptr": indptr, "causal": causal, "dense": dense, "lengths": lengths}
        workspace = torch.empty(1 << 20, dtype=torch.uint8, device="cuda")
        page_size = shape.get("page_size", 0)
        if page_size:  # the same K/V in shuffled pages (FlashInfer's paged layout)
            wrapper = cutefi.BatchPrefillWithPagedKVCacheWrapper(workspace)
            codes = (k_run.view(torch.uint8), v_run.view(torch.uint8)) if kv_dtype != dtype else (k_run, v_run)
            cache, page_indptr, indices, last = _paged_cache(*codes, lengths, page_size)
            cache = cache.view(kv_dtype)  # (FP8 pages built as bytes: index_put takes no float8)
            wrapper.plan(indptr, page_indptr, indices, last, heads, kv_heads, d, page_size, causal=causal,
                         q_data_type=dtype, kv_data_type=kv_dtype)
            state["cutefi"] = lambda q, k, v: wrapper.run(q, cache, **scales)
        else:
            wrapper = cutefi.BatchPrefillWithRaggedKVCacheWrapper(workspace)
            wrapper.plan(indptr, indptr, heads, kv_heads, d, head_dim_vo=d_vo, causal=causal, q_data_type=dtype,
                         kv_data_type=kv_dtype)
            state["cutefi"] = lambda q, k, v: wrapper.run(q, k_run, v_run, **scales)
        flashinfer = flashinfer_module()
        if flashinfer is not None:
            fi = flashinfer.BatchPrefillWithRaggedKVCacheWrapper(torch.empty(256 << 20, dtype=torch.uint8,
                                                                             device="cuda"))
            fi.plan(indptr.cuda(), indptr.cuda(), heads, kv_heads, d, head_dim_vo=d_vo, causal=causal,
                    q_data_type=dtype)
            state["flashinfer"] = fi
        return state, q, k, v

    def reference(self, inputs: tuple[Any, ...], shape: dict[str, int]) -> tuple[torch.Tensor, ...]:
        """float32 attention a request and a few heads at a time (the scores of all heads of a
        16k request would not fit)."""
        state, q, k, v = inputs
        group = shape["qo_heads"] // shape["kv_heads"]
        out = torch.empty(*q.shape[:2], v.shape[2], device="cuda")
        scale = q.shape[-1] ** -0.5
        indptr = state["indptr"].tolist()
        for start, end in zip(indptr[:-1], indptr[1:]):
            n = end - start
            heads_at_once = max(1, (1 << 30) // (4 * n * n))
            visible = torch.ones(n, n, dtype=torch.bool, device="cuda")
            if state["causal"]:
                visible = torch.tril(visible)
            for h0 in range(0, q.shape[1], heads_at_once):
                h1 = min(q.shape[1], h0 + heads_at_once)
                qh = q[start:end, h0:h1].float().transpose(0, 1)
                kh = k[start:end].float().repeat_interleave(group, 1)[:, h0:h1].transpose(0, 1)
                vh = v[start:end].float().repeat_interleave(group, 1)[:, h0:h1].transpose(0, 1)
                s = (qh @ kh.transpose(1, 2) * scale).masked_fill(~visible, float("-inf"))
                out[start:end, h0:h1] = (torch.softmax(s, -1) @ vh).transpose(0, 1)
        return (out,)

    def cost(self, shape: dict[str, int], dtype: torch.dtype) -> Cost:
        elem = torch.empty((), dtype=dtype).element_size()
        lengths = _lengths(shape)
        pairs = sum(n * n for n in lengths) / (2 if shape["causal"] else 1)
        d, d_vo = shape["head_dim"], _head_dim_vo(shape)
        flops = int(2 * pairs * shape["qo_heads"] * (d + d_vo))
        tokens = sum(lengths)
        qo_bytes = tokens * shape["qo_heads"] * (d + d_vo) * elem
        kv_bytes = tokens * shape["kv_heads"] * (d + d_vo) * (1 if shape.get("kv_fp8") else elem)
        return Cost(bytes=qo_bytes + kv_bytes, flops=flops)


class SinglePrefill(BatchPrefill):
    name = "single_prefill"
    help = "single_prefill_with_kv_cache: one request of seq_len queries and keys (NHD), vs SDPA (cuDNN, FA2)"
    optional_backends = ("flashinfer",)
    flags = (
        ShapeFlag("seq_len", (2048, 8192, 16384), (16384,), "query and key tokens"),
        ShapeFlag("qo_heads", (32,), (32,), "query heads"),
        ShapeFlag("kv_heads", (32,), (32,), "KV heads"),
        ShapeFlag("head_dim", (128,), (128,), "head dimension", minimum=64),
        ShapeFlag("causal", (1,), (1,), "1: causal mask, 0: none", minimum=0),
    )

    def backends(self) -> dict[str, Backend]:
        found = super().backends()
        found["cutefi"] = lambda state, q, k, v: cutefi.single_prefill_with_kv_cache(q, k, v, causal=state["causal"])
        if "flashinfer" in found:
            fi = flashinfer_module()
            found["flashinfer"] = lambda state, q, k, v: fi.single_prefill_with_kv_cache(q, k, v,
                                                                                        causal=state["causal"])
        return found
