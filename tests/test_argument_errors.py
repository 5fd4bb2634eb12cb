"""Bad arguments to the public ops: a TypeError (wrong type) or ValueError (wrong value) whose
one-line message names the argument, raised before anything is launched.

CPU tier: every op checks argument types, scalars, dimensionality and shapes before the
device, so CPU tensors reach these checks; an otherwise valid call on CPU tensors ends with
"must be on a CUDA device" (tests/test_inputs.py), so each case below would also be refused on
a GPU for the reason named here.
"""

import math
import re
import struct

import numpy as np
import pytest
import torch

import cutefi

BF16 = torch.bfloat16
CUDA = "must be on a CUDA device"


def tok(heads=4, d=64, nnz=8, dtype=BF16):
    return torch.randn(nnz, heads, d).to(dtype)


def pos(n=8, dtype=torch.int32):
    return torch.arange(n, dtype=dtype)


def x2(rows=4, hidden=64, dtype=BF16):
    return torch.randn(rows, hidden).to(dtype)


def vec(hidden=64, dtype=BF16):
    return torch.randn(hidden).to(dtype)


def refused(call, exc, pattern):
    """``call()`` raises ``exc`` (exactly, not a subclass such as IndexError) with a one-line
    message that matches ``pattern``."""
    with pytest.raises(Exception) as info:
        call()
    assert type(info.value) is exc, f"{type(info.value).__name__}: {info.value}"
    message = str(info.value)
    assert "\n" not in message, message
    assert re.search(pattern, message), message


# ---- RoPE ------------------------------------------------------------------------------------
ROPE_POS_IDS = [cutefi.apply_rope_pos_ids, cutefi.apply_rope_pos_ids_inplace]
LLAMA_POS_IDS = [cutefi.apply_llama31_rope_pos_ids, cutefi.apply_llama31_rope_pos_ids_inplace]
ROPE_RAGGED = [cutefi.apply_rope, cutefi.apply_rope_inplace]
LLAMA_RAGGED = [cutefi.apply_llama31_rope, cutefi.apply_llama31_rope_inplace]
CACHE = [cutefi.apply_rope_with_cos_sin_cache, cutefi.apply_rope_with_cos_sin_cache_inplace]
ALL_ROPE = ROPE_POS_IDS + LLAMA_POS_IDS + ROPE_RAGGED + LLAMA_RAGGED


def rope_call(fn, **kwargs):
    """A valid call of ``fn`` (on CPU tensors) with ``kwargs`` replacing its arguments."""
    if fn in CACHE:
        args = dict(positions=pos(), query=tok(4).flatten(1), key=tok(2).flatten(1), head_size=64,
                    cos_sin_cache=torch.randn(128, 64))
    elif fn in ROPE_RAGGED + LLAMA_RAGGED:
        args = dict(q=tok(4), k=tok(2), indptr=torch.tensor([0, 3, 8], dtype=torch.int32),
                    offsets=torch.tensor([0, 5], dtype=torch.int32))
    else:
        args = dict(q=tok(4), k=tok(2), pos_ids=pos())
    args.update(kwargs)
    return lambda: fn(**args)


def ids(fns):
    return [fn.__name__ for fn in fns]


@pytest.mark.parametrize("fn", ALL_ROPE + CACHE, ids=ids(ALL_ROPE + CACHE))
def test_rope_valid_cpu_call_reaches_the_device_check(fn):
    refused(rope_call(fn), ValueError, CUDA)


