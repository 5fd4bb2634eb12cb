"""GPU tier: FP8 GEMM with per-tensor scales (bmm_fp8, mm_fp8) on Hopper, against a float32
reference of the dequantised inputs written here: ``(A.float() * A_scale) @ (B.float() * B_scale)``.
Fresh random inputs quantised to FP8 with a scale that uses the format's range; outputs
poisoned (NaN) first. Only the fp32 summation order and the output's one rounding differ
from the reference (and the FP8 tensor cores' accumulation, which keeps fewer mantissa bits
than fp32: see test_fp8_long_k_accuracy_bound), so the bounds are about the output dtype's."""

from __future__ import annotations

import pytest
import torch

import cutefi
from cutefi.gemm import launch
from cutefi.gemm.plan import override

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(
    not torch.cuda.is_available() or torch.cuda.get_device_capability() != (9, 0), reason="FP8 GEMM: Hopper only")]

FORMATS = [torch.float8_e4m3fn, torch.float8_e5m2]
REL = {torch.bfloat16: 6e-3, torch.float16: 3e-3}


def quantised(shape, fp8: torch.dtype, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(values in ``fp8``, the float32 scale that dequantises them), from N(0, 1) data."""
    gen = torch.Generator(device="cuda").manual_seed(seed)
    x = torch.randn(shape, device="cuda", generator=gen)
    scale = x.abs().amax().clamp(min=1e-6) / torch.finfo(fp8).max
    return (x / scale).clamp(torch.finfo(fp8).min, torch.finfo(fp8).max).to(fp8), scale.reshape(1).float()


def weight_t(batch: int | None, k: int, n: int, fp8: torch.dtype, seed: int):
    """B [.., K, N] column-major: the transposed view of an [.., N, K] weight."""
    w, scale = quantised((n, k) if batch is None else (batch, n, k), fp8, seed)
    return w.transpose(-2, -1), scale


def reference(a, a_scale, b, b_scale) -> torch.Tensor:
    return (a.float() * a_scale) @ (b.float() * b_scale)


def assert_close(out: torch.Tensor, ref: torch.Tensor, out_dtype: torch.dtype) -> None:
    assert out.dtype == out_dtype
    assert not torch.isnan(out).any(), "NaN: an element was never written"
    rel = ((out.float() - ref).norm() / ref.norm()).item()
    assert rel < REL[out_dtype], f"relative error {rel:.2e}"
    torch.testing.assert_close(out.float(), ref, rtol=2e-2, atol=2e-2 * ref.abs().max().item())


@pytest.mark.parametrize("fp8", FORMATS)
@pytest.mark.parametrize("batch,m,n,k", [(1, 1, 4096, 4096), (3, 7, 1000, 1040), (2, 64, 264, 512),
                                         (1, 1000, 1000, 1008), (1, 4096, 4096, 4096), (4, 129, 136, 16),
                                         (1, 300, 4104, 8192)])
def test_bmm_fp8(fp8, batch, m, n, k):
    a, a_scale = quantised((batch, m, k), fp8, m + k)
    b, b_scale = weight_t(batch, k, n, fp8, n)
    for out_dtype in (torch.bfloat16, torch.float16):
        out = torch.full((batch, m, n), float("nan"), device="cuda", dtype=out_dtype)
        result = cutefi.bmm_fp8(a, b, a_scale, b_scale, out_dtype, out=out)
        assert result is out
        assert_close(out, reference(a, a_scale, b, b_scale), out_dtype)


@pytest.mark.parametrize("fp8", FORMATS)
@pytest.mark.parametrize("m", [1, 16, 33, 64, 256, 2048])
def test_mm_fp8_default_plan(fp8, m):
    """What a linear layer gets: the plan's build at each size (few-token swapped builds, K
    split in clusters, whole tiles), with alpha and without (1.0), bf16 and fp16 out."""
    n, k = 4096, 4096
    a, a_scale = quantised((m, k), fp8, m)
    b, b_scale = weight_t(None, k, n, fp8, 7)
    alpha = a_scale * b_scale
    assert_close(cutefi.mm_fp8(a, b, alpha), reference(a, a_scale, b, b_scale), torch.bfloat16)
    # (without alpha the raw FP8 products run past fp16's range: bf16 out)
    assert_close(cutefi.mm_fp8(a, b), reference(a, 1.0, b, 1.0), torch.bfloat16)
    assert_close(cutefi.mm_fp8(a, b, alpha, out_dtype=torch.float16), reference(a, a_scale, b, b_scale),
                 torch.float16)


MIXED = [(torch.float8_e4m3fn, torch.float8_e5m2), (torch.float8_e5m2, torch.float8_e4m3fn)]


@pytest.mark.parametrize("a_format,b_format", MIXED, ids=["e4m3xe5m2", "e5m2xe4m3"])
@pytest.mark.parametrize("m", [1, 16, 33, 64, 256, 2048])
def test_mixed_formats(a_format, b_format, m):
    """A and B in different FP8 formats (FlashInfer's bmm_fp8 takes them): every plan size
    (swapped builds, where the kernel's A is the weight; clusters; whole tiles), and bmm."""
    n, k = 4096, 4096
    a, a_scale = quantised((m, k), a_format, m)
    b, b_scale = weight_t(None, k, n, b_format, 7)
    assert_close(cutefi.mm_fp8(a, b, a_scale * b_scale), reference(a, a_scale, b, b_scale), torch.bfloat16)
    a3, a3_scale = quantised((2, m, 512), a_format, m + 1)
    b3, b3_scale = weight_t(2, 512, 264, b_format, 8)
    out = cutefi.bmm_fp8(a3, b3, a3_scale, b3_scale, torch.float16)
    assert_close(out, reference(a3, a3_scale, b3, b3_scale), torch.float16)


@pytest.mark.parametrize("fp8", FORMATS)
def test_fp8_long_k_accuracy_bound(fp8):
    """K = 16384 in one split. The sums are the FP8 wgmmas' own (like cuBLAS's fast-accumulation
    mode; no promotion into a second fp32 set yet), so the error grows with K past the output's
    rounding: measured 3.3e-3 relative at K = 14336 on the H200, where cuBLAS's promoted sums
    stay at 1.7e-3. The bound here is what this kernel guarantees today."""
    a, a_scale = quantised((512, 16384), fp8, 5)
    b, b_scale = weight_t(None, 16384, 2048, fp8, 6)
    ref = reference(a, a_scale, b, b_scale)
    with override(config="128x256c1", splits=1):
        out = cutefi.mm_fp8(a, b, a_scale * b_scale)
    rel = ((out.float() - ref).norm() / ref.norm()).item()
    assert rel < 5e-3, f"relative error {rel:.2e}"


@pytest.mark.parametrize("config", [c.name for c in launch.FP8_CONFIGS])
def test_every_fp8_config(config):
    """Each FP8 build forced: partial tiles in M, N and K, a K shorter than the splits, strided
    rows of a and out; nothing written outside out; run twice (split counters back at zero)."""
    for m, n, k in [(77, 1160, 1040), (40, 4104, 16), (1, 264, 4096)]:
        a_full, a_scale = quantised((m, k + 32), torch.float8_e4m3fn, m)
        a = a_full[:, 16:16 + k]
        b, b_scale = weight_t(None, k, n, torch.float8_e4m3fn, n)
        ref = reference(a, a_scale, b, b_scale)
        with override(config=config):
            for _ in range(2):
                buf = torch.full((m + 2, n + 16), float("nan"), device="cuda", dtype=torch.bfloat16)
                out = buf[1:m + 1, 8:8 + n]
                cutefi.mm_fp8(a, b, a_scale * b_scale, out=out)
                assert_close(out, ref, torch.bfloat16)
                outside = torch.ones_like(buf, dtype=torch.bool)
                outside[1:m + 1, 8:8 + n] = False
                assert torch.isnan(buf[outside]).all(), "a write landed outside out"


def test_fp8_graph_compile_and_side_stream():
    a, a_scale = quantised((48, 2048), torch.float8_e4m3fn, 1)
    b, b_scale = weight_t(None, 2048, 1024, torch.float8_e4m3fn, 2)
    alpha = a_scale * b_scale
    eager = cutefi.mm_fp8(a, b, alpha)
    compiled = torch.compile(lambda x, w, s: cutefi.mm_fp8(x, w, s) * 2, fullgraph=True)
    torch.testing.assert_close(compiled(a, b, alpha), eager * 2)
    assert_graph_and_side_stream_match(lambda out=None: cutefi.mm_fp8(a, b, alpha, out=out), eager)


def assert_graph_and_side_stream_match(call, eager: torch.Tensor) -> None:
    """``call(out=...)`` captured in a CUDA graph and replayed, and ``call()`` on a side
    stream, give ``eager``'s bits."""
    out = torch.full_like(eager, float("nan"))
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        call(out=out)
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(out, eager)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        again = call()
    torch.cuda.current_stream().wait_stream(side)
    assert torch.equal(again, eager)


def test_fp8_bad_inputs_are_refused():
    a, s = quantised((8, 64), torch.float8_e4m3fn, 3)
    b, _ = weight_t(None, 64, 32, torch.float8_e4m3fn, 4)
    with pytest.raises(ValueError, match="column-major"):
        cutefi.mm_fp8(a, b.contiguous(), s)
    with pytest.raises(ValueError, match="multiple of 16"):
        cutefi.mm_fp8(a[:, :40], b[:40], s)
    with pytest.raises(ValueError, match="one-element float32"):
        cutefi.mm_fp8(a, b, s.double())
    with pytest.raises(ValueError, match="one-element float32"):
        cutefi.bmm_fp8(a[None], b[None], s.expand(2), s, torch.bfloat16)
    with pytest.raises(TypeError, match="float8"):
        cutefi.mm_fp8(a.to(torch.bfloat16), b, s)
    with pytest.raises(TypeError, match="output dtype"):
        cutefi.mm_fp8(a, b, s, out_dtype=torch.float32)
    with pytest.raises(ValueError, match="FlashInfer's"):
        cutefi.bmm_fp8(a[None], b[None], s, s, torch.bfloat16, backend="cutlass")
    with pytest.raises(ValueError, match="must be on"):
        cutefi.mm_fp8(a, b, s.cpu())
