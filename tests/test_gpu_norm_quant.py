"""GPU tier: the FP8-quantising norms against a float32 reference, both FP8 formats.

FlashInfer's semantics: ``out = fp8(clamp(y * (1 / scale), -max, max))`` with ``y`` the norm
in fp32 (for the fused add, of the fp32 sum; ``residual`` becomes the rounded sum and ``input``
is left alone). The reference below is written here in torch; values may differ from it by one
FP8 step where ``y`` itself differs in its last fp32 bits, never by more.
"""

import pytest
import torch
import torch.nn.functional as F

import cutefi

pytestmark = pytest.mark.gpu

BF16 = torch.bfloat16
FORMATS = {torch.float8_e4m3fn: 448.0, torch.float8_e5m2: 57344.0}
FORMAT_IDS = ["e4m3", "e5m2"]


def quantise(y, scale, fp8):
    top = FORMATS[fp8]
    return (y * (1.0 / torch.tensor(scale, dtype=torch.float32))).clamp(-top, top).to(fp8)


def rms(x, weight, eps=1e-6):
    x32 = x.float()
    return x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + eps) * weight.float()


def assert_fp8_matches(out, ref, max_mismatch=0.01, floor=0.0):
    """Identical, except a small share of elements one FP8 step apart (never more; ``floor``: an
    absolute error the reference itself allows on top, where its fp32 inputs carry one)."""
    assert out.dtype == ref.dtype
    got, want = out.float(), ref.float()
    assert not torch.isnan(got).any(), "unwritten (poisoned) or NaN elements"
    differ = got != want
    share = differ.float().mean().item()
    assert share <= max_mismatch, f"{share:.2%} of elements differ from the reference"
    if differ.any():
        # one step of the format at the larger magnitude of the two
        mant, min_exp = (3, -6) if out.dtype == torch.float8_e4m3fn else (2, -14)
        big = torch.maximum(got.abs(), want.abs())[differ]
        # the step of the binade, and below the smallest normal the subnormal step
        step = torch.exp2(torch.floor(torch.log2(big.clamp_min(2.0 ** min_exp))) - mant)
        assert ((got - want).abs()[differ] <= step * 1.0001 + floor).all(), "elements more than one FP8 step apart"


def poisoned(shape, fp8):
    out = torch.empty(shape, device="cuda", dtype=fp8)
    out.view(torch.uint8).fill_(0x7F)  # NaN in both formats
    return out


@pytest.mark.parametrize("fp8", FORMATS, ids=FORMAT_IDS)
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
@pytest.mark.parametrize("hidden", [1, 7, 111, 129, 500, 4095, 4096, 16384, 32768])
@pytest.mark.parametrize("scale", [1e-5, 1.0, 7.0], ids=["saturating", "unit", "small-values"])
def test_rmsnorm_quant(fp8, dtype, hidden, scale):
    x = torch.randn(257, hidden, device="cuda", dtype=dtype)
    weight = (torch.rand(hidden, device="cuda") + 0.5).to(dtype)
    out = poisoned(x.shape, fp8)
    cutefi.rmsnorm_quant(out, x, weight, scale)
    expected = quantise(rms(x, weight), scale, fp8)
    # Rows of fewer than 8 elements share their few weights: at hidden 1 every |y| is about
    # w / scale, and where that sits on a rounding tie of the format (w = 63/64, scale 7 for
    # e5m2) the kernel's and the reference's last-bit differences flip every row alike. The
    # one-step bound still holds; the share of such elements says nothing there.
    assert_fp8_matches(out, expected, max_mismatch=1.0 if hidden < 8 else 0.01)
    if scale == 1e-5 and hidden > 7:  # |y| up to ~6, over 1e-5: a share saturates to exactly +-max
        assert (out.float().abs() == FORMATS[fp8]).any()


