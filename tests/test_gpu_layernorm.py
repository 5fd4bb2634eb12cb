"""GPU tier: LayerNorm (fp16/bf16 input; float32, or bf16/fp16 as FlashInfer's CuTe LayerNorm
takes them, gamma and beta) against a float32 reference."""

import pytest
import torch
import torch.nn.functional as F

import cutefi
from norm_cases import row_norm_cases

pytestmark = pytest.mark.gpu

HIDDEN = [1, 7, 64, 111, 129, 136, 500, 1000, 2047, 2048, 4095, 4096, 5120, 8191, 16383, 16384]
ROWS = [1, 7, 128, 4096, 65536]
TOLERANCE = {torch.bfloat16: 1e-2, torch.float16: 2e-3}  # relative L2 error
DTYPES = [torch.bfloat16, torch.float16]
DTYPE_IDS = ["bf16", "fp16"]


def reference(x, gamma, beta, eps=1e-6):
    return F.layer_norm(x.float(), (x.shape[-1],), gamma, beta, eps)


def assert_close(out, ref, dtype):
    assert not torch.isnan(out).any(), "NaN in the output (a read of the poisoned row gap?)"
    rel = ((out.float() - ref).norm() / ref.norm()).item()
    assert rel < TOLERANCE[dtype], f"relative error {rel:.2e}"
    torch.testing.assert_close(out.float(), ref, rtol=3e-2, atol=3e-2)


def make_input(rows, hidden, dtype, strided, mean=0.5, std=2.0):
    """Rows with a nonzero mean; strided rows sit in a wider buffer whose gap is NaN (never to be read)."""
    data = torch.randn(rows, hidden, device="cuda") * std + mean
    if not strided:
        return data.to(dtype)
    base = torch.empty(rows, hidden + 24, device="cuda", dtype=dtype)
    cutefi.poison_(base)
    x = base[:, :hidden]
    x.copy_(data)
    return x


def make_params(hidden):
    return torch.randn(hidden, device="cuda"), torch.randn(hidden, device="cuda")


CASES = list(row_norm_cases(zip(DTYPES, DTYPE_IDS), HIDDEN, ROWS))


