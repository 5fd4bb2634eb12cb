"""GPU tier: hidden sizes above 32768 (the long-row builds, ``norm/long_rows.py``) for every norm op,
against float32 references written here; outputs poisoned first, row gaps poisoned and checked.

Aligned rows (hidden, strides and pointers multiples of 8 elements) take the 128-bit build, the
rest the element-access build; both are covered, with 2-D rows, 3-D views of uneven rows and
misaligned pointers.
"""

import pytest
import torch
import torch.nn.functional as F

import cutefi

pytestmark = pytest.mark.gpu

DTYPES = [torch.bfloat16, torch.float16]
DTYPE_IDS = ["bf16", "fp16"]
TOLERANCE = {torch.bfloat16: 1e-2, torch.float16: 2e-3}  # relative L2 error
FP8 = {torch.float8_e4m3fn: 448.0, torch.float8_e5m2: 57344.0}
# hidden sizes: 32769 and 40001 (not multiples of 8: the element build), 40000, 65536, 131072
HIDDEN = [32769, 40000, 40001, 65536, 131072]


def rms_ref(s, weight, eps=1e-6, gemma=False):
    w = weight.float() + (1.0 if gemma else 0.0)
    return s * torch.rsqrt(s.pow(2).mean(-1, keepdim=True) + eps) * w


def layer_ref(x, gamma, beta, eps=1e-6):
    return F.layer_norm(x.float(), (x.shape[-1],), gamma, beta, eps)


def quantise(y, scale, fp8):
    top = FP8[fp8]
    return (y * (1.0 / torch.tensor(scale, dtype=torch.float32))).clamp(-top, top).to(fp8)


def assert_close(out, ref, dtype):
    assert not torch.isnan(out.float()).any(), "NaN in the output (unwritten, or a read of a poisoned gap)"
    rel = ((out.float() - ref).norm() / ref.norm()).item()
    assert rel < TOLERANCE[dtype], f"relative error {rel:.2e}"
    torch.testing.assert_close(out.float(), ref, rtol=3e-2, atol=3e-2)


def assert_fp8_matches(out, ref, max_mismatch=0.01):
    """Identical but a small share of elements one FP8 step apart (never more)."""
    got, want = out.float(), ref.float()
    assert not torch.isnan(got).any(), "unwritten (poisoned) or NaN elements"
    differ = got != want
    assert differ.float().mean().item() <= max_mismatch
    if differ.any():
        mant, min_exp = (3, -6) if out.dtype == torch.float8_e4m3fn else (2, -14)
        big = torch.maximum(got.abs(), want.abs())[differ]
        step = torch.exp2(torch.floor(torch.log2(big.clamp_min(2.0 ** min_exp))) - mant)
        assert ((got - want).abs()[differ] <= step * 1.0001).all(), "elements more than one FP8 step apart"


def rows_in_gaps(rows, hidden, dtype, gap=24, offset=0):
    """``rows`` rows of fresh values in a wider poisoned buffer (NaN gaps, never to be read or
    written); ``offset`` elements into it (a pointer off 16 bytes when odd)."""
    base = torch.empty(rows, hidden + gap, device="cuda", dtype=dtype)
    cutefi.poison_(base)
    view = base[:, offset:offset + hidden]
    view.copy_(torch.randn(rows, hidden, device="cuda") * 2 + 0.5)
    return base, view


def gaps_untouched(base, view, offset):
    gap = torch.ones(base.shape, dtype=torch.bool, device=base.device)
    gap[:, offset:offset + view.shape[1]] = False
    return bool(torch.isnan(base[gap].float()).all())