@pytest.mark.parametrize("fp8", FORMATS, ids=FORMAT_IDS)
@pytest.mark.parametrize("hidden", [7, 129, 4096, 8192])
def test_fused_add_rmsnorm_quant(fp8, hidden):
    x = torch.randn(300, hidden, device="cuda", dtype=BF16)
    residual = torch.randn_like(x)
    weight = torch.randn(hidden, device="cuda", dtype=BF16)
    scale = torch.tensor([0.5], device="cuda")
    s = x.float() + residual.float()
    x_before = x.clone()
    out = poisoned(x.shape, fp8)
    cutefi.fused_add_rmsnorm_quant(out, x, residual, weight, scale)
    assert torch.equal(residual, s.to(BF16)), "residual is not round(input + residual)"
    assert torch.equal(x, x_before), "input was written"
    assert_fp8_matches(out, quantise(rms(s, weight), 0.5, fp8))


@pytest.mark.parametrize("fp8", FORMATS, ids=FORMAT_IDS)
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
@pytest.mark.parametrize("hidden", [1, 111, 1000, 2047, 2048, 4095, 4096, 8191, 16384])
def test_layernorm_quant(fp8, dtype, hidden):
    x = (torch.randn(200, hidden, device="cuda") * 3 + 1).to(dtype)
    gamma, beta = torch.randn(hidden, device="cuda"), torch.randn(hidden, device="cuda")
    out = poisoned(x.shape, fp8)
    cutefi.layernorm_quant(out, x, gamma, beta, 0.25)
    y = F.layer_norm(x.float(), (hidden,), gamma, beta, 1e-6)
    assert_fp8_matches(out, quantise(y, 0.25, fp8))


@pytest.mark.parametrize("param_dtype", [torch.bfloat16, torch.float16], ids=["bf16-params", "fp16-params"])
@pytest.mark.parametrize("hidden, rows", [(4096, 5), (4095, 5), (4096, 6001), (4095, 3001)])
def test_layernorm_quant_16bit_gamma_and_beta(param_dtype, hidden, rows):
    """16-bit gamma and beta (as :func:`cutefi.layernorm` takes them) give their float32 values' result:
    bf16 ones (the input's dtype) read as they are by the 16-bit-parameter builds (one-row, persistent
    with gamma and beta prescaled by 1/scale, shifted), bit for bit the fp32 builds' output given the
    same values; fp16 ones on widened copies."""
    x = (torch.randn(rows, hidden, device="cuda") * 3 + 1).to(BF16)
    gamma, beta = torch.randn(hidden, device="cuda").to(param_dtype), torch.randn(hidden, device="cuda").to(param_dtype)
    out = poisoned(x.shape, torch.float8_e4m3fn)
    cutefi.layernorm_quant(out, x, gamma, beta, 0.25)
    y = F.layer_norm(x.float(), (hidden,), gamma.float(), beta.float(), 1e-6)
    assert_fp8_matches(out, quantise(y, 0.25, torch.float8_e4m3fn))
    via_fp32 = poisoned(x.shape, torch.float8_e4m3fn)
    cutefi.layernorm_quant(via_fp32, x, gamma.float(), beta.float(), 0.25)
    assert torch.equal(out.view(torch.uint8), via_fp32.view(torch.uint8))


@pytest.mark.parametrize("fp8", FORMATS, ids=FORMAT_IDS)
@pytest.mark.parametrize("hidden, rows", [(1000, 4001), (2048, 2999), (4096, 6001), (4095, 3001), (5000, 1500),
                                          (8191, 1200), (16384, 701), (16383, 1501)])
def test_layernorm_quant_many_rows_a_thread(fp8, hidden, rows):
    """Row counts that give the persistent builds several rows a thread (row_iters > 1) with a
    partial last round: every row normalised once, none written twice or skipped."""
    x = (torch.randn(rows, hidden, device="cuda") * 3 + 1).to(BF16)
    gamma, beta = torch.randn(hidden, device="cuda"), torch.randn(hidden, device="cuda")
    out = poisoned(x.shape, fp8)
    cutefi.layernorm_quant(out, x, gamma, beta, 0.25)
    y = F.layer_norm(x.float(), (hidden,), gamma, beta, 1e-6)
    assert_fp8_matches(out, quantise(y, 0.25, fp8))