@pytest.mark.parametrize("dtype, hidden, rows, strided", CASES)
def test_layernorm(dtype, hidden, rows, strided):
    x = make_input(rows, hidden, dtype, strided)
    gamma, beta = make_params(hidden)
    x_before = x.clone()
    out = cutefi.layernorm(x, gamma, beta, eps=1e-6)
    assert out.shape == (rows, hidden) and out.dtype == dtype and out.is_contiguous()
    assert_close(out, reference(x, gamma, beta, 1e-6), dtype)
    assert torch.equal(x, x_before), "layernorm changed its input"


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("hidden, rows", [(1, 5), (3, 7), (8, 5), (16, 3), (32767, 3), (32768, 3), (32768, 257)])
def test_smallest_and_largest_hidden(dtype, hidden, rows):
    x = make_input(rows, hidden, dtype, strided=False)
    gamma, beta = make_params(hidden)
    assert_close(cutefi.layernorm(x, gamma, beta), reference(x, gamma, beta), dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("eps, std", [(None, 1e-3), (1e-2, 0.1)], ids=["default-eps", "eps-1e-2"])
def test_eps_inside_the_square_root(dtype, eps, std):
    # variance ~ eps: a dropped, misplaced or wrong default eps changes the result by ~sqrt(2)
    x = make_input(333, 2048, dtype, strided=False, mean=std, std=std)
    gamma, beta = make_params(2048)
    out = cutefi.layernorm(x, gamma, beta) if eps is None else cutefi.layernorm(x, gamma, beta, eps=eps)
    assert_close(out, reference(x, gamma, beta, 1e-6 if eps is None else eps), dtype)


@pytest.mark.parametrize("tokens, heads, hidden, width", [(6000, 5, 1000, 1001), (4001, 3, 2047, 2049),
                                                          (3000, 7, 4095, 4097), (500, 3, 16383, 16387)])
def test_strided_3d_views_on_the_persistent_build(tokens, heads, hidden, width):
    """[tokens, heads, hidden] slices of a wider buffer with odd strides, enough rows for
    several a thread: a thread's rows share their lead only through the plan's grid
    (launch.persistent_grid over the heads), which this checks row by row."""
    from cutefi.norm import plan as norm_plan
    from cutefi.norm.api import launch_norm
    base = cutefi.poison_(torch.empty(tokens, heads + 2, width, device="cuda", dtype=torch.bfloat16))
    x = base[:, 1:heads + 1, 1:hidden + 1]
    x.copy_(torch.randn(tokens, heads, hidden, device="cuda") * 2 + 3)
    out_base = cutefi.poison_(torch.empty_like(base))
    out = out_base[:, 1:heads + 1, 1:hidden + 1]  # rows alike x's in their 16-byte chunks
    gamma, beta = make_params(hidden)
    pointers = norm_plan.pointer_mode(x.data_ptr(), gamma.data_ptr(), beta.data_ptr(), out.data_ptr(),
                                      x.data_ptr(), 2)
    chosen = norm_plan.check_and_plan("layer", x, gamma, beta, out, None, False, "gamma", False, pointers)
    assert chosen.row_iters > 1 and chosen.heads == heads and chosen.shifted and not chosen.staged
    launch_norm("layer", x, gamma, beta, out, None, 1e-6, False)
    assert_close(out, reference(x, gamma, beta), torch.bfloat16)
    outside = torch.ones_like(out_base, dtype=torch.bool)
    outside[:, 1:heads + 1, 1:hidden + 1] = False
    assert torch.isnan(out_base[outside].float()).all(), "written outside out's rows"


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("hidden, rows", [(64, 37), (4096, 37), (4096, 2048), (16384, 37), (4095, 37),
                                         (4095, 16384), (2047, 3001), (1000, 5000), (16383, 1001)])
def test_constant_rows_give_beta(dtype, hidden, rows):
    # zero variance: out == beta exactly in math; eps keeps it finite (values exact in fp16/bf16).
    # Odd hidden sizes: the shifted builds take the end chunks' out-of-row zeros off the
    # variance as a count times mean^2, which must not round it below 0 (NaN)
    levels = (torch.arange(rows, device="cuda") % 9 - 4).float() * 0.25 + (100.0 if hidden % 8 else 0.0)
    x = levels[:, None].expand(rows, hidden).to(dtype).contiguous()
    gamma, beta = make_params(hidden)
    out = cutefi.layernorm(x, gamma, beta, eps=1e-5)
    assert not torch.isnan(out).any() and not torch.isinf(out).any()
    torch.testing.assert_close(out.float(), beta.expand(rows, hidden), rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("hidden, rows", [(4096, 37), (4096, 2048), (4000, 3001), (2048, 4096), (4095, 4096),
                                         (1024, 16384), (2048, 16384), (16384, 2048)])
def test_rows_far_from_zero_mean(dtype, hidden, rows):
    """Rows of mean 1000 and std 1: the variance must not come from sum(x^2) - n * mean^2 (which
    cancels to noise here). 4096 at 2048 rows: the build whose one reduction combines each
    thread's (count, mean, squared deviations); 1024, 2048 and 16384 from 2048 rows: the
    persistent builds, whose full rows do the same (``layer_stats.py``)."""
    x = make_input(rows, hidden, dtype, False, mean=1000.0, std=1.0)
    gamma, beta = make_params(hidden)
    assert_close(cutefi.layernorm(x, gamma, beta, eps=1e-6), reference(x, gamma, beta), dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("spike", [30.0, -3000.0])
@pytest.mark.parametrize("hidden", [2048, 4096])
def test_first_elements_far_from_the_rest(dtype, spike, hidden):
    """A full row (the fast path of the 4096 build and of the persistent 2048 one) sums each
    thread's values shifted by the first of them: every 4th column (each thread's first element
    is one of them on both builds) far from the others."""
    x = torch.randn(4096, hidden, device="cuda") + 1000.0
    x[:, ::4] += spike
    x = x.to(dtype)
    gamma, beta = make_params(hidden)
    assert_close(cutefi.layernorm(x, gamma, beta, eps=1e-6), reference(x, gamma, beta), dtype)


def test_row_gap_is_neither_read_nor_written():
    base = torch.empty(64, 4096 + 64, device="cuda", dtype=torch.bfloat16)
    cutefi.poison_(base)
    x = base[:, :4096]
    x.copy_(torch.randn(64, 4096, device="cuda") + 0.5)
    gamma, beta = make_params(4096)
    out = cutefi.layernorm(x, gamma, beta)
    assert_close(out, reference(x, gamma, beta), torch.bfloat16)
    assert torch.isnan(base[:, 4096:]).all()


# (1000, 100), (2048, 300), (4095, 300), (16383, 50): the persistent builds' one-row path (a row a
# thread), the 16-bit builds' only; (4095, 200) the shifted latency build
PARAM16_CASES = [(1, 3), (111, 7), (4096, 1), (4096, 37), (4095, 4096), (4096, 16384), (40000, 3), (1000, 100),
                 (2048, 300), (4095, 300), (4095, 200), (16383, 50)]


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("param_dtype", [torch.bfloat16, torch.float16], ids=["bf16-params", "fp16-params"])
@pytest.mark.parametrize("hidden, rows", PARAM16_CASES)
def test_16bit_gamma_and_beta(dtype, param_dtype, hidden, rows):
    """FlashInfer's CuTe LayerNorm takes gamma and beta in 16 bits (a bf16 model's nn.LayerNorm
    weights): the same result as their float32 values, on the aligned, shifted, persistent and
    long-row builds, and in a CUDA graph. Both in the input's dtype: read as they are by the
    16-bit-parameter builds, bit for bit the output of the fp32 builds given the same values
    (the arithmetic is the same fp32); other mixes and the long rows run on widened copies (made
    inside the capture)."""
    x = make_input(rows, hidden, dtype, strided=False)
    gamma, beta = (p.to(param_dtype) for p in make_params(hidden))
    expected = reference(x, gamma.float(), beta.float())
    out = cutefi.layernorm(x, gamma, beta)
    assert_close(out, expected, dtype)
    assert torch.equal(out, cutefi.layernorm(x, gamma.float(), beta.float()))
    mixed = cutefi.layernorm(x, gamma, beta.float())  # one of each: each taken as it is
    assert_close(mixed, expected, dtype)
    if rows * hidden <= 4096 * 37:
        cutefi.layernorm(x, gamma, beta)  # warm the plans outside the capture
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            captured = cutefi.layernorm(x, gamma, beta)
        gamma.copy_(torch.randn(hidden, device="cuda").to(param_dtype))  # a replay reads the new values
        graph.replay()
        assert_close(captured, reference(x, gamma.float(), beta.float()), dtype)


def _x(rows=4, hidden=64, dtype=torch.bfloat16, device="cuda"):
    return torch.randn(rows, hidden, device=device).to(dtype)


def _p(hidden=64, dtype=torch.float32, device="cuda"):
    return torch.randn(hidden, device=device).to(dtype)


@pytest.mark.parametrize("make, message", [
    pytest.param(lambda: (_x(), _p(dtype=torch.float64), _p()), "^gamma dtype must be float32 or bfloat16 or float16",
                 id="gamma-fp64"),
    pytest.param(lambda: (_x(), _p(), _p(dtype=torch.int32)), "^beta dtype must be float32 or bfloat16 or float16",
                 id="beta-int32"),
    pytest.param(lambda: (_x(), _p(32), _p()), "gamma", id="gamma-size"),
    pytest.param(lambda: (_x(), _p(), _p(32)), "beta", id="beta-size"),
    pytest.param(lambda: (_x(dtype=torch.float32), _p(), _p()), "bfloat16, float16", id="fp32-input"),
    pytest.param(lambda: (_x(device="cpu"), _p(), _p()), "(?i)one device|cuda", id="cpu-input"),
    pytest.param(lambda: (_x(), _p(device="cpu"), _p()), "(?i)one device|cuda", id="cpu-gamma"),
    pytest.param(lambda: (_x(device="cpu"), _p(device="cpu"), _p(device="cpu")), "(?i)one device|cuda",
                 id="all-cpu"),
])
def test_bad_inputs(make, message):
    x, gamma, beta = make()
    with pytest.raises((ValueError, TypeError), match=message):
        cutefi.layernorm(x, gamma, beta)
