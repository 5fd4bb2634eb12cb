"""Bad arguments to the norm ops (RMSNorm, its gemma and fused-add forms, LayerNorm, the
FP8-quantising norms): a TypeError or ValueError whose one-line message names the argument,
raised before anything is launched (CPU tier; the helpers and the rule are test_argument_errors')."""

import math

import numpy as np
import pytest
import torch

import cutefi

from test_argument_errors import BF16, CUDA, refused, vec, x2


# ---- norms -----------------------------------------------------------------------------------
HIDDEN_RULE = r"^input hidden size \(last dimension\) must be in \[1, 2147483647\]; got "
RMS = {
    "rmsnorm": lambda input=None, weight=None, **kw: cutefi.rmsnorm(
        x2() if input is None else input, vec() if weight is None else weight, **kw),
    "gemma_rmsnorm": lambda input=None, weight=None, **kw: cutefi.gemma_rmsnorm(
        x2() if input is None else input, vec() if weight is None else weight, **kw),
    "fused_add_rmsnorm": lambda input=None, weight=None, residual=None, **kw: cutefi.fused_add_rmsnorm(
        x2() if input is None else input, _like(input) if residual is None else residual,
        vec() if weight is None else weight, **kw),
    "gemma_fused_add_rmsnorm": lambda input=None, weight=None, residual=None, **kw: cutefi.gemma_fused_add_rmsnorm(
        x2() if input is None else input, _like(input) if residual is None else residual,
        vec() if weight is None else weight, **kw),
}


def _like(input):
    """A residual for ``input`` (the default input where None)."""
    return torch.randn(input.shape).to(input.dtype) if isinstance(input, torch.Tensor) else x2()


@pytest.mark.parametrize("op", RMS)
@pytest.mark.parametrize("kwargs, exc, pattern", [
    pytest.param(dict(), ValueError, CUDA, id="valid"),
    pytest.param(dict(eps=0), ValueError, CUDA, id="eps-int-0"),
    pytest.param(dict(eps=np.float32(1e-5)), ValueError, CUDA, id="eps-numpy"),
    pytest.param(dict(enable_pdl=False), ValueError, CUDA, id="pdl-false"),
    pytest.param(dict(enable_pdl=np.bool_(True)), ValueError, CUDA, id="pdl-numpy-bool"),
    pytest.param(dict(eps="1e-6"), TypeError, r"^eps must be a real number", id="eps-str"),
    pytest.param(dict(eps=None), TypeError, r"^eps must be a real number", id="eps-none"),
    pytest.param(dict(eps=True), TypeError, r"^eps must be a real number", id="eps-bool"),
    pytest.param(dict(eps=torch.tensor(1e-6)), TypeError, r"^eps must be a real number", id="eps-tensor"),
    pytest.param(dict(eps=-1e-6), ValueError, r"^eps must be .*>= 0", id="eps-neg"),
    pytest.param(dict(eps=math.nan), ValueError, r"^eps must be finite", id="eps-nan"),
    pytest.param(dict(eps=math.inf), ValueError, r"^eps must be finite", id="eps-inf"),
    pytest.param(dict(eps=1e39), ValueError, r"^eps .*float32", id="eps-over-f32"),
    pytest.param(dict(enable_pdl="no"), TypeError, r"^enable_pdl must be a bool or None", id="pdl-str"),
    pytest.param(dict(enable_pdl=1), ValueError, CUDA, id="pdl-int"),  # (FlashInfer takes an int by its truth)
    pytest.param(dict(enable_pdl=1.0), TypeError, r"^enable_pdl must be a bool or None", id="pdl-float"),
    # any hidden size and any row stride are accepted (the shifted build)
    pytest.param(dict(input=x2(hidden=12), weight=vec(12)), ValueError, CUDA, id="hidden-12"),
    pytest.param(dict(input=x2(hidden=12)[:, :11], weight=vec(11)), ValueError, CUDA, id="hidden-11-view"),
    pytest.param(dict(input=torch.randn(2, 6, 12, dtype=BF16)[:, :3, :], weight=vec(12)), ValueError, CUDA,
                 id="3d-uneven-rows"),
    # (and hidden sizes above the largest class: the long-row builds)
    pytest.param(dict(input=x2(hidden=40000), weight=vec(40000)), ValueError, CUDA, id="hidden-40000"),
    pytest.param(dict(input=x2(hidden=40001), weight=vec(40001)), ValueError, CUDA, id="hidden-40001"),
    pytest.param(dict(input=x2(hidden=0), weight=vec(0)), ValueError, HIDDEN_RULE + "0", id="hidden-0"),
    pytest.param(dict(input=torch.tensor(1.0, dtype=BF16)), ValueError, r"^input must be 2-D .* or 3-D",
                 id="input-0d"),
    pytest.param(dict(input=vec()), ValueError, r"^input must be 2-D .* or 3-D", id="input-1d"),
    pytest.param(dict(input=torch.randn(2, 2, 2, 64, dtype=BF16)), ValueError, r"^input must be 2-D .* or 3-D",
                 id="input-4d"),
    pytest.param(dict(input=[[1.0] * 64]), TypeError, r"^input must be a torch.Tensor", id="input-list"),
    pytest.param(dict(input=x2(dtype=torch.float32)), TypeError, r"^input must have dtype bfloat16, float16",
                 id="input-fp32"),
    pytest.param(dict(weight=[1.0] * 64), TypeError, r"^weight must be a torch.Tensor", id="weight-list"),
    pytest.param(dict(weight=torch.tensor(1.0, dtype=BF16)), ValueError, r"^weight must be 1-D of size 64",
                 id="weight-0d"),
    pytest.param(dict(weight=x2()), ValueError, r"^weight must be 1-D of size 64", id="weight-2d"),
    pytest.param(dict(weight=vec(32)), ValueError, r"^weight must be 1-D of size 64", id="weight-size"),
    pytest.param(dict(weight=vec(dtype=torch.float16)), TypeError, r"^weight dtype must be bfloat16",
                 id="weight-dtype"),
    pytest.param(dict(weight=torch.randn(128, dtype=BF16)[::2]), ValueError, r"^weight must be contiguous",
                 id="weight-strided"),
    pytest.param(dict(input=torch.randn(64, 4, dtype=BF16).t()), ValueError,
                 r"^input must be contiguous in its last dimension", id="input-transposed"),
    pytest.param(dict(input=torch.randn(4, 68, dtype=BF16)[:, :64]), ValueError, CUDA, id="input-row-stride"),
    pytest.param(dict(input=torch.randn(1, 64, dtype=BF16).expand(4, 64)), ValueError, "^input is written|" + CUDA,
                 id="input-broadcast-rows"),
])
def test_rmsnorm_bad_argument(op, kwargs, exc, pattern):
    refused(lambda: RMS[op](**kwargs), exc, pattern)