def poisoned_like(x, dtype=None):
    out = torch.empty(x.shape, device=x.device, dtype=dtype or x.dtype)
    if out.dtype in FP8:
        out.view(torch.uint8).fill_(0x7F)  # NaN in both formats
    else:
        cutefi.poison_(out)
    return out


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("hidden", HIDDEN)
@pytest.mark.parametrize("rows", [1, 3, 257])
@pytest.mark.parametrize("gemma", [False, True], ids=["rms", "gemma"])
def test_rmsnorm(dtype, hidden, rows, gemma):
    x = (torch.randn(rows, hidden, device="cuda") * 2 + 0.5).to(dtype)
    w = torch.randn(hidden, device="cuda").to(dtype)
    out = poisoned_like(x)
    (cutefi.gemma_rmsnorm if gemma else cutefi.rmsnorm)(x, w, 1e-6, out=out)
    assert_close(out, rms_ref(x.float(), w, gemma=gemma), dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("hidden", [32769, 40000, 65536])
@pytest.mark.parametrize("gemma", [False, True], ids=["rms", "gemma"])
def test_fused_add_rmsnorm_numerics(dtype, hidden, gemma):
    """FlashInfer's definition: s = float(x) + float(r); residual = round(s); x = s * rsqrt(mean(s^2)
    + eps) * w from the fp32 s."""
    x = (torch.randn(33, hidden, device="cuda") * 2).to(dtype)
    r = (torch.randn(33, hidden, device="cuda") * 2).to(dtype)
    w = torch.randn(hidden, device="cuda").to(dtype)
    s = x.float() + r.float()
    want_residual, want = s.to(dtype), rms_ref(s, w, gemma=gemma)
    (cutefi.gemma_fused_add_rmsnorm if gemma else cutefi.fused_add_rmsnorm)(x, r, w, 1e-6)
    assert torch.equal(r, want_residual), "residual is not round(x + residual)"
    assert_close(x, want, dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("hidden", HIDDEN)
@pytest.mark.parametrize("rows", [1, 257])
def test_layernorm(dtype, hidden, rows):
    x = (torch.randn(rows, hidden, device="cuda") * 2 + 0.5).to(dtype)
    gamma, beta = torch.randn(hidden, device="cuda"), torch.randn(hidden, device="cuda")
    assert_close(cutefi.layernorm(x, gamma, beta, 1e-6), layer_ref(x, gamma, beta), dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("hidden", [40000, 40001])
def test_layernorm_rows_far_from_zero_mean(dtype, hidden):
    """Rows of mean 1000 and std 1: the variance must not come from sum(x^2) - n * mean^2."""
    x = (torch.randn(65, hidden, device="cuda") + 1000.0).to(dtype)
    gamma, beta = torch.randn(hidden, device="cuda"), torch.randn(hidden, device="cuda")
    x64 = x.double()
    mean = x64.mean(-1, keepdim=True)
    ref = (x64 - mean) * torch.rsqrt(((x64 - mean) ** 2).mean(-1, keepdim=True) + 1e-6) * gamma.double() + beta.double()
    assert_close(cutefi.layernorm(x, gamma, beta, 1e-6), ref.float(), dtype)


@pytest.mark.parametrize("fp8", FP8, ids=["e4m3", "e5m2"])
@pytest.mark.parametrize("hidden", [32769, 65536])
@pytest.mark.parametrize("op", ["rmsnorm_quant", "fused_add_rmsnorm_quant", "layernorm_quant"])
def test_quant(fp8, hidden, op):
    x = (torch.randn(17, hidden, device="cuda") * 3 + 1).to(torch.bfloat16)
    out = poisoned_like(x, fp8)
    scale = torch.tensor([0.25], device="cuda")
    if op == "layernorm_quant":
        gamma, beta = torch.randn(hidden, device="cuda"), torch.randn(hidden, device="cuda")
        cutefi.layernorm_quant(out, x, gamma, beta, scale)
        y = layer_ref(x, gamma, beta)
    elif op == "rmsnorm_quant":
        w = torch.randn(hidden, device="cuda").to(torch.bfloat16)
        cutefi.rmsnorm_quant(out, x, w, scale)
        y = rms_ref(x.float(), w)
    else:
        w = torch.randn(hidden, device="cuda").to(torch.bfloat16)
        r = torch.randn(17, hidden, device="cuda").to(torch.bfloat16)
        x_before, s = x.clone(), x.float() + r.float()
        cutefi.fused_add_rmsnorm_quant(out, x, r, w, 0.25)
        assert torch.equal(x, x_before), "input was written"
        assert torch.equal(r, s.to(torch.bfloat16)), "residual is not round(x + residual)"
        y = rms_ref(s, w)
    assert_fp8_matches(out, quantise(y, 0.25, fp8))


@pytest.mark.parametrize("offset", [0, 1], ids=["aligned", "pointer-off-16B"])
@pytest.mark.parametrize("hidden", [40000, 40001])
def test_rows_in_a_wider_buffer(offset, hidden):
    """Rows strided in a poisoned buffer, x and out at their own offsets (16-byte aligned: the
    128-bit build where the hidden size allows; else the element build): every row normalised,
    nothing outside the rows read or written."""
    base, x = rows_in_gaps(9, hidden, torch.bfloat16, offset=offset)
    out_offset = 8 if offset == 0 else 3
    out_base, out = rows_in_gaps(9, hidden, torch.bfloat16, gap=40, offset=out_offset)
    out.fill_(float("nan"))
    w = torch.randn(hidden, device="cuda").to(torch.bfloat16)
    cutefi.rmsnorm(x, w, 1e-6, out=out)
    assert_close(out, rms_ref(x.float(), w), torch.bfloat16)
    assert gaps_untouched(out_base, out, out_offset), "written outside out's rows"
    r_base, r = rows_in_gaps(9, hidden, torch.bfloat16, offset=offset)
    s = x.float() + r.float()
    cutefi.fused_add_rmsnorm(x, r, w, 1e-6)
    assert torch.equal(r, s.to(torch.bfloat16))
    assert_close(x, rms_ref(s, w), torch.bfloat16)
    assert gaps_untouched(base, x, offset) and gaps_untouched(r_base, r, offset), "written outside the rows"


@pytest.mark.parametrize("hidden", [40000, 40001])
def test_heads_of_uneven_rows(hidden):
    """qk-norm on a slice of a fused buffer: ``[tokens, 2 * heads, head_dim][:, :heads]``."""
    buffer = torch.randn(5, 6, hidden, device="cuda").to(torch.bfloat16)
    x = buffer[:, :3, :]
    w = torch.randn(hidden, device="cuda").to(torch.bfloat16)
    other = buffer[:, 3:, :].clone()
    want = rms_ref(x.float(), w)
    cutefi.rmsnorm(x, w, 1e-6, out=x)
    assert_close(x, want, torch.bfloat16)
    assert torch.equal(buffer[:, 3:, :], other), "wrote the other heads"


def test_cuda_graph_replay():
    x = torch.randn(64, 65536, device="cuda").to(torch.bfloat16)
    w = torch.randn(65536, device="cuda").to(torch.bfloat16)
    out = torch.empty_like(x)
    cutefi.rmsnorm(x, w, 1e-6, out=out)  # plan and load outside the capture
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        cutefi.rmsnorm(x, w, 1e-6, out=out)
    x.copy_(torch.randn(64, 65536, device="cuda"))
    cutefi.poison_(out)
    graph.replay()
    torch.cuda.synchronize()
    assert_close(out, rms_ref(x.float(), w), torch.bfloat16)
