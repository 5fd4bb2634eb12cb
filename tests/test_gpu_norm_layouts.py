"""GPU tier: the norms on every row layout FlashInfer accepts, against a float32 reference.

Any hidden size (the shifted build where rows are not 16-byte aligned), 3-D
``[tokens, heads, head_dim]`` views with any token and head strides (slices of a fused qkv
buffer, head-major buffers), row strides of 2^31 elements and more, misaligned data pointers,
and PDL on and off giving identical results. Outputs are poisoned (NaN) first, and the gaps
between rows must stay untouched.
"""

import pytest
import torch
import torch.nn.functional as F

import cutefi

pytestmark = pytest.mark.gpu

BF16 = torch.bfloat16
TOLERANCE = {torch.bfloat16: 1e-2, torch.float16: 2e-3}  # relative L2 error


def rms_reference(x, weight, eps=1e-6):
    x32 = x.float()
    return x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + eps) * weight.float()


def assert_close(out, ref, dtype=BF16):
    assert not torch.isnan(out.float()).any(), "unwritten (poisoned) elements remain"
    rel = ((out.float() - ref).norm() / ref.norm()).item()
    assert rel < TOLERANCE[dtype], f"relative error {rel:.2e}"
    torch.testing.assert_close(out.float(), ref, rtol=3e-2, atol=3e-2)


def poisoned(*shape, dtype=BF16):
    out = torch.empty(*shape, device="cuda", dtype=dtype)
    cutefi.poison_(out)
    return out


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
@pytest.mark.parametrize("hidden", [1, 7, 111, 129, 500, 4095, 4096, 16384, 32767, 32768])
def test_every_hidden_size(dtype, hidden):
    rows = 300
    x = torch.randn(rows, hidden, device="cuda", dtype=dtype)
    weight = torch.randn(hidden, device="cuda", dtype=dtype)
    out = poisoned(rows, hidden, dtype=dtype)
    cutefi.rmsnorm(x, weight, out=out)
    assert_close(out, rms_reference(x, weight), dtype)
    residual = torch.randn_like(x)
    s = x.float() + residual.float()
    x2, r2 = x.clone(), residual.clone()
    cutefi.fused_add_rmsnorm(x2, r2, weight)
    assert torch.equal(r2, s.to(dtype))
    assert_close(x2, rms_reference(s, weight), dtype)
    gamma, beta = torch.randn(hidden, device="cuda"), torch.randn(hidden, device="cuda")
    xl = x.float() * 2 + 0.5
    assert_close(cutefi.layernorm(xl.to(dtype), gamma, beta), F.layer_norm(xl.to(dtype).float(), (hidden,), gamma,
                                                                             beta, 1e-6), dtype)


def _qkv_views():
    """(name, view) of [tokens, heads, head_dim] tensors whose rows are not evenly spaced."""
    tokens, heads, d = 37, 8, 128
    qkv = torch.randn(tokens, 3 * heads, d, device="cuda", dtype=BF16)
    yield "k-slice-of-fused-qkv", qkv[:, heads:2 * heads, :]
    yield "first-heads", torch.randn(tokens, 2 * heads, d, device="cuda", dtype=BF16)[:, :heads, :]
    yield "head-major", torch.randn(heads, tokens, d, device="cuda", dtype=BF16).transpose(0, 1)
    yield "odd-head-dim", torch.randn(tokens, 2 * heads, 100, device="cuda", dtype=BF16)[:, 1:heads + 1, :]
    yield "padded-heads", torch.randn(tokens, heads, d + 8, device="cuda", dtype=BF16)[:, :, :d]


@pytest.mark.parametrize("name", [name for name, _ in _qkv_views()] if torch.cuda.is_available() else [])
def test_qk_norm_on_uneven_3d_views(name):
    x = dict(_qkv_views())[name]
    weight = torch.randn(x.shape[-1], device="cuda", dtype=BF16)
    expected = rms_reference(x, weight)
    assert_close(cutefi.rmsnorm(x, weight), expected)
    # out: another uneven view, whose gaps must stay poisoned
    base = poisoned(x.shape[0], x.shape[1] + 3, x.shape[2] + 5)
    out = base[:, 2:2 + x.shape[1], 1:1 + x.shape[2]]
    cutefi.rmsnorm(x, weight, out=out)
    assert_close(out, expected)
    untouched = torch.ones_like(base, dtype=torch.bool)
    untouched[:, 2:2 + x.shape[1], 1:1 + x.shape[2]] = False
    assert torch.isnan(base[untouched].float()).all(), "wrote outside the output view"
    # in place, on the view itself
    before = x.clone()
    cutefi.rmsnorm(x, weight, out=x)
    assert_close(x, rms_reference(before, weight))