def test_written_rows_must_not_overlap():
    broadcast = torch.randn(1, 64, dtype=BF16).expand(4, 64)
    for op in (cutefi.rmsnorm, cutefi.gemma_rmsnorm):
        refused(lambda: op(broadcast, vec(), out=x2()), ValueError, CUDA)  # read-only: fine
        refused(lambda: op(x2(), vec(), out=torch.empty(1, 64, dtype=BF16).expand(4, 64)), ValueError,
                r"^out is written, so its rows must not overlap")
        refused(lambda: op(broadcast, vec(), out=broadcast), ValueError,
                r"^input is written, so its rows must not overlap")
    heads = torch.randn(3, 8, 64, dtype=BF16)
    refused(lambda: cutefi.rmsnorm(heads, vec(), out=heads.transpose(0, 1).contiguous().transpose(0, 1)),
            ValueError, CUDA)  # heads outermost: rows distinct
    refused(lambda: cutefi.rmsnorm(heads, vec(), out=torch.empty(3, 1, 64, dtype=BF16).expand(3, 8, 64)),
            ValueError, r"^out is written, so its rows must not overlap")


@pytest.mark.parametrize("kwargs, exc, pattern", [
    pytest.param(dict(out=[0.0]), TypeError, r"^out must be a torch.Tensor", id="out-list"),
    pytest.param(dict(out=x2(rows=3)), ValueError, r"^out .* must have the shape of input", id="out-shape"),
    pytest.param(dict(out=x2(dtype=torch.float16)), ValueError, r"^out .* and dtype bfloat16", id="out-dtype"),
    pytest.param(dict(out=torch.tensor(1.0, dtype=BF16)), ValueError, r"^out .* must have the shape of input",
                 id="out-0d"),
])
def test_rmsnorm_bad_out(kwargs, exc, pattern):
    for op in (cutefi.rmsnorm, cutefi.gemma_rmsnorm):
        refused(lambda: op(x2(), vec(), **kwargs), exc, pattern)


@pytest.mark.parametrize("op", [cutefi.fused_add_rmsnorm, cutefi.gemma_fused_add_rmsnorm], ids=lambda f: f.__name__)
@pytest.mark.parametrize("residual, exc, pattern", [
    pytest.param(None, TypeError, r"^residual must be a torch.Tensor", id="none"),
    pytest.param(x2(rows=3), ValueError, r"^residual .* must have the shape of input", id="shape"),
    pytest.param(torch.tensor(1.0, dtype=BF16), ValueError, r"^residual .* must have the shape of input", id="0d"),
    pytest.param(x2(dtype=torch.float32), ValueError, r"^residual .* and dtype bfloat16", id="dtype"),
])
def test_fused_add_bad_residual(op, residual, exc, pattern):
    refused(lambda: op(x2(), residual, vec()), exc, pattern)


