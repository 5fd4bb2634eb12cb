"""Decode attention routines (memory bound): one query token a request over its KV.

``batch_decode``: cutefi's BatchDecodeWithPagedKVCacheWrapper over a paged cache (NHD, or HND
with ``hnd=1``; pages shuffled), planned outside the timing; peers: torch's SDPA over dense contiguous K/V
``[batch, kv_heads, kv_len, head_dim]`` with GQA (the math torch picks, and cuDNN's where it
takes the case), and FlashInfer's wrapper when it imports. ``ragged=1`` draws each request's
length uniformly from [kv_len / 64, kv_len] (seeded); the dense peers then attend over the
longest length with a mask. Bytes: the K and V rows each request reads, q and out.
``kv_fp8=1`` (``=2``): cutefi's cache holds float8_e4m3fn (float8_e5m2) codes with k_scale and
v_scale; the dense peers read the same values in q's type, so their bytes are counted as FP8 too
(compare their times, not their rates).
``single_decode``: single_decode_with_kv_cache, one request, against the same peers.
"""

from __future__ import annotations

import math
from typing import Any

import torch

import cutefi

from .base import (Backend, BenchInputError, Cost, Routine, ShapeFlag, check_attention_heads, flashinfer_module,
                   randn)


def _lengths(shape: dict[str, int]) -> list[int]:
    batch, kv_len = shape["batch"], shape["kv_len"]
    if not shape.get("ragged"):
        return [kv_len] * batch
    g = torch.Generator().manual_seed(batch * 7919 + kv_len)
    low = max(1, kv_len // 64)
    return torch.randint(low, kv_len + 1, (batch,), generator=g).tolist()


_FP8 = (None, torch.float8_e4m3fn, torch.float8_e5m2)  # by the kv_fp8 flag


def _sdpa(backend=None):
    """SDPA decode (q [batch, heads, 1, d]); ``backend`` None: the kernel torch picks."""
    def run(q, k, v, mask):
        if backend is None:
            return torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True).squeeze(2)
        with torch.nn.attention.sdpa_kernel(backend):
            return torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True).squeeze(2)

    return run