@pytest.mark.parametrize("fn", ALL_ROPE, ids=ids(ALL_ROPE))
@pytest.mark.parametrize("name, value, exc, pattern", [
    pytest.param("q", torch.tensor(1.0, dtype=BF16), ValueError, r"^q must be 3-D", id="q-0d"),
    pytest.param("q", torch.randn(8, dtype=BF16), ValueError, r"^q must be 3-D", id="q-1d"),
    pytest.param("q", torch.randn(8, 256, dtype=BF16), ValueError, r"^q must be 3-D", id="q-2d"),
    pytest.param("k", torch.tensor(1.0, dtype=BF16), ValueError, r"^k must be 3-D", id="k-0d"),
    pytest.param("q", [[1.0]], TypeError, r"^q must be a torch.Tensor", id="q-list"),
    pytest.param("k", None, TypeError, r"^k must be a torch.Tensor", id="k-none"),
    pytest.param("rotary_dim", "64", TypeError, r"^rotary_dim must be an int", id="rotary_dim-str"),
    pytest.param("rotary_dim", 64.0, TypeError, r"^rotary_dim must be an int", id="rotary_dim-float"),
    pytest.param("rotary_dim", True, TypeError, r"^rotary_dim must be an int", id="rotary_dim-bool"),
    pytest.param("rotary_dim", 40, ValueError, r"^rotary_dim must be a multiple of 16", id="rotary_dim-40"),
    pytest.param("rotary_dim", 0, ValueError, r"^rotary_dim must be a multiple of 16", id="rotary_dim-0"),
    pytest.param("rotary_dim", 128, ValueError, r"^rotary_dim .*head_dim=64", id="rotary_dim-gt-head"),
    pytest.param("interleave", "no", TypeError, r"^interleave must be a bool", id="interleave-str"),
    pytest.param("interleave", None, TypeError, r"^interleave must be a bool", id="interleave-none"),
    pytest.param("rope_scale", None, TypeError, r"^rope_scale must be a real number", id="rope_scale-none"),
    pytest.param("rope_scale", "8", TypeError, r"^rope_scale must be a real number", id="rope_scale-str"),
    pytest.param("rope_scale", True, TypeError, r"^rope_scale must be a real number", id="rope_scale-bool"),
    pytest.param("rope_scale", torch.tensor(1.0), TypeError, r"^rope_scale must be a real number",
                 id="rope_scale-tensor"),
    pytest.param("rope_scale", 0, ValueError, r"^rope_scale must be .*> 0", id="rope_scale-0"),
    pytest.param("rope_scale", -2.0, ValueError, r"^rope_scale must be .*> 0", id="rope_scale-neg"),
    pytest.param("rope_scale", math.nan, ValueError, r"^rope_scale must be finite", id="rope_scale-nan"),
    pytest.param("rope_scale", math.inf, ValueError, r"^rope_scale must be finite", id="rope_scale-inf"),
    pytest.param("rope_scale", 1e-300, ValueError, r"^rope_scale .*float32", id="rope_scale-tiny"),
    pytest.param("rope_theta", "1e4", TypeError, r"^rope_theta must be a real number", id="rope_theta-str"),
    pytest.param("rope_theta", None, TypeError, r"^rope_theta must be a real number", id="rope_theta-none"),
    pytest.param("rope_theta", 1.0, ValueError, r"^rope_theta must be .*> 1", id="rope_theta-1"),
    pytest.param("rope_theta", -1e4, ValueError, r"^rope_theta must be .*> 1", id="rope_theta-neg"),
    pytest.param("rope_theta", math.nan, ValueError, r"^rope_theta must be finite", id="rope_theta-nan"),
    pytest.param("rope_theta", -math.inf, ValueError, r"^rope_theta must be finite", id="rope_theta-minf"),
    pytest.param("rope_theta", 10**400, ValueError, r"^rope_theta must be finite", id="rope_theta-huge-int"),
])
def test_rope_bad_argument(fn, name, value, exc, pattern):
    refused(rope_call(fn, **{name: value}), exc, pattern)