def _ln(input=None, gamma=None, beta=None, **kw):
    f32 = torch.float32
    return cutefi.layernorm(x2() if input is None else input, vec(dtype=f32) if gamma is None else gamma,
                            vec(dtype=f32) if beta is None else beta, **kw)


@pytest.mark.parametrize("kwargs, exc, pattern", [
    pytest.param(dict(), ValueError, CUDA, id="valid"),
    pytest.param(dict(eps=1), ValueError, CUDA, id="eps-int"),
    pytest.param(dict(eps="1e-5"), TypeError, r"^eps must be a real number", id="eps-str"),
    pytest.param(dict(eps=None), TypeError, r"^eps must be a real number", id="eps-none"),
    pytest.param(dict(eps=-1.0), ValueError, r"^eps must be .*>= 0", id="eps-neg"),
    pytest.param(dict(eps=math.nan), ValueError, r"^eps must be finite", id="eps-nan"),
    pytest.param(dict(input=torch.randn(2, 2, 64, dtype=BF16)), ValueError, r"^input must be 2-D", id="input-3d"),
    pytest.param(dict(input=torch.tensor(1.0, dtype=BF16)), ValueError, r"^input must be 2-D", id="input-0d"),
    pytest.param(dict(input="x"), TypeError, r"^input must be a torch.Tensor", id="input-str"),
    pytest.param(dict(input=x2(hidden=12), gamma=vec(12, torch.float32), beta=vec(12, torch.float32)),
                 ValueError, CUDA, id="hidden-12"),
    pytest.param(dict(input=x2(hidden=0), gamma=vec(0, torch.float32), beta=vec(0, torch.float32)),
                 ValueError, HIDDEN_RULE + "0", id="hidden-0"),
    pytest.param(dict(gamma=[1.0]), TypeError, r"^gamma must be a torch.Tensor", id="gamma-list"),
    pytest.param(dict(beta="0"), TypeError, r"^beta must be a torch.Tensor", id="beta-str"),
    pytest.param(dict(gamma=vec(dtype=torch.float64)), TypeError, r"^gamma dtype must be float32 or bfloat16 or float16",
                 id="gamma-fp64"),
    pytest.param(dict(beta=vec(dtype=torch.int8)), TypeError, r"^beta dtype must be float32 or bfloat16 or float16",
                 id="beta-int8"),
    pytest.param(dict(beta=torch.tensor(0.0)), ValueError, r"^beta must be 1-D of size 64", id="beta-0d"),
    pytest.param(dict(beta=vec(32, torch.float32)), ValueError, r"^beta must be 1-D of size 64", id="beta-size"),
])
def test_layernorm_bad_argument(kwargs, exc, pattern):
    refused(lambda: _ln(**kwargs), exc, pattern)


# ---- FP8-quantising norms -------------------------------------------------------------------
E4M3 = torch.float8_e4m3fn
QUANT = {
    "rmsnorm_quant": lambda out=None, input=None, weight=None, scale=0.5, **kw: cutefi.rmsnorm_quant(
        x2(dtype=E4M3) if out is None else out, x2() if input is None else input,
        vec() if weight is None else weight, scale, **kw),
    "fused_add_rmsnorm_quant": lambda out=None, input=None, weight=None, scale=0.5, **kw:
        cutefi.fused_add_rmsnorm_quant(x2(dtype=E4M3) if out is None else out, x2() if input is None else input,
                                       x2(), vec() if weight is None else weight, scale, **kw),
    "layernorm_quant": lambda out=None, input=None, weight=None, scale=0.5, **kw: cutefi.layernorm_quant(
        x2(dtype=E4M3) if out is None else out, x2() if input is None else input,
        vec(dtype=torch.float32) if weight is None else weight, vec(dtype=torch.float32), scale, **kw),
}