class BatchDecode(Routine):
    name = "batch_decode"
    help = "BatchDecodeWithPagedKVCacheWrapper: batch x kv_len tokens, NHD pages, vs dense SDPA decode"
    optional_backends = ("flashinfer",)
    flags = (
        ShapeFlag("batch", (1, 8, 16, 64, 128), (64,), "requests"),
        ShapeFlag("kv_len", (1024, 2048, 4096, 8192, 16384), (4096,), "KV tokens a request (the longest if ragged)"),
        ShapeFlag("qo_heads", (32,), (32,), "query heads"),
        ShapeFlag("kv_heads", (8,), (8,), "KV heads"),
        ShapeFlag("head_dim", (128,), (128,), "head dimension", minimum=64),
        ShapeFlag("page_size", (16,), (16,), "tokens a page"),
        ShapeFlag("ragged", (0,), (0,), "1: lengths uniform in [kv_len/64, kv_len]", minimum=0),
        ShapeFlag("hnd", (0,), (0,), "1: HND pages [pages, kv_heads, page_size, head_dim] (0: NHD)", minimum=0),
        ShapeFlag("kv_fp8", (0,), (0,), "1: float8_e4m3fn KV cache, 2: float8_e5m2 (0: q's type)", minimum=0),
    )
    atol = 2e-2
    rtol = 2e-2

    def check_shape(self, shape: dict[str, int]) -> None:
        check_attention_heads(shape)
        if shape.get("kv_fp8", 0) not in range(len(_FP8)):
            raise BenchInputError("kv_fp8 must be 0, 1 (e4m3) or 2 (e5m2)")

    def backends(self) -> dict[str, Backend]:
        sdpa = torch.nn.attention.SDPBackend
        found: dict[str, Backend] = {
            "cutefi": lambda state, q, k, v, mask: state["cutefi"].run(q.squeeze(2), state["cache"], **state["scales"]),
            "torch": lambda state, q, k, v, mask: _sdpa()(q, k, v, mask),
            "cudnn": lambda state, q, k, v, mask: _sdpa([sdpa.CUDNN_ATTENTION])(q, k, v, mask),
        }
        if flashinfer_module() is not None:
            found["flashinfer"] = lambda state, q, k, v, mask: state["flashinfer"].run(q.squeeze(2), state["cache"],
                                                                                       **state["scales"])
        return found

    def make_inputs(self, shape: dict[str, int], dtype: torch.dtype) -> tuple[Any, ...]:
        lengths = _lengths(shape)
        batch, kv_heads, d, page = len(lengths), shape["kv_heads"], shape["head_dim"], shape["page_size"]
        longest = max(lengths)
        k = randn(batch, kv_heads, longest, d, dtype=dtype)
        v = randn(batch, kv_heads, longest, d, dtype=dtype)
        kv_dtype = _FP8[shape.get("kv_fp8", 0)] or dtype
        scales = {}
        if kv_dtype != dtype:  # the peers and the reference see the FP8 values (times the scales)
            scales = {"k_scale": 0.5, "v_scale": 0.25}
            k = (k * 2).to(kv_dtype).to(dtype) * 0.5
            v = (v * 4).to(kv_dtype).to(dtype) * 0.25
        q = randn(batch, shape["qo_heads"], 1, d, dtype=dtype)
        pages_each = [-(-n // page) for n in lengths]
        total = sum(pages_each)
        order = torch.randperm(total, device="cuda")
        hnd = bool(shape.get("hnd"))
        k_cache = torch.empty(total, page, kv_heads, d, device="cuda", dtype=dtype)
        v_cache = torch.empty_like(k_cache)
        first = 0
        for b, n in enumerate(lengths):  # request b's tokens into its (shuffled) pages
            ids = order[first:first + pages_each[b]]
            padded = pages_each[b] * page
            for dense, cache in ((k, k_cache), (v, v_cache)):
                rows = torch.zeros(padded, kv_heads, d, device="cuda", dtype=dtype)
                rows[:n] = dense[b, :, :n].transpose(0, 1)
                cache[ids] = rows.view(pages_each[b], page, kv_heads, d)
            first += pages_each[b]
        if hnd:  # the same pages, each stored head-major
            k_cache = k_cache.transpose(1, 2).contiguous()
            v_cache = v_cache.transpose(1, 2).contiguous()
        if kv_dtype != dtype:  # exact: the values are FP8 codes times the scales
            k_cache = (k_cache * 2).to(kv_dtype)
            v_cache = (v_cache * 4).to(kv_dtype)
        indptr = torch.tensor([0, *torch.tensor(pages_each).cumsum(0).tolist()], dtype=torch.int32)
        indices = order.to(torch.int32).cpu()
        last = torch.tensor([(n - 1) % page + 1 for n in lengths], dtype=torch.int32)
        mask = None
        if len(set(lengths)) > 1:
            mask = (torch.arange(longest, device="cuda")[None, :] < torch.tensor(lengths, device="cuda")[:, None])
            mask = mask[:, None, None, :]
        plan_args = (indptr, indices, last, shape["qo_heads"], kv_heads, d, page)
        state: dict[str, Any] = {"cache": (k_cache, v_cache), "lengths": lengths, "scales": scales,
                                 "plan": (plan_args, {"q_data_type": dtype, "kv_data_type": kv_dtype})}
        layout = "HND" if hnd else "NHD"
        wrapper = cutefi.BatchDecodeWithPagedKVCacheWrapper(torch.empty(256 << 20, dtype=torch.uint8, device="cuda"),
                                                            layout)
        wrapper.plan(*plan_args, q_data_type=dtype, kv_data_type=kv_dtype)
        state["cutefi"] = wrapper
        flashinfer = flashinfer_module()
        if flashinfer is not None:
            fi = flashinfer.BatchDecodeWithPagedKVCacheWrapper(torch.empty(256 << 20, dtype=torch.uint8,
                                                                           device="cuda"), layout)
            fi.plan(indptr.cuda(), indices.cuda(), last.cuda(), *plan_args[3:], q_data_type=dtype,
                    kv_data_type=kv_dtype)
            state["flashinfer"] = fi
        return state, q, k, v, mask

    def reference(self, inputs: tuple[Any, ...], shape: dict[str, int]) -> tuple[torch.Tensor, ...]:
        state, q, k, v, _ = inputs
        group = shape["qo_heads"] // shape["kv_heads"]
        out = torch.empty(q.shape[0], q.shape[1], q.shape[3], device="cuda")
        for b, n in enumerate(state["lengths"]):  # per request: float32 attention over its tokens
            kb = k[b, :, :n].float().repeat_interleave(group, 0)
            vb = v[b, :, :n].float().repeat_interleave(group, 0)
            s = torch.einsum("hd,hnd->hn", q[b, :, 0].float(), kb) / math.sqrt(q.shape[-1])
            out[b] = torch.einsum("hn,hnd->hd", torch.softmax(s, -1), vb)
        return (out,)

    def cost(self, shape: dict[str, int], dtype: torch.dtype) -> Cost:
        elem = torch.empty((), dtype=dtype).element_size()
        tokens = sum(_lengths(shape))
        kv_elem = 1 if shape.get("kv_fp8") else elem
        kv_bytes = 2 * tokens * shape["kv_heads"] * shape["head_dim"] * kv_elem
        qo_bytes = 2 * shape["batch"] * shape["qo_heads"] * shape["head_dim"] * elem
        attn_flops = 4 * tokens * shape["qo_heads"] * shape["head_dim"]
        return Cost(bytes=kv_bytes + qo_bytes, flops=attn_flops)


class SingleDecode(BatchDecode):
    name = "single_decode"
    help = "single_decode_with_kv_cache: one request's query over kv_len tokens (NHD), vs dense SDPA decode"
    flags = (
        ShapeFlag("kv_len", (2048, 8192, 32768, 131072), (2048, 131072), "KV tokens"),
        ShapeFlag("qo_heads", (32,), (32,), "query heads"),
        ShapeFlag("kv_heads", (8,), (8,), "KV heads"),
        ShapeFlag("head_dim", (128,), (128,), "head dimension", minimum=64),
    )

    def backends(self) -> dict[str, Backend]:
        found = super().backends()
        found["cutefi"] = lambda state, q, k, v, mask: cutefi.single_decode_with_kv_cache(
            q[0, :, 0], k[0].transpose(0, 1), v[0].transpose(0, 1))[None]
        if "flashinfer" in found:
            fi = flashinfer_module()
            found["flashinfer"] = lambda state, q, k, v, mask: fi.single_decode_with_kv_cache(
                q[0, :, 0], k[0].transpose(0, 1), v[0].transpose(0, 1))[None]
        return found

    def make_inputs(self, shape: dict[str, int], dtype: torch.dtype) -> tuple[Any, ...]:
        k = randn(1, shape["kv_heads"], shape["kv_len"], shape["head_dim"], dtype=dtype)
        v = randn(1, shape["kv_heads"], shape["kv_len"], shape["head_dim"], dtype=dtype)
        q = randn(1, shape["qo_heads"], 1, shape["head_dim"], dtype=dtype)
        return {"lengths": [shape["kv_len"]], "scales": {}}, q, k, v, None

    def cost(self, shape: dict[str, int], dtype: torch.dtype) -> Cost:
        return super().cost({**shape, "batch": 1, "ragged": 0}, dtype)