@pytest.mark.parametrize("fn", LLAMA_POS_IDS + LLAMA_RAGGED, ids=ids(LLAMA_POS_IDS + LLAMA_RAGGED))
@pytest.mark.parametrize("kwargs, exc, pattern", [
    pytest.param(dict(low_freq_factor="1"), TypeError, r"^low_freq_factor must be a real number", id="low-str"),
    pytest.param(dict(low_freq_factor=None), TypeError, r"^low_freq_factor must be a real number", id="low-none"),
    pytest.param(dict(high_freq_factor=[4]), TypeError, r"^high_freq_factor must be a real number", id="high-list"),
    pytest.param(dict(high_freq_factor=False), TypeError, r"^high_freq_factor must be a real number",
                 id="high-bool"),
    pytest.param(dict(old_context_len="8192"), TypeError, r"^old_context_len must be a real number",
                 id="old-str"),
    pytest.param(dict(low_freq_factor=0), ValueError, r"^low_freq_factor must be .*> 0", id="low-0"),
    pytest.param(dict(low_freq_factor=math.nan), ValueError, r"^low_freq_factor must be finite", id="low-nan"),
    pytest.param(dict(low_freq_factor=4, high_freq_factor=1), ValueError,
                 r"^high_freq_factor must be .*> low_freq_factor", id="high-lt-low"),
    pytest.param(dict(low_freq_factor=4, high_freq_factor=4), ValueError,
                 r"^high_freq_factor must be .*> low_freq_factor", id="high-eq-low"),
    pytest.param(dict(high_freq_factor=math.inf), ValueError, r"^high_freq_factor must be finite", id="high-inf"),
    pytest.param(dict(old_context_len=0), ValueError, r"^old_context_len must be .*> 0", id="old-0"),
    pytest.param(dict(old_context_len=-8192), ValueError, r"^old_context_len must be .*> 0", id="old-neg"),
    pytest.param(dict(old_context_len=math.inf), ValueError, r"^old_context_len must be finite", id="old-inf"),
    pytest.param(dict(old_context_len=1e300, low_freq_factor=1.0, high_freq_factor=1.0 + 1e-12), ValueError,
                 r"old_context_len.*float32", id="smooth-overflows-f32"),
])
def test_llama31_bad_scalar(fn, kwargs, exc, pattern):
    refused(rope_call(fn, **kwargs), exc, pattern)


@pytest.mark.parametrize("fn", ALL_ROPE, ids=ids(ALL_ROPE))
@pytest.mark.parametrize("kwargs", [
    pytest.param(dict(rope_scale=2, rope_theta=10000), id="ints"),
    pytest.param(dict(rope_scale=np.float32(2.0), rope_theta=np.float64(1e4)), id="numpy-floats"),
    pytest.param(dict(rotary_dim=np.int64(32), interleave=True), id="numpy-rotary_dim"),
    pytest.param(dict(interleave=np.bool_(True)), id="numpy-bool-interleave"),
    pytest.param(dict(rotary_dim=None), id="rotary_dim-none"),
    pytest.param(dict(rotary_dim=40, interleave=True), id="interleaved-rotary_dim-8-mod-16"),
    pytest.param(dict(rotary_dim=8, interleave=True), id="interleaved-rotary_dim-8"),
    pytest.param(dict(q=tok(4, d=128)[:, :, :64], k=tok(2, d=80)[:, :, :64]), id="strided-views"),
])
def test_rope_accepted_scalars_reach_the_device_check(fn, kwargs):
    refused(rope_call(fn, **kwargs), ValueError, CUDA)


@pytest.mark.parametrize("fn", ALL_ROPE, ids=ids(ALL_ROPE))
@pytest.mark.parametrize("rotary_dim", [20, 4, 72])
def test_rope_interleaved_rotary_dim_is_a_multiple_of_8(fn, rotary_dim):
    pattern = r"^rotary_dim must be a multiple of 8 in \[8, head_dim=64\] for interleaved RoPE"
    refused(rope_call(fn, rotary_dim=rotary_dim, interleave=True), ValueError, pattern)


@pytest.mark.parametrize("fn", ROPE_RAGGED + LLAMA_RAGGED, ids=ids(ROPE_RAGGED + LLAMA_RAGGED))
@pytest.mark.parametrize("kwargs, exc, pattern", [
    pytest.param(dict(indptr=[0, 8]), TypeError, r"^indptr must be a torch.Tensor", id="indptr-list"),
    pytest.param(dict(offsets=None), TypeError, r"^offsets must be a torch.Tensor", id="offsets-none"),
    pytest.param(dict(indptr=torch.tensor(0, dtype=torch.int32)), ValueError, r"^indptr must be 1-D",
                 id="indptr-0d"),
    pytest.param(dict(indptr=torch.tensor([0.0, 8.0])), TypeError, r"^indptr must have dtype", id="indptr-float"),
    pytest.param(dict(offsets=torch.tensor([0], dtype=torch.int32)), ValueError, r"^offsets must be \[2\]",
                 id="offsets-length"),
    pytest.param(dict(offsets=torch.tensor([0, 5])), TypeError, r"^offsets dtype .* must match indptr",
                 id="offsets-dtype"),
    pytest.param(dict(indptr=torch.tensor([0], dtype=torch.int32), offsets=torch.zeros(0, dtype=torch.int32)),
                 ValueError, r"^indptr must hold at least one request", id="indptr-empty-batch"),
])
def test_rope_ragged_bad_index(fn, kwargs, exc, pattern):
    refused(rope_call(fn, **kwargs), exc, pattern)


