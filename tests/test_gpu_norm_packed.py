"""GPU tier: the packed-rows RMSNorm builds (contiguous rows off 16-byte boundaries,
normalised eight rows at a time as one aligned span) against a float32 reference written here;
and LayerNorm on the same rows, which left the packed build in session 25 for the persistent
shifted one (gamma and beta in registers in the row frame its rows share).

The cases put row boundaries everywhere a chunk can hold one (hidden sizes of every residue
modulo 8), row counts that leave a partial last block (1 to 7 rows) and a tensor that ends
inside a chunk, in place, Gemma weights and both FP8 outputs.
"""

import pytest
import torch

import cutefi
from cutefi.norm import packed, plan as norm_plan
from cutefi.norm.api import launch_norm
from test_gpu_norm_quant import FORMATS, assert_fp8_matches, poisoned, quantise

pytestmark = pytest.mark.gpu

# (packed.CLASSES: the hidden sizes each op takes the packed build at)
HIDDEN = [257, 500, 1001, 1023]
ROWS = [1024, 1025, 1031, 4099, 16384]  # 1025, 1031, 4099: a last block of 1, 7, 3 rows
TOLERANCE = {torch.bfloat16: 1e-2, torch.float16: 2e-3}  # relative L2 error


def reference(x, weight, eps=1e-6, gemma=False):
    x32 = x.float()
    w32 = weight.float() + (1.0 if gemma else 0.0)
    return x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + eps) * w32


def assert_close(out, ref, dtype):
    assert not torch.isnan(out.float()).any(), "unwritten (poisoned) elements remain"
    rel = ((out.float() - ref).norm() / ref.norm()).item()
    assert rel < TOLERANCE[dtype], f"relative error {rel:.2e}"
    torch.testing.assert_close(out.float(), ref, rtol=3e-2, atol=3e-2)


def uses_packed_build(x, weight, out, quant=False, bias=None):
    """Whether the call's plan takes the packed build (its kernel's PTX entry says so)."""
    pointers = norm_plan.POINTERS_ALIGNED
    kind = "rms" if bias is None else "layer"
    chosen = norm_plan.check_and_plan(kind, x, weight, bias, out, None, False, "weight", quant, pointers)
    return "_packed" in chosen.kernel.contract.entry


def layer_reference(x, gamma, beta, eps=1e-6):
    x32 = x.float()
    mean = x32.mean(-1, keepdim=True)
    var = (x32 - mean).pow(2).mean(-1, keepdim=True)
    return (x32 - mean) * torch.rsqrt(var + eps) * gamma + beta


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
@pytest.mark.parametrize("hidden", HIDDEN)
@pytest.mark.parametrize("rows", ROWS)
def test_packed_rmsnorm(dtype, hidden, rows):
    x = torch.randn(rows, hidden, device="cuda", dtype=dtype) * 3
    weight = torch.randn(hidden, device="cuda", dtype=dtype)
    # out inside a poisoned buffer: nothing past its end may be written
    storage = cutefi.poison_(torch.empty(rows * hidden + 64, device="cuda", dtype=dtype))
    out = storage[:rows * hidden].view(rows, hidden)
    assert uses_packed_build(x, weight, out)
    cutefi.rmsnorm(x, weight, out=out)
    assert_close(out, reference(x, weight), dtype)
    assert torch.isnan(storage[rows * hidden:].float()).all(), "written past the end of out"


@pytest.mark.parametrize("hidden", [257, 1023])
def test_packed_gemma_and_in_place(hidden):
    rows = 2003
    x = torch.randn(rows, hidden, device="cuda", dtype=torch.bfloat16)
    weight = torch.randn(hidden, device="cuda", dtype=torch.bfloat16) * 0.1
    assert_close(cutefi.gemma_rmsnorm(x, weight), reference(x, weight, gemma=True), torch.bfloat16)
    ref = reference(x, weight)
    cutefi.rmsnorm(x, weight, out=x)  # in place: each thread reads its chunks before writing them
    assert_close(x, ref, torch.bfloat16)


