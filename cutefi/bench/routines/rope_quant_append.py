"""rope_quantize_fp8_append_paged_kv_cache routine (memory bound): RoPE + FP8 e4m3 of q and k,
k and v appended to a paged FP8 cache, in two layouts: GQA as in Llama-3-8B (q [tokens, 32, 128],
k / v [tokens, 8, 128], the whole head rotary, NHD pages of 16) and DeepSeek's MLA (``--mla 1``:
q [tokens, 128, 512 + 64], the latent k [tokens, 512] and its rope part [tokens, 64] into
ckv / kpe caches of 64-token pages). ``tokens_per_request`` new tokens a request after 100
cached ones (1: decode). Bytes: the 16-bit inputs read, one byte an element written, the
cos|sin rows and index entries read. Peers: torch eager and torch.compile of the same math
(an indexed store into the cache's bytes), FlashInfer's op when it imports."""

from __future__ import annotations

from typing import Any

import torch

import cutefi

from .base import Backend, BenchInputError, Cost, Routine, ShapeFlag, compiled, flashinfer_module, randn
from .rope_quant import FP8, FP8_MAX, MAX_POSITION, SCALE_KV, SCALE_Q, _fp8, _rotate

CACHED = 100  # tokens each request has before the append
GQA = dict(heads=32, kv_heads=8, rope=128, nope=0, page_size=16)
MLA = dict(heads=128, kv_heads=1, rope=64, nope=512, page_size=64)


def _layout(shape: dict[str, int]) -> dict[str, int]:
    return MLA if shape["mla"] else GQA


