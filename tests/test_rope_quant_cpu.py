"""CPU tier: rope_quantize_fp8 / mla_rope_quantize_fp8 without a GPU: FlashInfer's signatures,
the arguments refused (a TypeError or ValueError naming the argument, before any launch), and
the kernel's builds (FP8 stores converted with saturation, 128-bit loads, no spills)."""

from __future__ import annotations

import inspect
import re

import pytest
import torch

import cutefi
from cutefi.rope import launch

from conftest import requires_dsl
from test_gemm_builds_cpu import _build

BF16 = torch.bfloat16
CUDA = "must be on a CUDA device"
# FlashInfer (flashinfer/rope.py at fb28d72): the parameters in order
ROPE_QUANTIZE = ["q_rope", "k_rope", "q_nope", "k_nope", "cos_sin_cache", "pos_ids", "is_neox", "quantize_dtype",
                 "quant_scale_q", "quant_scale_kv", "q_rope_out", "k_rope_out", "q_nope_out", "k_nope_out",
                 "enable_pdl"]


def test_signatures_are_flashinfers():
    rope = inspect.signature(inspect.unwrap(cutefi.rope_quantize_fp8)).parameters
    mla = inspect.signature(inspect.unwrap(cutefi.mla_rope_quantize_fp8)).parameters
    assert list(rope) == ROPE_QUANTIZE + ["backend"] and list(mla) == ROPE_QUANTIZE
    defaults = {"is_neox": True, "quantize_dtype": None, "quant_scale_q": 1.0, "quant_scale_kv": 1.0,
                "enable_pdl": False, "q_rope_out": None}
    for name, value in defaults.items():
        assert rope[name].default == value and mla[name].default == value
    assert rope["backend"].default == "cuda"
    from cutefi.rope import mla_rope_quantize_fp8, rope_quantize_fp8  # (FlashInfer's module path)
    assert rope_quantize_fp8 is cutefi.rope_quantize_fp8 and mla_rope_quantize_fp8 is cutefi.mla_rope_quantize_fp8


def _args(**changes):
    """A valid MLA-shaped call on CPU tensors (it ends at the device check), with ``changes``."""
    nnz, heads = 8, 4
    args = dict(q_rope=torch.randn(nnz, heads, 64).to(BF16), k_rope=torch.randn(nnz, 64).to(BF16),
                q_nope=torch.randn(nnz, heads, 128).to(BF16), k_nope=torch.randn(nnz, 128).to(BF16),
                cos_sin_cache=torch.randn(32, 64), pos_ids=torch.arange(nnz))
    args.update(changes)
    return args


def _refused(exc, pattern, **changes):
    with pytest.raises(exc, match=pattern):
        cutefi.rope_quantize_fp8(**_args(**changes))


@pytest.mark.parametrize("changes", [
    {}, dict(is_neox=False), dict(quantize_dtype=torch.float8_e5m2), dict(q_nope=None, k_nope=None),
    dict(k_rope=torch.randn(8, 2, 64).to(BF16), k_nope=torch.randn(8, 2, 128).to(BF16)),  # GQA keys
    dict(q_rope=torch.randn(8, 4, 192).to(BF16)[..., 128:], q_nope=torch.randn(8, 4, 192).to(BF16)[..., :128]),
    dict(quant_scale_q=2, quant_scale_kv=0.0, enable_pdl=1, pos_ids=torch.arange(20, dtype=torch.int32)),
    dict(q_rope_out=torch.empty(8, 4, 64, dtype=torch.float8_e5m2)),  # (the dtype taken from an output)
], ids=["mla", "gptj", "e5m2", "no-nope", "gqa", "fused-q-views", "scalars", "dtype-from-out"])
def test_valid_calls_reach_the_device_check(changes):
    _refused(ValueError, f"^q_rope {CUDA}", **changes)