@pytest.mark.parametrize("fp8", list(FORMATS), ids=["e4m3", "e5m2"])
@pytest.mark.parametrize("hidden", [500, 2047, 4095])
@pytest.mark.parametrize("scale", [1e-5, 0.5], ids=["saturating", "half"])
def test_packed_rmsnorm_quant(fp8, hidden, scale):
    rows = 2003
    x = torch.randn(rows, hidden, device="cuda", dtype=torch.bfloat16)
    weight = torch.randn(hidden, device="cuda", dtype=torch.bfloat16)
    out = poisoned((rows, hidden), fp8)
    # 2047 and 4095 take the shifted build (faster there since sessions 26 and 21: packed.CLASSES),
    # checked alike
    assert uses_packed_build(x, weight, out, quant=True) == (hidden < 1024)
    cutefi.rmsnorm_quant(out, x, weight, scale)
    assert_fp8_matches(out, quantise(reference(x, weight), scale, fp8))


def test_few_rows_keep_the_shifted_build():
    x = torch.randn(norm_plan.PACKED_MIN_ROWS - 1, 1023, device="cuda", dtype=torch.bfloat16)
    weight = torch.randn(1023, device="cuda", dtype=torch.bfloat16)
    assert not uses_packed_build(x, weight, torch.empty_like(x))
    assert_close(cutefi.rmsnorm(x, weight), reference(x, weight), torch.bfloat16)


def test_blocks_cover_every_row_once():
    """Many blocks a CTA (a small grid of the persistent loop): every row normalised."""
    rows, hidden = 65537, 1001
    assert packed.blocks_per_cta(rows, 1024, torch.cuda.get_device_properties(0).multi_processor_count) > 1
    x = torch.randn(rows, hidden, device="cuda", dtype=torch.bfloat16)
    weight = torch.randn(hidden, device="cuda", dtype=torch.bfloat16)
    assert_close(cutefi.rmsnorm(x, weight), reference(x, weight), torch.bfloat16)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
@pytest.mark.parametrize("hidden", [257, 1001, 1025, 2047])
@pytest.mark.parametrize("rows", [1024, 1031, 16384])
def test_contiguous_odd_rows_layernorm(dtype, hidden, rows):
    # an offset mean (5) and a spread that differs by row: the centred pass must see them
    x = (torch.randn(rows, hidden, device="cuda") * torch.rand(rows, 1, device="cuda") * 4 + 5).to(dtype)
    gamma = torch.randn(hidden, device="cuda")
    beta = torch.randn(hidden, device="cuda")
    storage = cutefi.poison_(torch.empty(rows * hidden + 64, device="cuda", dtype=dtype))
    out = storage[:rows * hidden].view(rows, hidden)
    assert not uses_packed_build(x, gamma, out, bias=beta)
    # (FlashInfer's layernorm has no out=: the op under it writes into a poisoned buffer)
    launch_norm("layer", x, gamma, beta, out, None, 1e-6, False)
    assert_close(out, layer_reference(x, gamma, beta), dtype)
    assert_close(cutefi.layernorm(x, gamma, beta), layer_reference(x, gamma, beta), dtype)
    assert torch.isnan(storage[rows * hidden:].float()).all(), "written past the end of out"


@pytest.mark.parametrize("fp8", list(FORMATS), ids=["e4m3", "e5m2"])
@pytest.mark.parametrize("hidden", [500, 2047])
def test_contiguous_odd_rows_layernorm_quant(fp8, hidden):
    rows = 20003  # several rows a thread of the persistent build
    x = torch.randn(rows, hidden, device="cuda", dtype=torch.bfloat16) + 2
    gamma = torch.randn(hidden, device="cuda")
    beta = torch.randn(hidden, device="cuda")
    out = poisoned((rows, hidden), fp8)
    assert not uses_packed_build(x, gamma, out, quant=True, bias=beta)
    cutefi.layernorm_quant(out, x, gamma, beta, 0.25)
    assert_fp8_matches(out, quantise(layer_reference(x, gamma, beta), 0.25, fp8))