@pytest.mark.parametrize("fn", ROPE_POS_IDS + LLAMA_POS_IDS, ids=ids(ROPE_POS_IDS + LLAMA_POS_IDS))
@pytest.mark.parametrize("kwargs, exc, pattern", [
    pytest.param(dict(pos_ids=list(range(8))), TypeError, r"^pos_ids must be a torch.Tensor", id="list"),
    pytest.param(dict(pos_ids=torch.tensor(3, dtype=torch.int32)), ValueError,
                 r"^pos_ids must be a contiguous tensor of at least nnz = 8", id="0d"),
    pytest.param(dict(pos_ids=torch.zeros(16, dtype=torch.int32)[::2]), ValueError,
                 r"^pos_ids must be a contiguous tensor", id="strided"),
    pytest.param(dict(pos_ids=pos(7)), ValueError, r"^pos_ids must be a contiguous tensor of at least nnz = 8",
                 id="length"),
    pytest.param(dict(pos_ids=pos(dtype=torch.float32)), TypeError, r"^pos_ids must have dtype", id="float"),
    pytest.param(dict(q=tok(dtype=torch.float32), k=tok(2, dtype=torch.float32)), TypeError,
                 r"^q must have dtype bfloat16, float16", id="q-fp32"),
    pytest.param(dict(k=tok(2, dtype=torch.float16)), TypeError, r"^k dtype .* must match q", id="k-dtype"),
    pytest.param(dict(q=tok(d=72), k=tok(2, d=72)), ValueError, r"^head_dim must be a multiple of 16",
                 id="head-dim-72"),
    pytest.param(dict(k=tok(2, d=128)), ValueError, r"^q .* and k .* must agree", id="head-dim-mismatch"),
    pytest.param(dict(k=tok(2, nnz=7)), ValueError, r"^q .* and k .* must agree", id="nnz-mismatch"),
    pytest.param(dict(q=tok(4, d=68)[:, :, :64]), ValueError, r"^q needs 16-byte aligned rows", id="q-stride-68"),
    pytest.param(dict(q=torch.randn(8, 64, 4, dtype=BF16).transpose(1, 2)), ValueError,
                 r"^q must be contiguous in head_dim", id="q-head-dim-strided"),
])
def test_rope_pos_ids_bad_tensor(fn, kwargs, exc, pattern):
    refused(rope_call(fn, **kwargs), exc, pattern)


