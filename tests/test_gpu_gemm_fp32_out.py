"""GPU tier: dense GEMMs that write fp32 (``out_dtype=torch.float32``, FlashInfer's mm_bf16 /
bmm_bf16 option) against the float32 reference of ``test_gpu_gemm``, outputs poisoned (NaN)
first, nothing written outside ``out``: every kernel kind forced (Hopper staged TMA-store,
swapped, cluster split-K, global split-K, the decode-sized mma.sync kernel, GEMV, the mma.sync
multistage kernel) and the default plans from M = 1 to 4096.

fp32 out keeps the sums as they are: the error against the float32 reference is summation order
only (~1e-6 relative), far under a 16-bit rounding (~1e-3), which the bound below would catch.
"""

from __future__ import annotations

import pytest
import torch

import cutefi
from cutefi.gemm import launch
from cutefi.gemm.plan import override

from test_gpu_gemm import poisoned, reference, weight_t

pytestmark = pytest.mark.gpu

F32 = torch.float32
REL_F32 = 2e-5  # (a bf16-rounded output is ~2e-3; an fp16-rounded one ~3e-4)


def assert_fp32(out: torch.Tensor, ref: torch.Tensor) -> None:
    assert out.dtype == F32
    assert not torch.isnan(out).any(), "NaN: an element was never written"
    rel = ((out - ref).norm() / ref.norm()).item()
    assert rel < REL_F32, f"relative error {rel:.2e}"
    torch.testing.assert_close(out, ref, rtol=1e-3, atol=1e-4 * ref.abs().max().item())


def run_into_view(mm, a, b, bias, m: int, n: int, **kwargs) -> torch.Tensor:
    """``mm`` into a strided view of a poisoned buffer; checks nothing outside it was written."""
    out_buf = poisoned((m + 2, n + 16), F32)
    out = out_buf[1:m + 1, 8:8 + n]
    assert mm(a, b, bias=bias, out=out, out_dtype=F32, **kwargs) is out
    outside = torch.ones_like(out_buf, dtype=torch.bool)
    outside[1:m + 1, 8:8 + n] = False
    assert torch.isnan(out_buf[outside]).all(), "a write landed outside out"
    return out


def operands(m: int, n: int, k: int, dtype=torch.bfloat16, b_layout: str = "col", seed: int = 0):
    torch.manual_seed(seed + m * 7 + n + k)
    a = torch.randn(m, k, device="cuda", dtype=dtype)
    b = weight_t(k, n, dtype) if b_layout == "col" else torch.randn(k, n, device="cuda", dtype=dtype)
    bias = torch.randn(n, device="cuda", dtype=dtype)
    return a, b, bias


def hopper_only() -> None:
    if torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("Hopper builds")


@pytest.mark.parametrize("config", [c.name for c in launch.CONFIGS])
@pytest.mark.parametrize("b_layout", ["col", "row"])
def test_hopper_every_config(config, b_layout):
    hopper_only()
    parsed = next(c for c in launch.CONFIGS if c.name == config)
    if ("bf16", "fp32", "k" if b_layout == "col" else "n", parsed) not in launch.SM90_SPECS:
        pytest.skip("no N-major build of this tile")
    # partial tiles in M, N and K (the swapped builds take up to 128 tokens)
    m, n, k = (100, 1160, 1032) if parsed.swap else (777, 1160, 1032)
    a, b, bias = operands(m, n, k, b_layout=b_layout)
    for with_bias in (None, bias):
        with override(config=config):
            out = run_into_view(cutefi.mm_bf16, a, b, with_bias, m, n)
        assert_fp32(out, reference(a, b, with_bias))


@pytest.mark.parametrize("m,n,k,splits,config", [(16, 1024, 8192, 4, "128x64c1"), (7, 520, 1000, 3, "128x64c1"),
                                                 (100, 264, 4104, 5, "128x128c1"), (24, 4096, 4096, 3, "128x32c1t")])
def test_hopper_split_k(m, n, k, splits, config):
    """The last split of each tile sums the fp32 partials and stores them; run twice (the tile
    counters must be back at zero)."""
    hopper_only()
    a, b, bias = operands(m, n, k)
    with override(config=config, splits=splits):
        for _ in range(2):
            assert_fp32(run_into_view(cutefi.mm_bf16, a, b, bias, m, n), reference(a, b, bias))


