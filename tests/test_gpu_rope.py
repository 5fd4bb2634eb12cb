"""GPU tier: the RoPE family (FlashInfer semantics) against a float64 reference on random inputs.

Covers ragged indptr/offsets and pos_ids positions, plain and Llama 3.1 frequencies, the
cos/sin-cache variant, out-of-place and in-place twins, partial rotary_dim and fused-qkv views.
"""

import itertools
import math

import pytest
import torch

import cutefi

pytestmark = pytest.mark.gpu

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}
TOLERANCE = {torch.bfloat16: 1e-2, torch.float16: 3e-3}  # relative L2 error
# elementwise: a kernel's fp32 (possibly fast-math) angles at positions ~16k may be off by up to ~8e-3 rad,
# times |x| up to ~5; the relative L2 bound above is the tight check, this one catches localised errors
ATOL = 5e-2
MAX_POS = 16384
ROPE = dict(rope_scale=1.0, rope_theta=1e4)
LLAMA31 = dict(rope_scale=8.0, rope_theta=5e5, low_freq_factor=1.0, high_freq_factor=4.0, old_context_len=8192)


def inv_freq(rotary_dim, rope_scale, rope_theta, low_freq_factor=None, high_freq_factor=None,
             old_context_len=None):
    """Per-pair frequencies (float64); Llama 3.1 smoothing when low_freq_factor is given."""
    i = torch.arange(rotary_dim // 2, device="cuda", dtype=torch.float64)
    freq = rope_theta ** (-2 * i / rotary_dim)
    if low_freq_factor is None:
        return freq / rope_scale
    smooth_a = old_context_len / (2 * math.pi * high_freq_factor - 2 * math.pi * low_freq_factor)
    smooth_b = -1 / (high_freq_factor / low_freq_factor - 1)
    smooth = (freq * smooth_a + smooth_b).clamp(0, 1)
    return (1 - smooth) * freq / rope_scale + smooth * freq


def rotate(x, cos, sin, interleave):
    """x [nnz, heads, D]; cos, sin [nnz, R/2] (float64) -> float64 reference, dims >= R passed through."""
    r = 2 * cos.shape[-1]
    cos, sin = cos[:, None, :], sin[:, None, :]
    lo, hi = (slice(0, r, 2), slice(1, r, 2)) if interleave else (slice(0, r // 2), slice(r // 2, r))
    x64 = x.double()
    out = x64.clone()
    out[..., lo] = x64[..., lo] * cos - x64[..., hi] * sin
    out[..., hi] = x64[..., hi] * cos + x64[..., lo] * sin
    return out


def assert_rotated(out, x, ref, rotary_dim):
    dtype = x.dtype
    assert out.shape == x.shape and out.dtype == dtype
    assert not torch.isnan(out).any(), "NaN in the output (a stray read of poisoned memory?)"
    rel = ((out.double() - ref).norm() / ref.norm()).item()
    assert rel < TOLERANCE[dtype], f"relative error {rel:.2e}"
    torch.testing.assert_close(out.float(), ref.float(), rtol=2e-2, atol=ATOL)
    assert torch.equal(out[..., rotary_dim:], x[..., rotary_dim:]), "dims >= rotary_dim must pass through"


def make_qk(nnz, heads, head_dim, dtype):
    hq, hk = heads
    return (torch.randn(nnz, hq, head_dim, device="cuda", dtype=dtype),
            torch.randn(nnz, hk, head_dim, device="cuda", dtype=dtype))


def ragged_batch(nnz):
    """(indptr, offsets, positions): an empty and a length-1 request among unevenly split ones."""
    if nnz == 1:
        lengths = [0, 1]
    else:
        a, b = sorted(torch.randint(0, nnz, (2,)).tolist())
        lengths = [1, 0, a, b - a, nnz - 1 - b]
    offsets = torch.randint(0, MAX_POS - nnz + 1, (len(lengths),), dtype=torch.int32)
    indptr = torch.tensor([0, *itertools.accumulate(lengths)], dtype=torch.int32)
    positions = torch.cat([torch.arange(n) + o for n, o in zip(lengths, offsets.tolist())])
    return indptr.cuda(), offsets.cuda(), positions.cuda()


def make_batch(mode, nnz):
    """(position arguments for the call, each token's position)."""
    if mode == "pos_ids":
        pos_ids = torch.randint(0, MAX_POS, (nnz,), device="cuda", dtype=torch.int32)
        return (pos_ids,), pos_ids
    indptr, offsets, positions = ragged_batch(nnz)
    return (indptr, offsets), positions


def check_rope(name, inplace, q, k, batch, positions, freq, interleave, **kw):
    """Call cutefi.<name> (or its _inplace twin); both outputs against the float64 reference."""
    q0, k0 = q.clone(), k.clone()
    angle = positions.double()[:, None] * freq
    cos, sin = angle.cos(), angle.sin()
    if inplace:
        assert getattr(cutefi, name + "_inplace")(q, k, *batch, interleave=interleave, **kw) is None
        q_out, k_out = q, k
    else:
        q_out, k_out = getattr(cutefi, name)(q, k, *batch, interleave=interleave, **kw)
        assert torch.equal(q, q0) and torch.equal(k, k0), "the out-of-place call changed q or k"
    for out, x in ((q_out, q0), (k_out, k0)):
        assert_rotated(out, x, rotate(x, cos, sin, interleave), 2 * freq.numel())


def rope_cases(head_dims=(64, 128, 256)):
    for (dtype_id, dtype), head_dim, interleave, nnz in itertools.product(
            DTYPES.items(), head_dims, (False, True), (1, 7, 128, 4096)):
        heads = (32, 8) if nnz <= 128 else (8, 2)
        for rotary_dim in (head_dim, head_dim // 2) if nnz == 128 else (head_dim,):
            yield pytest.param(dtype, head_dim, rotary_dim, interleave, nnz, heads,
                               id=f"{dtype_id}-D{head_dim}-R{rotary_dim}-{'inter' if interleave else 'neox'}-nnz{nnz}")


ROPE_ARGS = "dtype, head_dim, rotary_dim, interleave, nnz, heads"


@pytest.mark.parametrize(ROPE_ARGS, list(rope_cases()))
@pytest.mark.parametrize("inplace", [False, True], ids=["out", "inplace"])
@pytest.mark.parametrize("mode", ["pos_ids", "indptr"])
def test_rope(mode, inplace, dtype, head_dim, rotary_dim, interleave, nnz, heads):
    q, k = make_qk(nnz, heads, head_dim, dtype)
    batch, positions = make_batch(mode, nnz)
    kw = {} if rotary_dim == head_dim else {"rotary_dim": rotary_dim}
    name = "apply_rope_pos_ids" if mode == "pos_ids" else "apply_rope"
    check_rope(name, inplace, q, k, batch, positions, inv_freq(rotary_dim, **ROPE), interleave, **kw)


@pytest.mark.parametrize(ROPE_ARGS, list(rope_cases(head_dims=(128,))))
@pytest.mark.parametrize("inplace", [False, True], ids=["out", "inplace"])
@pytest.mark.parametrize("mode", ["pos_ids", "indptr"])
def test_llama31_rope_defaults(mode, inplace, dtype, head_dim, rotary_dim, interleave, nnz, heads):
    q, k = make_qk(nnz, heads, head_dim, dtype)
    batch, positions = make_batch(mode, nnz)
    kw = {} if rotary_dim == head_dim else {"rotary_dim": rotary_dim}
    name = "apply_llama31_rope_pos_ids" if mode == "pos_ids" else "apply_llama31_rope"
    check_rope(name, inplace, q, k, batch, positions, inv_freq(rotary_dim, **LLAMA31), interleave, **kw)


@pytest.mark.parametrize("name, kw", [
    ("apply_rope_pos_ids", dict(rope_scale=2.0)),
    ("apply_rope_pos_ids", dict(rope_theta=1e6)),
    ("apply_rope", dict(rope_scale=4.0, rope_theta=5e5)),
    ("apply_llama31_rope_pos_ids", dict(rope_scale=32.0)),
    ("apply_llama31_rope", dict(rope_scale=8.0, rope_theta=1e4, low_freq_factor=2.0, high_freq_factor=8.0,
                                old_context_len=4096)),
])
@pytest.mark.parametrize("inplace", [False, True], ids=["out", "inplace"])
def test_scale_theta_and_llama31_factors(name, kw, inplace):
    q, k = make_qk(300, (32, 8), 128, torch.bfloat16)
    batch, positions = make_batch("pos_ids" if name.endswith("pos_ids") else "indptr", 300)
    freq = inv_freq(128, **{**(LLAMA31 if "llama31" in name else ROPE), **kw})
    check_rope(name, inplace, q, k, batch, positions, freq, False, **kw)


@pytest.mark.parametrize("name", ["apply_rope_pos_ids", "apply_llama31_rope_pos_ids"])
def test_int64_pos_ids_match_int32(name):
    q, k = make_qk(500, (32, 8), 128, torch.bfloat16)
    pos_ids = torch.randint(0, MAX_POS, (500,), device="cuda", dtype=torch.int32)
    a, b = getattr(cutefi, name)(q, k, pos_ids), getattr(cutefi, name)(q, k, pos_ids.long())
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])


@pytest.mark.parametrize("dtype", DTYPES.values(), ids=DTYPES.keys())
@pytest.mark.parametrize("inplace", [False, True], ids=["out", "inplace"])
def test_fused_qkv_views(dtype, inplace):
    nnz, hq, hk, d = 300, 32, 8, 128
    qkv = torch.empty(nnz, (hq + 2 * hk) * d, device="cuda", dtype=dtype)
    cutefi.poison_(qkv)  # v stays NaN: reading it poisons q/k, writing past k shows up in it
    heads = qkv.view(nnz, hq + 2 * hk, d)
    q, k, v = heads[:, :hq], heads[:, hq:hq + hk], heads[:, hq + hk:]
    q.copy_(torch.randn(nnz, hq, d, device="cuda"))
    k.copy_(torch.randn(nnz, hk, d, device="cuda"))
    batch, positions = make_batch("pos_ids", nnz)
    check_rope("apply_rope_pos_ids", inplace, q, k, batch, positions, inv_freq(d, **ROPE), False)
    assert torch.isnan(v).all(), "v (next to k in the fused buffer) was written"


def test_65536_tokens():
    q, k = make_qk(65536, (8, 2), 128, torch.float16)
    pos_ids = torch.randint(0, MAX_POS, (65536,), device="cuda", dtype=torch.int64)
    check_rope("apply_rope_pos_ids", False, q, k, (pos_ids,), pos_ids, inv_freq(128, **ROPE), False)


def random_cos_sin_cache(max_pos, rotary_dim):
    """Rows cat(cos, sin) of random angles: the kernel must read the cache, not recompute it."""
    angle = torch.rand(max_pos, rotary_dim // 2, device="cuda", dtype=torch.float64) * 2 * math.pi
    return torch.cat([angle.cos(), angle.sin()], dim=-1).float()


@pytest.mark.parametrize("dtype", DTYPES.values(), ids=DTYPES.keys())
@pytest.mark.parametrize("head_size, rotary_dim", [(64, 64), (128, 128), (256, 128)])
@pytest.mark.parametrize("is_neox", [True, False], ids=["neox", "gptj"])
@pytest.mark.parametrize("layout, pos_dtype", [("2d", torch.int64), ("3d", torch.int32)], ids=["2d-i64", "3d-i32"])
@pytest.mark.parametrize("inplace", [False, True], ids=["out", "inplace"])
def test_rope_with_cos_sin_cache(inplace, layout, pos_dtype, is_neox, head_size, rotary_dim, dtype):
    nnz, hq, hk = 1000, 32, 8
    cache = random_cos_sin_cache(4096, rotary_dim)
    positions = torch.randint(0, 4096, (nnz,), device="cuda", dtype=pos_dtype)
    shape = (lambda h: (nnz, h * head_size)) if layout == "2d" else (lambda h: (nnz, h, head_size))
    query = torch.randn(shape(hq), device="cuda", dtype=dtype)
    key = torch.randn(shape(hk), device="cuda", dtype=dtype)
    q0, k0 = query.clone(), key.clone()
    args = (positions, query, key, head_size, cache)
    if inplace:
        assert cutefi.apply_rope_with_cos_sin_cache_inplace(*args, is_neox=is_neox) is None
        q_out, k_out = query, key
    else:
        q_out, k_out = cutefi.apply_rope_with_cos_sin_cache(*args, is_neox=is_neox)
        assert torch.equal(query, q0) and torch.equal(key, k0), "the out-of-place call changed query or key"
    rows = cache[positions.long()].double()
    cos, sin = rows[:, : rotary_dim // 2], rows[:, rotary_dim // 2:]
    for out, x in ((q_out, q0), (k_out, k0)):
        assert out.shape == x.shape
        x3, out3 = x.view(nnz, -1, head_size), out.reshape(nnz, -1, head_size)
        assert_rotated(out3, x3, rotate(x3, cos, sin, interleave=not is_neox), rotary_dim)


@pytest.mark.parametrize("head_dim, rotary_dim", [(64, 8), (64, 24), (64, 40), (128, 56), (128, 120)])
@pytest.mark.parametrize("inplace", [False, True], ids=["out", "inplace"])
@pytest.mark.parametrize("name, mode, freq_args", [("apply_rope_pos_ids", "pos_ids", ROPE),
                                                   ("apply_rope", "indptr", ROPE),
                                                   ("apply_llama31_rope_pos_ids", "pos_ids", LLAMA31)])
def test_interleaved_rotary_dim_8_mod_16(name, mode, freq_args, inplace, head_dim, rotary_dim):
    """Interleaved (GPT-J) pairs fill 8-element vectors: FlashInfer takes rotary dims that are
    8 mod 16, whose last 16-element slot rotates its first half and passes the rest through."""
    q, k = make_qk(300, (8, 2), head_dim, torch.bfloat16)
    batch, positions = make_batch(mode, 300)
    check_rope(name, inplace, q, k, batch, positions, inv_freq(rotary_dim, **freq_args), True,
               rotary_dim=rotary_dim, **freq_args)


@pytest.mark.parametrize("head_size, rotary_dim", [(64, 8), (64, 40), (128, 24), (128, 120)])
@pytest.mark.parametrize("dtype", DTYPES.values(), ids=DTYPES.keys())
def test_gptj_cos_sin_cache_width_8_mod_16(dtype, head_size, rotary_dim):
    """A cache of 8 mod 16 columns, interleaved: its last row is read too (positions up to the
    cache's end), where a whole 8-float sin read of the half slot would run past the tensor."""
    nnz, hq, hk, max_pos = 777, 8, 2, 64
    cache_ = random_cos_sin_cache(max_pos, rotary_dim)
    positions = torch.randint(0, max_pos, (nnz,), device="cuda", dtype=torch.int64)
    positions[-1] = max_pos - 1
    query = torch.randn(nnz, hq, head_size, device="cuda", dtype=dtype)
    key = torch.randn(nnz, hk, head_size, device="cuda", dtype=dtype)
    q_out, k_out = cutefi.apply_rope_with_cos_sin_cache(positions, query, key, head_size, cache_, is_neox=False)
    rows = cache_[positions].double()
    cos, sin = rows[:, : rotary_dim // 2], rows[:, rotary_dim // 2:]
    for out, x in ((q_out, query), (k_out, key)):
        assert_rotated(out, x, rotate(x, cos, sin, interleave=True), rotary_dim)


def tok(heads, d=64, dtype=torch.bfloat16, nnz=8, device="cuda"):
    return torch.randn(nnz, heads, d, device=device).to(dtype)


def pos(n=8, dtype=torch.int32, device="cuda"):
    return torch.arange(n, device=device).to(dtype)


def cache(rotary_dim=64, dtype=torch.float32):
    return torch.randn(128, rotary_dim, device="cuda").to(dtype)


@pytest.mark.parametrize("call, message", [
    pytest.param(lambda: cutefi.apply_rope_pos_ids(tok(4), tok(2, dtype=torch.float16), pos()), "dtype",
                 id="qk-dtype-mismatch"),
    pytest.param(lambda: cutefi.apply_rope_pos_ids(tok(4, 128), tok(2, 64), pos()), "head_dim", id="head-dim-mismatch"),
    pytest.param(lambda: cutefi.apply_rope_pos_ids(tok(4, 72), tok(2, 72), pos()), "multiple of 16", id="head-dim-72"),
    pytest.param(lambda: cutefi.apply_rope_pos_ids(tok(4), tok(2), pos(), rotary_dim=128), "rotary_dim",
                 id="rotary-dim-gt-head-dim"),
    pytest.param(lambda: cutefi.apply_rope_pos_ids(tok(4), tok(2), pos(), rotary_dim=40), "rotary_dim",
                 id="rotary-dim-40"),
    pytest.param(lambda: cutefi.apply_rope_pos_ids(tok(4, dtype=torch.float32), tok(2, dtype=torch.float32), pos()),
                 "(?i)dtype|bfloat16|float16", id="fp32-q"),
    pytest.param(lambda: cutefi.apply_rope_pos_ids(tok(4), tok(2), pos(7)), "pos_ids", id="pos-ids-length"),
    pytest.param(lambda: cutefi.apply_rope_pos_ids(tok(4), tok(2), pos(dtype=torch.float32)), "pos_ids",
                 id="pos-ids-float"),
    pytest.param(lambda: cutefi.apply_rope_inplace(tok(4), tok(2), pos(3), pos(3)), "indptr|offsets",
                 id="offsets-length"),
    pytest.param(lambda: cutefi.apply_rope_pos_ids(tok(4, device="cpu"), tok(2, device="cpu"), pos(device="cpu")),
                 "(?i)cuda|one device", id="cpu-tensors"),
    pytest.param(lambda: cutefi.apply_rope_pos_ids(tok(4), tok(2), pos(device="cpu")), "(?i)cuda|one device",
                 id="cpu-pos-ids"),
    pytest.param(lambda: cutefi.apply_rope_with_cos_sin_cache(pos(), tok(4), tok(2), 64, cache(dtype=torch.float16)),
                 "float32", id="cache-fp16"),
    pytest.param(lambda: cutefi.apply_rope_with_cos_sin_cache(pos(7), tok(4), tok(2), 64, cache()), "positions",
                 id="positions-length"),
    pytest.param(lambda: cutefi.apply_rope_with_cos_sin_cache(pos(), tok(4), tok(2), 64, cache(128)),
                 "(?i)rotary|head_size|cos_sin_cache", id="cache-wider-than-head"),
])
def test_bad_inputs(call, message):
    with pytest.raises((ValueError, TypeError), match=message):
        call()


@pytest.mark.parametrize("form", ["row", "padded"])
def test_position_tensors_flashinfer_takes(form):
    """FlashInfer reads the first nnz entries of any contiguous position tensor: a [1, nnz] row,
    or a CUDA-graph buffer longer than nnz (its tail holds garbage here)."""
    nnz, head_dim = 100, 128
    q, k = make_qk(nnz, (8, 2), head_dim, torch.bfloat16)
    positions = torch.randint(0, MAX_POS, (nnz,), device="cuda", dtype=torch.int32)
    given = positions[None] if form == "row" else torch.cat([positions, torch.full((28,), -7, device="cuda",
                                                                                   dtype=torch.int32)])
    check_rope("apply_rope_pos_ids", False, q, k, (given,), positions, inv_freq(head_dim, **ROPE), False)
    cache = random_cos_sin_cache(MAX_POS, head_dim)
    query, key = q.reshape(nnz, -1), k.reshape(nnz, -1)
    q_out, k_out = cutefi.apply_rope_with_cos_sin_cache(given.long(), query, key, head_dim, cache)
    rows = cache[positions.long()].double()
    cos, sin = rows[:, : head_dim // 2], rows[:, head_dim // 2:]
    for out, x in ((q_out, q), (k_out, k)):
        assert_rotated(out.view(x.shape), x, rotate(x, cos, sin, False), head_dim)