@pytest.mark.parametrize("fp8", FORMATS, ids=FORMAT_IDS)
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
@pytest.mark.parametrize("hidden, rows", [(1024, 4001), (2048, 2999), (4096, 6001), (8192, 1200), (16384, 701)])
def test_layernorm_quant_rows_far_from_zero_mean(fp8, dtype, hidden, rows):
    """Rows of mean 1000 and std 1 on the persistent builds: the variance must not come from
    sum(x^2) - n * mean^2 (which cancels to noise here). The reference is float64: fp32 itself
    puts an absolute error of about ulp(1000) * |gamma| * rstd / scale (1.2e-3 here; torch's
    own fp32 layer_norm measured 1.0e-3) on every output, more than an FP8 step near 0."""
    x = (torch.randn(rows, hidden, device="cuda") + 1000.0).to(dtype)
    gamma, beta = torch.randn(hidden, device="cuda"), torch.randn(hidden, device="cuda")
    out = poisoned(x.shape, fp8)
    cutefi.layernorm_quant(out, x, gamma, beta, 0.25)
    x64 = x.double()
    mean = x64.mean(-1, keepdim=True)
    y = (x64 - mean) * torch.rsqrt(((x64 - mean) ** 2).mean(-1, keepdim=True) + 1e-6) * gamma.double() + beta.double()
    assert_fp8_matches(out, quantise(y.float(), 0.25, fp8), floor=2.5e-3)


