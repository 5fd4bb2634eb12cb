"""GPU tier: rope_quantize_fp8 / mla_rope_quantize_fp8 against a float64 reference written here
(the rotary parts rotated by their cos|sin cache rows, every part times its scale, clamped to
the FP8 format's largest finite value, then converted by torch), on fresh random inputs with
the outputs poisoned (NaN codes) first: GQA and MLA layouts, NeoX and interleaved, both FP8
formats, fp16/bf16, views of fused buffers, saturating values, nothing written outside the
outputs, CUDA graphs and torch.compile.

Match: the kernel rotates in fp32 and the reference in fp64, so a value within an fp32 rounding
of an FP8 rounding boundary may land one FP8 step apart; every element is within one step
(relative 2^-3 for e4m3, 2^-2 for e5m2, or the subnormal quantum) and almost all are equal.
"""

from __future__ import annotations

import pytest
import torch

import cutefi

pytestmark = pytest.mark.gpu

E4M3, E5M2 = torch.float8_e4m3fn, torch.float8_e5m2
FP8_MAX = {E4M3: 448.0, E5M2: 57344.0}
STEP = {E4M3: (2.0 ** -3, 2.0 ** -9), E5M2: (2.0 ** -2, 2.0 ** -16)}  # (relative step, subnormal quantum)