@pytest.mark.parametrize("fn", CACHE, ids=ids(CACHE))
@pytest.mark.parametrize("kwargs, exc, pattern", [
    pytest.param(dict(head_size="64"), TypeError, r"^head_size must be an int", id="head_size-str"),
    pytest.param(dict(head_size=64.0), TypeError, r"^head_size must be an int", id="head_size-float"),
    pytest.param(dict(head_size=True), TypeError, r"^head_size must be an int", id="head_size-bool"),
    pytest.param(dict(head_size=None), TypeError, r"^head_size must be an int", id="head_size-none"),
    pytest.param(dict(head_size=0), ValueError, r"^head_size must be a multiple of 16", id="head_size-0"),
    pytest.param(dict(head_size=-64), ValueError, r"^head_size must be a multiple of 16", id="head_size-neg"),
    pytest.param(dict(head_size=40), ValueError, r"^head_size must be a multiple of 16", id="head_size-40"),
    pytest.param(dict(head_size=4096), ValueError, r"^head_size must be a multiple of 16", id="head_size-4096"),
    pytest.param(dict(is_neox="yes"), TypeError, r"^is_neox must be a bool", id="is_neox-str"),
    pytest.param(dict(is_neox=None), TypeError, r"^is_neox must be a bool", id="is_neox-none"),
    pytest.param(dict(query=torch.tensor(1.0, dtype=BF16)), ValueError, r"^query must be", id="query-0d"),
    pytest.param(dict(query=torch.randn(8 * 256, dtype=BF16)), ValueError, r"^query must be", id="query-1d"),
    pytest.param(dict(key=torch.randn(8, 100, dtype=BF16)), ValueError, r"^key must be", id="key-width"),
    pytest.param(dict(query=torch.randn(256, 8, dtype=BF16).t()), ValueError,
                 r"^query must be contiguous in its last dimension", id="query-strided"),
    pytest.param(dict(query=[1.0]), TypeError, r"^query must be a torch.Tensor", id="query-list"),
    pytest.param(dict(positions=[0, 1]), TypeError, r"^positions must be a torch.Tensor", id="positions-list"),
    pytest.param(dict(positions=pos(7)), ValueError, r"^positions must be a contiguous tensor of at least nnz = 8",
                 id="positions-length"),
    pytest.param(dict(positions=torch.tensor(0)), ValueError, r"^positions must be a contiguous tensor",
                 id="positions-0d"),
    pytest.param(dict(cos_sin_cache=None), TypeError, r"^cos_sin_cache must be a torch.Tensor", id="cache-none"),
    pytest.param(dict(cos_sin_cache=torch.randn(128, 64).half()), TypeError, r"^cos_sin_cache must be float32",
                 id="cache-fp16"),
    pytest.param(dict(cos_sin_cache=torch.randn(64)), ValueError, r"^cos_sin_cache must be 2-D", id="cache-1d"),
    pytest.param(dict(cos_sin_cache=torch.randn(0, 64)), ValueError, r"^cos_sin_cache has no rows",
                 id="cache-empty"),
    pytest.param(dict(cos_sin_cache=torch.randn(128, 128)), ValueError, r"^cos_sin_cache .*head_size=64",
                 id="cache-wider-than-head"),
    pytest.param(dict(cos_sin_cache=torch.randn(128, 40)), ValueError, r"^cos_sin_cache .*multiple of 16",
                 id="cache-width-40"),
    pytest.param(dict(cos_sin_cache=torch.randn(128, 20), is_neox=False), ValueError,
                 r"^cos_sin_cache .*multiple of 8 .*interleaved", id="gptj-cache-width-20"),
])
def test_rope_cos_sin_cache_bad_argument(fn, kwargs, exc, pattern):
    refused(rope_call(fn, **kwargs), exc, pattern)


@pytest.mark.parametrize("fn", CACHE, ids=ids(CACHE))
@pytest.mark.parametrize("kwargs", [
    pytest.param(dict(head_size=np.int64(64)), id="numpy-head_size"),
    pytest.param(dict(is_neox=False), id="gptj"),
    pytest.param(dict(is_neox=np.bool_(False)), id="numpy-bool-is_neox"),
    pytest.param(dict(query=tok(4), key=tok(2)), id="3d"),
    pytest.param(dict(cos_sin_cache=torch.randn(128, 32)), id="partial-rotary"),
    pytest.param(dict(cos_sin_cache=torch.randn(128, 40), is_neox=False), id="gptj-width-8-mod-16"),
])
def test_rope_cos_sin_cache_accepted(fn, kwargs):
    refused(rope_call(fn, **kwargs), ValueError, CUDA)


# ---- copy, fill ------------------------------------------------------------------------------
@pytest.mark.parametrize("dst, src, exc, pattern", [
    pytest.param(torch.empty(64), torch.randn(64), ValueError, CUDA, id="valid"),
    pytest.param(torch.empty(64), [0.0] * 64, TypeError, r"^src must be a torch.Tensor", id="src-list"),
    pytest.param(None, torch.randn(64), TypeError, r"^dst must be a torch.Tensor", id="dst-none"),
    pytest.param(torch.empty(32), torch.randn(64), ValueError, r"^dst .* must match src", id="shape"),
    pytest.param(torch.empty(64, dtype=torch.float16), torch.randn(64), ValueError, r"^dst .* must match src",
                 id="dtype"),
    pytest.param(torch.empty(()), torch.randn(()), ValueError, r"^copy_ moves 16-byte chunks", id="0d"),
    pytest.param(torch.empty(99, dtype=torch.float16), torch.randn(99).half(), ValueError,
                 r"^copy_ moves 16-byte chunks", id="size"),
    pytest.param(torch.empty(8, 8).t(), torch.randn(8, 8).t(), ValueError, r"^src must be contiguous",
                 id="strided"),
    pytest.param(torch.empty(16), torch.randn(17)[1:], ValueError, r"^src must start at a 16-byte aligned",
                 id="misaligned"),
])
def test_copy_bad_argument(dst, src, exc, pattern):
    refused(lambda: cutefi.copy_(dst, src), exc, pattern)