@pytest.mark.parametrize("changes, exc, pattern", [
    (dict(q_rope=torch.randn(8, 64).to(BF16)), ValueError, r"^q_rope must be 3-D"),
    (dict(q_rope=torch.randn(8, 4, 64)), TypeError, r"^q_rope must have dtype bfloat16, float16"),
    (dict(k_rope=torch.randn(8, 64).half()), TypeError, r"^k_rope dtype"),
    (dict(k_rope=torch.randn(8, 32).to(BF16)), ValueError, r"^k_rope must have 64 columns"),
    (dict(q_rope=torch.randn(8, 4, 40).to(BF16), k_rope=torch.randn(8, 40).to(BF16),
          cos_sin_cache=torch.randn(32, 40)), ValueError, r"rotary dim .* multiple of 16"),
    (dict(q_nope=torch.randn(8, 4, 72).to(BF16), k_nope=torch.randn(8, 72).to(BF16)), ValueError,
     r"non-rotary dim .* multiple of 16"),
    (dict(q_nope=None), ValueError, r"^q_nope and k_nope must both be given or both be None"),
    (dict(k_nope=torch.randn(8, 3, 128).to(BF16)), ValueError, r"^k_nope must be 2-D"),
    (dict(q_nope=torch.randn(8, 5, 128).to(BF16)), ValueError, r"^q_nope .* must match"),
    (dict(q_rope=torch.randn(64, 8, 4).to(BF16).transpose(1, 2)), ValueError, r"^q_rope must be contiguous"),
    (dict(cos_sin_cache=torch.randn(32, 64).half()), TypeError, r"^cos_sin_cache must be float32"),
    (dict(cos_sin_cache=torch.randn(32, 128)), ValueError, r"^cos_sin_cache must be \[max_position >= 1, 64\]"),
    (dict(pos_ids=torch.arange(4)), ValueError, r"^pos_ids must be a contiguous tensor of at least nnz"),
    (dict(pos_ids=torch.arange(8.0)), TypeError, r"^pos_ids"),
    (dict(quantize_dtype=torch.bfloat16), TypeError, r"^quantize_dtype must be torch.float8_e4m3fn"),
    (dict(quant_scale_q="2"), TypeError, r"^quant_scale_q must be a real number"),
    (dict(quant_scale_kv=float("nan")), ValueError, r"^quant_scale_kv must be finite"),
    (dict(is_neox="yes"), TypeError, r"^is_neox must be a bool"),
    (dict(enable_pdl="yes"), TypeError, r"^enable_pdl must be a bool"),
    (dict(backend="cutile"), ValueError, r"^backend must be one of"),
    (dict(q_rope_out=torch.empty(8, 4, 64, dtype=torch.float8_e4m3fn), quantize_dtype=torch.float8_e5m2),
     TypeError, r"^q_rope_out dtype"),
    (dict(k_rope_out=torch.empty(8, 2, 64, dtype=torch.float8_e4m3fn)), ValueError, r"^k_rope_out must have shape"),
    (dict(q_nope_out=torch.empty(8, 4, 136, dtype=torch.float8_e4m3fn)[..., 8:]), ValueError,
     r"^q_nope_out .*multiple of 16"),
    (dict(q_rope="q"), TypeError, r"^q_rope must be a torch.Tensor"),
])
def test_bad_arguments_are_refused(changes, exc, pattern):
    _refused(exc, pattern, **changes)


@requires_dsl
@pytest.mark.parametrize("arch", ["8.0", "9.0a", "12.0a"])
@pytest.mark.parametrize("interleave", [False, True])
def test_builds_store_saturated_fp8(arch, interleave):
    """sm_89+: ``cvt.rn.satfinite`` pairs (F2FP); sm_80: the arithmetic conversion (no FP8
    instructions). 128-bit loads of the 16-bit rows, 128-bit stores of whole slots; no local memory."""
    ptx, sass = _build(launch.QUANT_SPECS[("bf16", "fp8e4m3", "i64", interleave)], arch)
    assert re.search(r"\bLDG\.E\.128\b", sass) and re.search(r"\bSTG\.E\.128\b", sass)  # (NeoX halves: 64-bit)
    assert ("cvt.rn.satfinite.e4m3x2.f32" in ptx) == (arch != "8.0")
    assert not re.search(r"\b(LDL|STL)\b", sass), "the RoPE quant build spills"
    assert "griddepcontrol.wait" in ptx or arch == "8.0"