def random_cache(max_pos: int, rope_dim: int) -> torch.Tensor:
    angle = torch.rand(max_pos, rope_dim // 2, device="cuda", dtype=torch.float64) * 6.283185307179586
    return torch.cat([angle.cos(), angle.sin()], dim=-1).float()


def rotate(x: torch.Tensor, cache: torch.Tensor, pos: torch.Tensor, interleave: bool) -> torch.Tensor:
    """x [nnz, (heads,) R] -> float64, rotated by cache rows pos."""
    rows = cache[pos.long()].double()
    r = x.shape[-1]
    cos, sin = rows[:, : r // 2], rows[:, r // 2:]
    if x.dim() == 3:
        cos, sin = cos[:, None], sin[:, None]
    x64 = x.double()
    lo, hi = (slice(0, r, 2), slice(1, r, 2)) if interleave else (slice(0, r // 2), slice(r // 2, r))
    out = x64.clone()
    out[..., lo] = x64[..., lo] * cos - x64[..., hi] * sin
    out[..., hi] = x64[..., hi] * cos + x64[..., lo] * sin
    return out


def quantize(x64: torch.Tensor, scale: float, dtype: torch.dtype) -> torch.Tensor:
    limit = FP8_MAX[dtype]
    return (x64 * scale).clamp(-limit, limit).to(dtype)


def assert_fp8(out: torch.Tensor, ref: torch.Tensor) -> None:
    assert out.dtype == ref.dtype and out.shape == ref.shape
    got, want = out.double(), ref.double()
    assert not got.isnan().any(), "NaN: an output element was never written (or a NaN input)"
    relative, quantum = STEP[ref.dtype]
    torch.testing.assert_close(got, want, rtol=relative, atol=quantum)
    assert (got != want).double().mean().item() < 2e-3, "more than a few elements a rounding step apart"


def poisoned(shape, dtype) -> torch.Tensor:
    return torch.full(shape, 0x7F, dtype=torch.uint8, device="cuda").view(dtype)  # (NaN in both formats)


def check_call(fn, q_rope, k_rope, q_nope, k_nope, cache, pos, interleave, dtype, scale_q, scale_kv, **kw):
    outs = [poisoned(t.shape, dtype) for t in (q_rope, k_rope, q_nope, k_nope)]
    got = fn(q_rope, k_rope, q_nope, k_nope, cache, pos, not interleave, dtype, scale_q, scale_kv, *outs, **kw)
    assert all(g is o for g, o in zip(got, outs))
    assert_fp8(got[0], quantize(rotate(q_rope, cache, pos, interleave), scale_q, dtype))
    assert_fp8(got[1], quantize(rotate(k_rope, cache, pos, interleave), scale_kv, dtype))
    assert_fp8(got[2], quantize(q_nope.double(), scale_q, dtype))
    assert_fp8(got[3], quantize(k_nope.double(), scale_kv, dtype))


@pytest.mark.parametrize("nnz", [1, 7, 1000])
@pytest.mark.parametrize("interleave", [False, True], ids=["neox", "gptj"])
@pytest.mark.parametrize("dtype", [E4M3, E5M2], ids=["e4m3", "e5m2"])
@pytest.mark.parametrize("in_dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
def test_gqa(nnz, interleave, dtype, in_dtype):
    """GQA keys [nnz, Hk, R] and a partial rotary split (R 64 of a 128 head: 64 nope columns)."""
    torch.manual_seed(nnz)
    q = torch.randn(nnz, 32, 128, device="cuda", dtype=in_dtype)
    k = torch.randn(nnz, 8, 128, device="cuda", dtype=in_dtype)
    cache = random_cache(4096, 64)
    pos = torch.randint(0, 4096, (nnz,), device="cuda", dtype=torch.int32)
    check_call(cutefi.rope_quantize_fp8, q[..., :64], k[..., :64], q[..., 64:], k[..., 64:], cache, pos, interleave,
               dtype, 0.5, 2.0)


@pytest.mark.parametrize("heads", [16, 128])
@pytest.mark.parametrize("interleave", [False, True], ids=["neox", "gptj"])
def test_mla(heads, interleave):
    """DeepSeek's MLA, absorbed (decode) form: q [nnz, H, 576] (its nope part times W_UK: 512,
    then rope 64), the latent k [nnz, 512] and its rope part [nnz, 64]; int64 positions."""
    torch.manual_seed(heads)
    nnz = 333
    q = torch.randn(nnz, heads, 576, device="cuda", dtype=torch.bfloat16)
    k_nope = torch.randn(nnz, 512, device="cuda", dtype=torch.bfloat16)
    k_rope = torch.randn(nnz, 64, device="cuda", dtype=torch.bfloat16)
    cache = random_cache(8192, 64)
    pos = torch.randint(0, 8192, (nnz,), device="cuda")
    check_call(cutefi.mla_rope_quantize_fp8, q[..., 512:], k_rope, q[..., :512], k_nope, cache, pos, interleave,
               E4M3, 1.0, 0.7)


def test_no_nope_parts_and_allocated_outputs():
    """nope None: empty [nnz, heads, 0] outputs, as FlashInfer returns; outputs allocated here
    (e4m3 by default)."""
    torch.manual_seed(3)
    q = torch.randn(50, 8, 128, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(50, 2, 128, device="cuda", dtype=torch.bfloat16)
    cache, pos = random_cache(100, 128), torch.randint(0, 100, (50,), device="cuda")
    q8, k8, qn8, kn8 = cutefi.rope_quantize_fp8(q, k, None, None, cache, pos)
    assert q8.dtype == E4M3 and qn8.shape == (50, 8, 0) and kn8.shape == (50, 2, 0)
    assert_fp8(q8, quantize(rotate(q, cache, pos, False), 1.0, E4M3))
    assert_fp8(k8, quantize(rotate(k, cache, pos, False), 1.0, E4M3))


@pytest.mark.parametrize("dtype", [E4M3, E5M2], ids=["e4m3", "e5m2"])
def test_saturation_and_nothing_written_outside(dtype):
    """Scaled past the format's range: +-max, never inf or NaN; outputs are views into wider
    poisoned buffers whose other bytes stay poisoned."""
    torch.manual_seed(4)
    nnz, scale = 64, 4 * FP8_MAX[dtype]
    q = torch.randn(nnz, 4, 64, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(nnz, 1, 64, device="cuda", dtype=torch.bfloat16)
    qn = torch.randn(nnz, 4, 32, device="cuda", dtype=torch.bfloat16)
    kn = torch.randn(nnz, 1, 32, device="cuda", dtype=torch.bfloat16)
    cache, pos = random_cache(64, 64), torch.arange(nnz, device="cuda")
    buffers = [poisoned((nnz + 2, t.shape[1], t.shape[2] + 32), dtype) for t in (q, k, qn, kn)]
    outs = [b[1:nnz + 1, :, 16:16 + t.shape[2]] for b, t in zip(buffers, (q, k, qn, kn))]
    cutefi.rope_quantize_fp8(q, k, qn, kn, cache, pos, quant_scale_q=scale, quant_scale_kv=scale,
                             q_rope_out=outs[0], k_rope_out=outs[1], q_nope_out=outs[2], k_nope_out=outs[3])
    for out, src, rotary in zip(outs, (q, k, qn, kn), (True, True, False, False)):
        ref = quantize(rotate(src, cache, pos, False) if rotary else src.double(), scale, dtype)
        assert_fp8(out, ref)
        assert out.double().abs().max().item() == FP8_MAX[dtype]  # (saturated, not inf)
    for buffer, t in zip(buffers, (q, k, qn, kn)):
        outside = torch.ones(buffer.shape, dtype=torch.bool, device="cuda")
        outside[1:nnz + 1, :, 16:16 + t.shape[2]] = False
        assert (buffer.view(torch.uint8)[outside] == 0x7F).all(), "a write landed outside the output"


def test_positions_past_the_cache_are_clamped_and_pdl_matches():
    torch.manual_seed(5)
    q = torch.randn(20, 4, 64, device="cuda", dtype=torch.float16)
    k = torch.randn(20, 64, device="cuda", dtype=torch.float16)
    cache = random_cache(16, 64)
    pos = torch.arange(20, device="cuda", dtype=torch.int32)  # (16..19: past the cache's last row)
    a = cutefi.mla_rope_quantize_fp8(q, k, None, None, cache, pos, enable_pdl=False)
    b = cutefi.mla_rope_quantize_fp8(q, k, None, None, cache, pos, enable_pdl=True)
    for x, y in zip(a, b):
        assert torch.equal(x.view(torch.uint8), y.view(torch.uint8))
    clamped = pos.clamp(max=15)
    assert_fp8(a[0], quantize(rotate(q, cache, clamped, False), 1.0, E4M3))


def test_cuda_graph_replay_with_new_inputs():
    torch.manual_seed(6)
    q = torch.randn(32, 16, 576, device="cuda", dtype=torch.bfloat16)
    k_rope = torch.randn(32, 64, device="cuda", dtype=torch.bfloat16)
    k_nope = torch.randn(32, 512, device="cuda", dtype=torch.bfloat16)
    cache = random_cache(1024, 64)
    pos = torch.randint(0, 1024, (32,), device="cuda")
    outs = [torch.empty(t.shape, dtype=E4M3, device="cuda") for t in (q[..., 512:], k_rope, q[..., :512], k_nope)]

    def step():
        cutefi.mla_rope_quantize_fp8(q[..., 512:], k_rope, q[..., :512], k_nope, cache, pos, False, None, 0.5, 1.5,
                                     *outs)

    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        step()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, stream=stream):
            step()
    torch.cuda.current_stream().wait_stream(stream)
    for _ in range(2):
        for t in (q, k_rope, k_nope):
            t.copy_(torch.randn_like(t))
        pos.copy_(torch.randint(0, 1024, (32,), device="cuda"))
        for out in outs:
            out.view(torch.uint8).fill_(0x7F)
        graph.replay()
        torch.cuda.synchronize()
        assert_fp8(outs[0], quantize(rotate(q[..., 512:], cache, pos, True), 0.5, E4M3))
        assert_fp8(outs[3], quantize(k_nope.double(), 1.5, E4M3))


def test_torch_compile_fullgraph_matches_eager():
    torch.manual_seed(7)
    q = torch.randn(64, 8, 128, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(64, 2, 128, device="cuda", dtype=torch.bfloat16)
    cache, pos = random_cache(256, 64), torch.randint(0, 256, (64,), device="cuda")

    def layer(q, k):
        q8, k8, qn8, kn8 = cutefi.rope_quantize_fp8(q[..., :64], k[..., :64], q[..., 64:], k[..., 64:], cache, pos,
                                                    quant_scale_q=0.25)
        return torch.cat([q8.float(), qn8.float()], -1), torch.cat([k8.float(), kn8.float()], -1)

    compiled = torch.compile(layer, fullgraph=True)
    for got, want in zip(compiled(q, k), layer(q, k)):
        assert torch.equal(got, want)