def _slots(kv_indices, kv_indptr, batch_indices, positions, page_size):
    page = kv_indices[kv_indptr[batch_indices] + positions // page_size].long()
    return page, (positions % page_size).long()


def _torch_append(q_rope, k_rope, q_nope, k_nope, v, cos_sin, pos, caches, kv_indices, kv_indptr, batch_indices,
                  positions, is_neox, quantize_dtype, quant_scale_q, quant_scale_kv, page_size):
    """What a server would write in torch (FlashInfer's signature; NeoX e4m3 with the routine's
    scales): RoPE in fp32, scale, clamp, cast, then an indexed store of the codes into each
    cache's bytes (every slot in range here)."""
    rows = cos_sin[pos]
    half = k_rope.shape[-1] // 2
    cos, sin = rows[:, :half], rows[:, half:]
    q8 = _fp8(_rotate(q_rope, cos[:, None], sin[:, None]), SCALE_Q)
    qn8 = _fp8(q_nope, SCALE_Q) if q_nope is not None else None
    page, entry = _slots(kv_indices, kv_indptr, batch_indices, positions, page_size)
    first, second = (c.view(torch.uint8) for c in caches)
    if v is None:  # MLA: the latent k into ckv, its rotated part into kpe
        first[page, entry] = _fp8(k_nope, SCALE_KV).view(torch.uint8)
        second[page, entry] = _fp8(_rotate(k_rope, cos, sin), SCALE_KV).view(torch.uint8)
    else:
        first[page, entry] = _fp8(_rotate(k_rope, cos[:, None], sin[:, None]), SCALE_KV).view(torch.uint8)
        second[page, entry] = _fp8(v, SCALE_KV).view(torch.uint8)
    return q8, qn8


def _returning(fn):
    """``fn`` with FlashInfer's arguments (NeoX, e4m3, the routine's scales); returns the q
    outputs and both caches."""
    def call(*inputs):
        q8, qn8 = fn(*inputs[:12], True, FP8, SCALE_Q, SCALE_KV, inputs[12])
        return (q8,) + ((qn8,) if inputs[2] is not None else ()) + tuple(inputs[7])
    return call


class RopeQuantizeFp8AppendPagedKvCache(Routine):
    name = "rope_quantize_fp8_append_paged_kv_cache"
    help = ("rope_quantize_fp8_append_paged_kv_cache: RoPE + FP8 e4m3 of q / k, K / V appended to a paged cache "
            "(GQA 32/8 x 128, or --mla 1: 128 heads x 512 + 64)")
    optional_backends = ("flashinfer",)
    flags = (ShapeFlag("tokens", (1, 32, 1024, 16384), (32, 16384), "tokens (nnz)"),
             ShapeFlag("tokens_per_request", (1, 512), (1,), "new tokens a request (1: decode)"),
             ShapeFlag("mla", (0, 1), (0, 1), "0: GQA (Llama-3-8B), 1: DeepSeek MLA", minimum=0))
    atol, rtol = 2e-2, 0.13  # (one e4m3 step is 1/8 of a value)

    def backends(self) -> dict[str, Backend]:
        found: dict[str, Backend] = {"cutefi": _returning(cutefi.rope_quantize_fp8_append_paged_kv_cache),
                                     "torch": _returning(_torch_append),
                                     "torch.compile": _returning(compiled(_torch_append))}
        flashinfer = flashinfer_module()
        function = getattr(flashinfer, "rope_quantize_fp8_append_paged_kv_cache", None) if flashinfer else None
        if function is not None:
            found["flashinfer"] = _returning(function)
        return found

    def check_shape(self, shape: dict[str, int]) -> None:
        if shape["tokens"] % shape["tokens_per_request"]:
            raise BenchInputError(f"tokens {shape['tokens']} is not a multiple of tokens_per_request "
                                  f"{shape['tokens_per_request']}")
        if shape["mla"] not in (0, 1):
            raise BenchInputError(f"--mla takes 0 or 1; got {shape['mla']}")

    def make_inputs(self, shape: dict[str, int], dtype: torch.dtype) -> tuple[Any, ...]:
        tokens, each, lay = shape["tokens"], shape["tokens_per_request"], _layout(shape)
        requests, page_size = tokens // each, lay["page_size"]
        pages_each = -(-(CACHED + each) // page_size)
        pages = requests * pages_each
        kv_indices = torch.randperm(pages, device="cuda").to(torch.int32)
        kv_indptr = torch.arange(0, pages + 1, pages_each, device="cuda", dtype=torch.int32)
        batch_indices = torch.arange(requests, device="cuda", dtype=torch.int32).repeat_interleave(each)
        positions = (CACHED + torch.arange(each, device="cuda", dtype=torch.int32)).repeat(requests)
        angle = torch.rand(MAX_POSITION, lay["rope"] // 2, device="cuda") * 6.2831853
        cos_sin = torch.cat([angle.cos(), angle.sin()], -1)
        pos = torch.randint(0, MAX_POSITION, (tokens,), device="cuda")
        rope, nope, heads, kv_heads = lay["rope"], lay["nope"], lay["heads"], lay["kv_heads"]
        if shape["mla"]:
            q = randn(tokens, heads, nope + rope, dtype=dtype)
            caches = (torch.zeros(pages, page_size, nope, device="cuda", dtype=FP8),
                      torch.zeros(pages, page_size, rope, device="cuda", dtype=FP8))
            return (q[..., nope:], randn(tokens, rope, dtype=dtype), q[..., :nope], randn(tokens, nope, dtype=dtype),
                    None, cos_sin, pos, caches, kv_indices, kv_indptr, batch_indices, positions, page_size)
        caches = tuple(torch.zeros(pages, page_size, kv_heads, rope, device="cuda", dtype=FP8) for _ in "kv")
        return (randn(tokens, heads, rope, dtype=dtype), randn(tokens, kv_heads, rope, dtype=dtype), None, None,
                randn(tokens, kv_heads, rope, dtype=dtype), cos_sin, pos, caches, kv_indices, kv_indptr,
                batch_indices, positions, page_size)

    def reference(self, inputs: tuple[Any, ...], shape: dict[str, int]) -> tuple[torch.Tensor, ...]:
        q_rope, k_rope, q_nope, k_nope, v, cos_sin, pos, caches, kv_indices, kv_indptr, batch, positions, ps = inputs
        rows = cos_sin[pos].double()
        half = k_rope.shape[-1] // 2
        cos, sin = rows[:, :half], rows[:, half:]

        def quantised(x: torch.Tensor, scale: float) -> torch.Tensor:
            return (x.double() * scale).clamp(-FP8_MAX, FP8_MAX).to(FP8).float()

        page, entry = _slots(kv_indices, kv_indptr, batch.long(), positions, ps)
        first, second = (torch.zeros(c.shape, device="cuda") for c in caches)
        if v is None:
            first[page, entry] = quantised(k_nope, SCALE_KV)
            second[page, entry] = quantised(_rotate(k_rope.double(), cos, sin), SCALE_KV)
        else:
            first[page, entry] = quantised(_rotate(k_rope.double(), cos[:, None], sin[:, None]), SCALE_KV)
            second[page, entry] = quantised(v, SCALE_KV)
        q8 = quantised(_rotate(q_rope.double(), cos[:, None], sin[:, None]), SCALE_Q)
        return (q8,) + ((quantised(q_nope, SCALE_Q),) if q_nope is not None else ()) + (first, second)

    def cost(self, shape: dict[str, int], dtype: torch.dtype) -> Cost:
        elem = torch.empty((), dtype=dtype).element_size()
        lay = _layout(shape)
        width = lay["rope"] + lay["nope"]
        v_heads = 0 if shape["mla"] else lay["kv_heads"]
        per_token = (lay["heads"] + lay["kv_heads"] + v_heads) * width * (elem + 1) + lay["rope"] * 4 + 3 * 4 + 8
        return Cost(bytes=shape["tokens"] * per_token)