def test_row_stride_of_two_to_the_31_elements():
    free, _ = torch.cuda.mem_get_info()
    hidden, rows = 4096, 3
    for stride in (2**31 + 8, 2**31 + 3):  # the aligned build, then the shifted one
        need = 3 * (stride * (rows - 1) + hidden) * 2
        if need > free * 0.8:
            pytest.skip(f"needs {need / 2**30:.1f} GiB of free GPU memory")
        storage = [torch.empty(stride * (rows - 1) + hidden, device="cuda", dtype=BF16) for _ in range(3)]
        x, residual, out = (t.as_strided((rows, hidden), (stride, 1)) for t in storage)
        x.copy_(torch.randn(rows, hidden))
        residual.copy_(torch.randn(rows, hidden))
        out.fill_(float("nan"))
        weight = torch.randn(hidden, device="cuda", dtype=BF16)
        cutefi.rmsnorm(x, weight, out=out)
        assert_close(out, rms_reference(x, weight))
        s = x.float() + residual.float()
        cutefi.fused_add_rmsnorm(x, residual, weight)
        assert torch.equal(residual, s.to(BF16)), "residual is not round(x + residual)"
        expected = rms_reference(s, weight).to(BF16)  # FlashInfer's definition: from the fp32 sum
        assert (x != expected).float().mean().item() < 0.02
        assert_close(x, rms_reference(s, weight))
        del storage, x, residual, out
        torch.cuda.empty_cache()


@pytest.mark.parametrize("hidden", [4095, 4096])
def test_misaligned_pointers(hidden):
    """x and out 6 bytes past a 16-byte boundary (the shifted build, rows alike in their
    chunks), then out at another offset (run on aligned copies); the gaps stay untouched."""
    weight = torch.randn(hidden, device="cuda", dtype=BF16)
    x = torch.randn(64 * hidden + 3, device="cuda", dtype=BF16)[3:].view(64, hidden)
    for offset in (3, 1):
        base = poisoned(64 * hidden + 8)
        out = base[offset:offset + 64 * hidden].view(64, hidden)
        cutefi.rmsnorm(x, weight, out=out)
        assert_close(out, rms_reference(x, weight))
        assert torch.isnan(base[:offset].float()).all() and torch.isnan(base[offset + 64 * hidden:].float()).all()
    residual = torch.randn(64 * hidden + 3, device="cuda", dtype=BF16)[3:].view(64, hidden)
    s = x.float() + residual.float()
    cutefi.fused_add_rmsnorm(x, residual, weight)
    assert torch.equal(residual, s.to(BF16))
    assert_close(x, rms_reference(s, weight))
    # a misaligned weight (a slice) is copied, not refused
    weight_slice = torch.randn(hidden + 1, device="cuda", dtype=BF16)[1:]
    assert_close(cutefi.rmsnorm(x, weight_slice), rms_reference(x, weight_slice))


@pytest.mark.parametrize("hidden", [129, 4096])
def test_pdl_on_and_off_give_identical_results(hidden):
    x = torch.randn(513, hidden, device="cuda", dtype=BF16)
    residual = torch.randn_like(x)
    weight = torch.randn(hidden, device="cuda", dtype=BF16)
    results = []
    for pdl in (False, True, None):
        x2, r2 = x.clone(), residual.clone()
        y = cutefi.rmsnorm(x, weight, enable_pdl=pdl)
        cutefi.fused_add_rmsnorm(x2, r2, weight, enable_pdl=pdl)
        q = torch.empty(x.shape, device="cuda", dtype=torch.float8_e4m3fn)
        cutefi.rmsnorm_quant(q, x, weight, 0.125, enable_pdl=pdl)
        results.append((y, x2, r2, q.view(torch.uint8)))
    for other in results[1:]:
        for want, have in zip(results[0], other):
            assert torch.equal(want, have)