@pytest.mark.parametrize("dst, src, exc, pattern", [
    pytest.param(torch.empty(8, 8), torch.randn(8, 8), ValueError, CUDA, id="valid"),
    pytest.param(torch.empty(8, 8), "src", TypeError, r"^src must be a torch.Tensor", id="src-str"),
    pytest.param([], torch.randn(8, 8), TypeError, r"^dst must be a torch.Tensor", id="dst-list"),
    pytest.param(torch.empty(()), torch.randn(()), ValueError, r"^src must be 2-D", id="0d"),
    pytest.param(torch.empty(64), torch.randn(64), ValueError, r"^src must be 2-D", id="1d"),
    pytest.param(torch.empty(2, 8, 8), torch.randn(2, 8, 8), ValueError, r"^src must be 2-D", id="3d"),
    pytest.param(torch.empty(8, 8, dtype=torch.int32), torch.zeros(8, 8, dtype=torch.int32), TypeError,
                 r"^src must have dtype", id="int32"),
    pytest.param(torch.empty(8, 4), torch.randn(8, 8), ValueError, r"^dst .* must match src", id="shape"),
    pytest.param(torch.empty(8, 8).t(), torch.randn(8, 8), ValueError, r"^dst rows must be contiguous",
                 id="dst-strided"),
    pytest.param(torch.empty(8, 6), torch.randn(8, 6), ValueError, r"^src row stride .* multiple of 16 bytes",
                 id="row-stride"),
])
def test_tma_copy_bad_argument(dst, src, exc, pattern):
    refused(lambda: cutefi.tma_copy_(dst, src), exc, pattern)


@pytest.mark.parametrize("tensor, bits, exc, pattern", [
    pytest.param(torch.empty(16, dtype=torch.uint8), 255, ValueError, CUDA, id="valid"),
    pytest.param(torch.empty(16, dtype=torch.uint8), np.uint8(255), ValueError, CUDA, id="numpy-bits"),
    pytest.param(torch.empty(16, dtype=torch.int32), 0xFFFFFFFF, ValueError, CUDA, id="32-bit-all-ones"),
    pytest.param(torch.empty(16, dtype=torch.uint8), "8", TypeError, r"^bits must be an int", id="bits-str"),
    pytest.param(torch.empty(16, dtype=torch.uint8), None, TypeError, r"^bits must be an int", id="bits-none"),
    pytest.param(torch.empty(16, dtype=torch.uint8), 1.0, TypeError, r"^bits must be an int", id="bits-float"),
    pytest.param(torch.empty(16, dtype=torch.uint8), True, TypeError, r"^bits must be an int", id="bits-bool"),
    pytest.param(torch.empty(16, dtype=torch.uint8), -1, ValueError, r"^bits must fit in 8 bits", id="bits-neg"),
    pytest.param(torch.empty(16, dtype=torch.uint8), 256, ValueError, r"^bits must fit in 8 bits", id="bits-256"),
    pytest.param([0] * 16, 0, TypeError, r"^tensor must be a torch.Tensor", id="tensor-list"),
    pytest.param(torch.empty(8, 8).t(), 0, ValueError, r"^tensor must be contiguous", id="strided"),
    pytest.param(torch.empty(4, dtype=torch.float64), 0, TypeError, r"^fill_ takes 1-, 2- or 4-byte", id="fp64"),
])
def test_fill_bad_argument(tensor, bits, exc, pattern):
    refused(lambda: cutefi.fill_(tensor, bits), exc, pattern)