@pytest.mark.parametrize("op", QUANT)
@pytest.mark.parametrize("kwargs, exc, pattern", [
    pytest.param(dict(), ValueError, CUDA, id="valid"),
    pytest.param(dict(scale=2), ValueError, CUDA, id="scale-int"),
    pytest.param(dict(scale=torch.tensor([0.5])), ValueError, CUDA, id="scale-cpu-tensor"),
    pytest.param(dict(out=x2(dtype=torch.float8_e5m2)), ValueError, CUDA, id="e5m2"),
    pytest.param(dict(input=x2(hidden=13), out=x2(hidden=13, dtype=E4M3)), ValueError, r"^(weight|gamma) must be",
                 id="hidden-13-weight"),
    pytest.param(dict(scale=0.0), ValueError, r"^scale must be a nonzero finite float32", id="scale-zero"),
    pytest.param(dict(scale=math.inf), ValueError, r"^scale must be finite", id="scale-inf"),
    pytest.param(dict(scale=1e-300), ValueError, r"^scale must be a nonzero finite float32", id="scale-tiny"),
    pytest.param(dict(scale=None), TypeError, r"^scale must be a float or a one-element tensor", id="scale-none"),
    pytest.param(dict(scale="1"), TypeError, r"^scale must be a real number", id="scale-str"),
    pytest.param(dict(scale=torch.ones(2)), ValueError, r"^scale must be a float or a tensor of one element",
                 id="scale-2"),
    # (FlashInfer takes a scale tensor of any real dtype as float32)
    pytest.param(dict(scale=torch.full((1,), 2, dtype=torch.int32)), ValueError, CUDA, id="scale-int-tensor"),
    pytest.param(dict(scale=torch.zeros((), dtype=torch.int64)), ValueError, r"^scale must be a nonzero finite",
                 id="scale-zero-int-tensor"),
    pytest.param(dict(scale=torch.ones(1, dtype=torch.complex64)), TypeError, r"^scale tensor must be real",
                 id="scale-complex-tensor"),
    pytest.param(dict(out=x2()), TypeError, r"^out must have dtype float8_e4m3fn, float8_e5m2", id="out-bf16"),
    pytest.param(dict(out=x2(rows=3, dtype=E4M3)), ValueError, r"^out .* must have the shape of input",
                 id="out-shape"),
    pytest.param(dict(out=[0]), TypeError, r"^out must be a torch.Tensor", id="out-list"),
    pytest.param(dict(eps=-1.0), ValueError, r"^eps must be .*>= 0", id="eps-neg"),
])
def test_quant_norm_bad_argument(op, kwargs, exc, pattern):
    refused(lambda: QUANT[op](**kwargs), exc, pattern)


# ---- RMSNorm + SiLU (FlashInfer's fused_rmsnorm_silu: bf16 in, bf16 or FP8 e4m3 out) --------
def _silu(input=None, weight=None, **kw):
    return cutefi.fused_rmsnorm_silu(x2() if input is None else input, vec() if weight is None else weight, **kw)


@pytest.mark.parametrize("kwargs, exc, pattern", [
    pytest.param(dict(), ValueError, CUDA, id="valid"),
    pytest.param(dict(out=x2(dtype=E4M3)), ValueError, CUDA, id="out-e4m3"),
    pytest.param(dict(out=x2(), block_scale=x2()), ValueError, CUDA, id="block-scale-ignored"),
    pytest.param(dict(input=x2(hidden=13), weight=vec(13)), ValueError, CUDA, id="hidden-13"),
    pytest.param(dict(input=x2(dtype=torch.float16), weight=vec(dtype=torch.float16)), TypeError,
                 r"^input must have dtype bfloat16; got float16", id="input-fp16"),
    pytest.param(dict(weight=vec(dtype=torch.float16)), TypeError, r"^weight dtype must be bfloat16", id="weight-fp16"),
    pytest.param(dict(out=x2(dtype=torch.float8_e5m2)), TypeError, r"^out dtype must be bfloat16 or float8_e4m3fn",
                 id="out-e5m2"),
    pytest.param(dict(out=x2(dtype=torch.float16)), TypeError, r"^out dtype must be bfloat16 or float8_e4m3fn",
                 id="out-fp16"),
    pytest.param(dict(out=torch.empty(3 * 32, dtype=torch.uint8)), NotImplementedError, r"NVFP4", id="out-nvfp4"),
    pytest.param(dict(out=x2(rows=3)), ValueError, r"^out .* must have the shape of input", id="out-shape"),
    pytest.param(dict(input=vec()), ValueError, r"^input must be 2-D", id="input-1d"),
    pytest.param(dict(input=[0]), TypeError, r"^input must be a torch.Tensor", id="input-list"),
    pytest.param(dict(out=[0]), TypeError, r"^out must be a torch.Tensor", id="out-list"),
    pytest.param(dict(eps=-1.0), ValueError, r"^eps must be .*>= 0", id="eps-neg"),
])
def test_fused_rmsnorm_silu_bad_argument(kwargs, exc, pattern):
    refused(lambda: _silu(**kwargs), exc, pattern)