@pytest.mark.parametrize("fp8", FORMATS, ids=FORMAT_IDS)
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
@pytest.mark.parametrize("rows", [1, 131, 3001, 20001])
@pytest.mark.parametrize("hidden", [2047, 4095, 8191, 16383])
def test_rmsnorm_quant_shifted_rows_a_thread(fp8, dtype, rows, hidden):
    """The shifted FP8 RMSNorm builds that loop over rows (tuning.RMS_SHIFTED_PREFETCH: their
    ring and held weight from several rows a thread, the one-row path for a row a thread), odd
    rows and a 3-D view of odd strides (heads of tokens, every lead), with a scale tensor:
    every row once, nothing outside."""
    from cutefi.norm.api import launch_norm
    x = (torch.randn(rows, hidden, device="cuda") * 2 + 0.5).to(dtype)
    weight = torch.randn(hidden, device="cuda", dtype=dtype)
    out = poisoned(x.shape, fp8)
    cutefi.rmsnorm_quant(out, x, weight, torch.tensor([0.5], device="cuda"))
    assert_fp8_matches(out, quantise(rms(x, weight), 0.5, fp8))
    tokens, heads, width = max(1, rows // 3), 3, hidden + 4
    base = torch.randn(tokens, heads + 1, width, device="cuda").to(dtype)
    view = base[:, 1:, 3:hidden + 3]
    out_base = poisoned((tokens, heads + 1, width), fp8)
    out_view = out_base[:, 1:, 3:hidden + 3]
    launch_norm("rms", view, weight, None, out_view, None, 1e-6, False, scale=2.0)
    assert_fp8_matches(out_view, quantise(rms(view, weight), 2.0, fp8))
    outside = torch.ones(out_base.shape, dtype=torch.bool, device="cuda")
    outside[:, 1:, 3:hidden + 3] = False
    assert torch.isnan(out_base.float()[outside]).all(), "written outside out's rows"


def test_scale_tensor_is_read_on_the_device_in_a_cuda_graph():
    x = torch.randn(64, 4096, device="cuda", dtype=BF16)
    weight = torch.randn(4096, device="cuda", dtype=BF16)
    scale = torch.tensor([1.0], device="cuda")
    out = poisoned(x.shape, torch.float8_e4m3fn)
    cutefi.rmsnorm_quant(out, x, weight, scale)  # load before capture
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        cutefi.rmsnorm_quant(out, x, weight, scale)
    for value in (0.5, 3.0):
        scale.fill_(value)
        graph.replay()
        torch.cuda.synchronize()
        assert_fp8_matches(out, quantise(rms(x, weight), value, torch.float8_e4m3fn))


@pytest.mark.parametrize("op", ["rmsnorm_quant", "fused_add_rmsnorm_quant", "layernorm_quant"])
@pytest.mark.parametrize("scale_dtype", [torch.float16, torch.bfloat16, torch.float64, torch.int32, torch.int64,
                                         torch.uint8], ids=lambda d: str(d)[6:])
@pytest.mark.parametrize("device", ["cuda", "cpu"])
def test_scale_tensor_of_any_real_dtype_is_its_float32_value(op, scale_dtype, device):
    """FlashInfer takes a one-element scale tensor of any real dtype, on any device, as its
    float32 value (an integer tensor too): the output matches the float32 reference and is bit for
    bit the call with the same scale given as a float."""
    x = torch.randn(33, 4096, device="cuda", dtype=BF16)
    residual = torch.randn_like(x)
    weight = (torch.rand(4096, device="cuda") + 0.5).to(BF16)
    gamma, beta = torch.randn(4096, device="cuda"), torch.randn(4096, device="cuda")
    fp8 = torch.float8_e4m3fn

    def run(scale):
        out = poisoned(x.shape, fp8)
        if op == "rmsnorm_quant":
            cutefi.rmsnorm_quant(out, x, weight, scale)
        elif op == "fused_add_rmsnorm_quant":
            cutefi.fused_add_rmsnorm_quant(out, x, residual.clone(), weight, scale)
        else:
            cutefi.layernorm_quant(out, x, gamma, beta, scale)
        return out

    with_tensor = run(torch.full((1,), 2, dtype=scale_dtype, device=device))
    with_float = run(2.0)
    assert torch.equal(with_tensor.view(torch.uint8), with_float.view(torch.uint8))
    if op == "rmsnorm_quant":
        y = rms(x, weight)
    elif op == "fused_add_rmsnorm_quant":  # the norm of the fp32 sum (FlashInfer's numerics)
        s = x.float() + residual.float()
        y = s * torch.rsqrt(s.pow(2).mean(-1, keepdim=True) + 1e-6) * weight.float()
    else:
        y = F.layer_norm(x.float(), (x.shape[-1],), gamma, beta, 1e-6)
    assert_fp8_matches(with_tensor, quantise(y, 2.0, fp8))


# y / scale: subnormals and zeros (64, 4096), normal values (1, 1/64), saturation (1/4096, 1e-5)
SCALES = (1.0, 1 / 64, 64.0, 4096.0, 1 / 4096, 1e-5)


@pytest.mark.parametrize("fp8", FORMATS, ids=FORMAT_IDS)
def test_software_conversion_matches_the_hardware_bit_for_bit(fp8, monkeypatch):
    """sm_80/sm_86 convert to FP8 in arithmetic (no FP8 instructions): that build, made for
    this GPU, must give the same bytes as the hardware conversion on every value class
    (normal, subnormal, zero, saturated)."""
    from cutefi.dtypes import name_of
    from cutefi.norm import api, launch, plan

    x = torch.randn(4096, 4096, device="cuda", dtype=BF16)
    weight = torch.randn(4096, device="cuda", dtype=BF16)
    results = []
    for software in (False, True):
        if software:
            monkeypatch.setattr(plan, "spec_for", lambda *a, **k: launch.SOFTWARE_FP8_SPECS[name_of(fp8)])
        api._PLANS.clear()
        for scale in SCALES:
            out = poisoned(x.shape, fp8)
            cutefi.rmsnorm_quant(out, x, weight, scale)
            results.append(out.view(torch.uint8).clone())
    api._PLANS.clear()
    for hardware, software in zip(results[:len(SCALES)], results[len(SCALES):]):
        mismatch = (hardware != software).sum().item()
        assert mismatch == 0, f"{mismatch} bytes differ"