@pytest.mark.parametrize("tensor, exc, pattern", [
    pytest.param(torch.empty(16, dtype=BF16), ValueError, CUDA, id="valid"),
    pytest.param(None, TypeError, r"^tensor must be a torch.Tensor", id="none"),
    pytest.param(torch.empty(16, dtype=torch.int32), TypeError, r"^poison_ takes float16, bfloat16, float32, float8_e4m3fn or float8_e5m2",
                 id="int32"),
    pytest.param(torch.empty(8, 8).t(), ValueError, r"^tensor must be contiguous", id="strided"),
])
def test_poison_bad_argument(tensor, exc, pattern):
    refused(lambda: cutefi.poison_(tensor), exc, pattern)


def test_fill_passes_a_32_bit_pattern_the_launch_can_pack(monkeypatch):
    """``value`` is declared i32 (the kernel reads it as unsigned): a pattern >= 2**31 goes as
    the same 32 bits, not as an int the launch cannot pack."""
    from cutefi.fill import api

    launched = []

    class FakeKernel:
        def launch(self, grid, device, **args):
            launched.append(struct.pack("=i", args["value"]))

    monkeypatch.setattr(api, "require_cuda", lambda name, tensor: 0)
    monkeypatch.setattr(api, "get_kernel", lambda spec, device: FakeKernel())
    for bits in (0xFFFFFFFF, 0x80000000, 0x7FFFFFFF, 0):
        cutefi.fill_(torch.empty(4, dtype=torch.int32), bits)
    assert launched == [struct.pack("=I", b) for b in (0xFFFFFFFF, 0x80000000, 0x7FFFFFFF, 0)]


# ---- attention-state merges and paged-KV index helpers ---------------------------------------
def state(n=4, heads=2, d=64, dtype=BF16, states=None):
    shape = (n, heads) if states is None else (n, states, heads)
    return torch.randn(*shape, d).to(dtype), torch.randn(*shape)


def merge_call(name, **kwargs):
    (v_a, s_a), (v_b, s_b) = state(), state()
    if name == "merge_states":
        v, s = state(states=3)
        args = dict(v=v, s=s)
    elif name == "merge_state":
        args = dict(v_a=v_a, s_a=s_a, v_b=v_b, s_b=s_b)
    else:
        args = dict(v=v_a, s=s_a, v_other=v_b, s_other=s_b)
    args.update(kwargs)
    return lambda: getattr(cutefi, name)(**args)


@pytest.mark.parametrize("name", ["merge_state", "merge_state_in_place", "merge_states"])
def test_merge_valid_cpu_call_reaches_the_device_check(name):
    refused(merge_call(name), ValueError, CUDA)


@pytest.mark.parametrize("name, kwargs, exc, pattern", [
    ("merge_state", dict(v_a=torch.randn(4, 2, 64)), TypeError, r"v_a must have dtype bfloat16, float16"),
    ("merge_state", dict(v_b=torch.randn(4, 2, 64).half()), TypeError, r"v_b dtype torch.float16 must match"),
    ("merge_state", dict(s_a=torch.ones(4, 2, dtype=torch.int32)), TypeError,
         r"s_a \(log-sum-exp, base 2\) must be float32"),
    ("merge_state", dict(s_b=torch.randn(4, 3)), ValueError, r"s_b must have shape \(4, 2\)"),
    ("merge_state", dict(v_a=torch.randn(4, 64).to(BF16)), ValueError, r"v_a must be 3-D"),
    ("merge_state", dict(v_a=torch.randn(4, 2, 60).to(BF16)), ValueError, r"head_dim must be a multiple of 8"),
    ("merge_state", dict(v_a=torch.randn(4, 2, 1024).to(BF16)), ValueError, r"in \[8, 512\]"),
    ("merge_state", dict(v_b="v"), TypeError, r"v_b must be a torch.Tensor"),
    ("merge_state_in_place", dict(v=torch.randn(4, 64, 2).to(BF16).transpose(1, 2)), ValueError,
     r"v must be contiguous in head_dim"),
    ("merge_state_in_place", dict(mask=torch.ones(3, dtype=torch.bool)), ValueError, r"mask must be \[seq_len\] = \[4\]"),
    ("merge_state_in_place", dict(mask=torch.ones(4)), TypeError, r"mask must have dtype bool, uint8"),
    ("merge_states", dict(v=torch.randn(4, 2, 64).to(BF16)), ValueError, r"v must be 4-D"),
    ("merge_states", dict(s=torch.randn(4, 2, 2)), ValueError, r"s must have shape \(4, 3, 2\)"),
])
def test_merge_bad_argument(name, kwargs, exc, pattern):
    refused(merge_call(name, **kwargs), exc, pattern)