@pytest.mark.parametrize("config", [c.name for c in launch.SKINNY_CONFIGS])
def test_decode_sized_kernel(config):
    for m, n, k in [(1, 1000, 1000), (5, 4104, 4096), (16, 264, 2056), (16, 24, 40)]:
        if m > 8 * int(config[1]):
            continue
        a, b, bias = operands(m, n, k)
        for splits in (1, 3):
            with override(config=config, splits=splits):
                out = run_into_view(cutefi.mm_bf16, a, b, bias, m, n)
            assert_fp32(out, reference(a, b, bias))


@pytest.mark.parametrize("tokens", [1, 2, 4])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_gemv(tokens, dtype):
    hopper_only()
    mm = cutefi.mm_bf16 if dtype == torch.bfloat16 else cutefi.mm_fp16
    for m, n, k in [(1, 4104, 1000), (tokens, 1000, 4104), (1, 24, 16)]:
        a, b, bias = operands(m, n, k, dtype)
        with override(config=f"v{tokens}"):
            out = run_into_view(mm, a, b, bias, m, n)
        assert_fp32(out, reference(a, b, bias))


@pytest.mark.parametrize("config", [c.name for c in launch.SM80_CONFIGS])
@pytest.mark.parametrize("b_layout", ["col", "row"])
def test_mma_sync_kernel(config, b_layout):
    """What every GPU but Hopper runs (forced here): fp32 pairs stored from registers."""
    for m, n, k in [(777, 1160, 1032), (1, 8, 8), (33, 264, 40)]:
        a, b, bias = operands(m, n, k, b_layout=b_layout)
        with override(config=config):
            out = run_into_view(cutefi.mm_bf16, a, b, bias, m, n)
        assert_fp32(out, reference(a, b, bias))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("m", [1, 2, 7, 16, 64, 200, 1000, 4096])
def test_default_plan(dtype, m):
    """What a caller gets without an override, on the weights of a model's linear layers."""
    mm = cutefi.mm_bf16 if dtype == torch.bfloat16 else cutefi.mm_fp16
    for n, k in [(4096, 4096), (14336, 4096)] if m <= 1000 else [(4096, 4096)]:
        a, b, bias = operands(m, n, k, dtype)
        out = mm(a, b, out_dtype=F32)
        assert out.shape == (m, n)
        assert_fp32(out, reference(a, b))
        assert_fp32(mm(a, b, bias=bias, out_dtype=F32), reference(a, b, bias))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_bmm(dtype):
    bmm = cutefi.bmm_bf16 if dtype == torch.bfloat16 else cutefi.bmm_fp16
    torch.manual_seed(11)
    batch, m, n, k = 3, 257, 520, 136
    a = torch.randn(batch, m, k, device="cuda", dtype=dtype)
    for b in (torch.randn(batch, n, k, device="cuda", dtype=dtype).transpose(-2, -1),
              torch.randn(batch, k, n, device="cuda", dtype=dtype)):
        out = poisoned((batch, m, n), F32)
        assert bmm(a, b, out=out, out_dtype=F32) is out
        assert_fp32(out, reference(a, b))


def test_out_dtype_must_match_out():
    a, b, _ = operands(4, 64, 64)
    with pytest.raises(ValueError, match="out must be"):
        cutefi.mm_bf16(a, b, out=torch.empty(4, 64, device="cuda", dtype=F32))  # (out_dtype bf16)
    with pytest.raises(TypeError, match="out_dtype"):
        cutefi.mm_bf16(a, b, out_dtype=torch.float64)


def test_torch_compile_fullgraph():
    a, b, bias = operands(64, 1024, 512)

    def layer(x):
        return cutefi.mm_bf16(x, b, bias=bias, out_dtype=F32).softmax(-1)

    compiled = torch.compile(layer, fullgraph=True)
    torch.testing.assert_close(compiled(a), layer(a), rtol=1e-5, atol=1e-6)
    assert_fp32(cutefi.mm_bf16(a, b, bias=bias, out_dtype=F32), reference(a, b, bias))