@pytest.mark.parametrize("call, exc, pattern", [
    (lambda: cutefi.get_seq_lens(pos(5), pos(3), 16), ValueError, r"kv_last_page_len must be 1-D \[4\]"),
    (lambda: cutefi.get_seq_lens(pos(5).float(), pos(4), 16), TypeError, r"kv_indptr must be int32 or int64"),
    (lambda: cutefi.get_seq_lens(pos(5), pos(4), 0), ValueError, r"page_size must be >= 1"),
    (lambda: cutefi.get_seq_lens(pos(5), pos(4), 16.0), TypeError, r"page_size must be an int"),
    (lambda: cutefi.get_batch_indices_positions(pos(5), pos(3), 8), ValueError, r"seq_lens must be 1-D \[4\]"),
    (lambda: cutefi.get_batch_indices_positions(pos(5), pos(4), -1), ValueError, r"nnz must be >= 0"),
])
def test_index_helpers_bad_argument(call, exc, pattern):
    refused(call, exc, pattern)


def append_call(**kwargs):
    i32 = torch.int32
    key = torch.randn(3, 2, 64).to(BF16)
    args = dict(append_key=key, append_value=key.clone(), batch_indices=torch.zeros(3, dtype=i32),
                positions=torch.arange(3, dtype=i32), paged_kv_cache=torch.zeros(4, 2, 16, 2, 64).to(BF16),
                kv_indices=torch.arange(4, dtype=i32), kv_indptr=torch.tensor([0, 4], dtype=i32),
                kv_last_page_len=torch.tensor([3], dtype=i32))
    args.update(kwargs)
    return lambda: cutefi.append_paged_kv_cache(**args)


@pytest.mark.parametrize("kwargs, exc, pattern", [
    (dict(kv_layout="nhd"), ValueError, r"kv_layout must be 'NHD' or 'HND'; got 'nhd'"),
    (dict(append_key=torch.randn(3, 128).to(BF16)), ValueError, r"append_key must be 3-D"),
    (dict(append_value=torch.randn(3, 2, 64).half()), ValueError, r"append_value .* must match append_key"),
    (dict(paged_kv_cache=torch.zeros(4, 16, 2, 64).to(BF16)), TypeError, r"paged_kv_cache must be a \(k_cache, v_cache\) pair"),
    (dict(paged_kv_cache=(torch.zeros(4, 16, 2, 64).to(BF16), torch.zeros(4, 16, 2, 64).half())), TypeError,
     r"v_cache dtype torch.float16 must match"),
    (dict(paged_kv_cache=torch.zeros(4, 2, 16, 4, 64).to(BF16)), ValueError, r"must hold 2 heads of head_dim 64"),
    (dict(paged_kv_cache=torch.zeros(4, 2, 2, 16, 64).to(BF16)), ValueError, r"must hold 2 heads"),  # HND as NHD
    (dict(append_key=torch.randn(3, 2, 4).to(BF16), append_value=torch.randn(3, 2, 4).to(BF16),
          paged_kv_cache=torch.zeros(4, 2, 16, 2, 4).to(BF16)), ValueError, r"must be a multiple of 16 bytes"),
    (dict(batch_indices=torch.zeros(3, dtype=torch.int16)), TypeError, r"batch_indices must be int32"),
    (dict(positions=torch.arange(4, dtype=torch.int32)), ValueError, r"positions must be 1-D \[3\]"),
    (dict(kv_last_page_len=torch.tensor([3, 1], dtype=torch.int32)), ValueError, r"kv_last_page_len must be 1-D \[1\]"),
])
def test_append_bad_argument(kwargs, exc, pattern):
    refused(append_call(**kwargs), exc, pattern)


def test_append_hnd_cache_reaches_the_device_check():
    refused(append_call(paged_kv_cache=torch.zeros(4, 2, 2, 16, 64).to(BF16), kv_layout="HND"), ValueError, CUDA)
