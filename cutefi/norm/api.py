"""RMSNorm and LayerNorm: FlashInfer's names and arguments on the CuTe DSL row-norm kernel.

Kernel: ``norm_kernel.py`` (one class for both; specialised on dtype, hidden-size class and
the fused-add / gemma flags); contract, heuristics and specs: ``launch.py``. Rows, the
hidden size within its class, row strides and eps are runtime arguments: no new build for a
new batch or sequence length. Each distinct call layout is checked once and its plan kept.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import torch

from .._checks import (F32_MAX, require_cuda, require_dtype, require_eps, require_flag, require_same_device,
                       require_tensor)
from .._capability import declare
from .._library import compiling, define
from .._plans import PlanCache, signature
from ..dtypes import name_of
from ..jit.loader import Kernel
from ..jit.logs import api_log
from ..jit.lookup import get_kernel
from ..jit.policy import Family
from ..jit.spec import KernelSpec
from . import launch

_INPUT_DTYPES = (torch.bfloat16, torch.float16)
MIN_N, MAX_N, N_MULTIPLE = 8, max(launch.SUPPORTED_N_CLASSES), 8
MAX_ROWS = 2**31 - 1


def rows_view(name: str, tensor: torch.Tensor) -> tuple[int, int, int]:
    """(rows, N, row stride in elements) of a 2-D [M, N] or 3-D [tokens, heads, N] tensor."""
    if tensor.dim() == 2:
        return tensor.shape[0], tensor.shape[1], tensor.stride(0)
    if tensor.dim() == 3:
        tokens, heads, n = tensor.shape
        if tokens > 1 and heads > 1 and tensor.stride(0) != heads * tensor.stride(1):
            raise ValueError(
                f"{name} [tokens, heads, head_dim] must have evenly spaced rows "
                f"(stride(0) == heads * stride(1)); got strides {tuple(tensor.stride())}"
            )
        stride = tensor.stride(1) if heads > 1 else tensor.stride(0)
        return tokens * heads, n, stride
    raise ValueError(f"{name} must be 2-D [rows, hidden] or 3-D [tokens, heads, head_dim]; got shape {tuple(tensor.shape)}")


def hidden_size(name: str, tensor: torch.Tensor) -> int:
    """The hidden size (last dimension) of a 2-D or 3-D ``tensor``, checked against the rule."""
    if tensor.dim() not in (2, 3):
        raise ValueError(f"{name} must be 2-D [rows, hidden] or 3-D [tokens, heads, head_dim]; "
                         f"got shape {tuple(tensor.shape)}")
    n = tensor.shape[-1]
    if not MIN_N <= n <= MAX_N or n % N_MULTIPLE:
        raise ValueError(f"hidden size must be a multiple of {N_MULTIPLE} in [{MIN_N}, {MAX_N}]; got {n}")
    return n


def check_rows(name: str, tensor: torch.Tensor) -> tuple[int, int, int]:
    if tensor.is_contiguous() and tensor.dim() in (2, 3):  # the common case, checked cheaply
        n = tensor.shape[-1]
        rows, stride = tensor.numel() // n if n else 0, n
    else:
        rows, n, stride = rows_view(name, tensor)
        if tensor.stride(-1) != 1:
            raise ValueError(f"{name} must be contiguous in its last dimension; got strides {tuple(tensor.stride())}")
    if rows > 1 and (stride % N_MULTIPLE or stride < n):
        raise ValueError(f"{name} row stride must be a multiple of 8 elements and >= {n}; got {stride}")
    if tensor.data_ptr() % 16:
        raise ValueError(f"{name} must start at a 16-byte aligned address")
    return rows, n, max(stride, n)


@functools.lru_cache(maxsize=None)
def plan(kind: str, dtype: torch.dtype, n: int, fused: bool, gemma: bool) -> tuple[KernelSpec, int]:
    """(spec, size class) for a dtype and hidden size; raises for unsupported sizes."""
    if not MIN_N <= n <= MAX_N or n % N_MULTIPLE:
        raise ValueError(f"hidden size must be a multiple of {N_MULTIPLE} in [{MIN_N}, {MAX_N}]; got {n}")
    dtype_name = name_of(dtype)
    n_class = launch.pick_n_class(n)
    return launch.NORM_SPECS[(kind, dtype_name, n_class, fused, gemma)], n_class


def _check_param(name: str, tensor: torch.Tensor, n: int, dtype: torch.dtype) -> None:
    if tensor.dim() != 1 or tensor.shape[0] != n:
        raise ValueError(f"{name} must be 1-D of size {n} (the hidden size); got shape {tuple(tensor.shape)}")
    if tensor.dtype != dtype:
        raise TypeError(f"{name} dtype must be {str(dtype)[6:]}; got {str(tensor.dtype)[6:]}")
    if tensor.stride(0) != 1 or tensor.data_ptr() % 16:
        raise ValueError(f"{name} must be contiguous and 16-byte aligned")


class _Plan(NamedTuple):
    """Everything about a call that depends only on shapes, strides, dtypes and devices."""

    kernel: Kernel | None  # None: nothing to do (no rows)
    device: int
    grid: tuple[int, int, int]
    rows: int
    n: int
    strides: tuple[int, int, int]  # x, out, residual row strides


_PLANS = PlanCache()


def launch_norm(kind: str, input: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None,
                out: torch.Tensor, residual: torch.Tensor | None, eps: float, gemma: bool,
                enable_pdl: bool | None = None, weight_name: str = "weight") -> None:
    """Check every argument, then launch the row-norm build for ``kind`` ("rms" or "layer").

    rms: ``weight`` has the input dtype, ``bias`` is None. layer: ``weight`` (gamma) and
    ``bias`` (beta) are fp32.
    """
    # scalars, every call: the cheap test first (a float in range, a bool or None), then the
    # full check, which names the argument (and turns an int or NumPy eps into a float)
    if type(eps) is not float or not 0.0 <= eps <= F32_MAX:
        eps = require_eps(eps)
    if enable_pdl is not None and enable_pdl is not True and enable_pdl is not False:
        enable_pdl = require_flag("enable_pdl", enable_pdl, optional=True)
    if compiling():  # torch.compile traces this: one cutefi op in the graph (see _library)
        return _record_op(kind, input, weight, bias, out, residual, eps, gemma, enable_pdl)
    try:  # what a plan depends on (signature() inlined: this runs on every call)
        key = (kind, gemma, input.dtype, input.shape, input.stride(), input.get_device(),
               weight.dtype, weight.shape, weight.stride(), weight.get_device(),
               None if out is input else (out.dtype, out.shape, out.stride(), out.get_device()),
               None if residual is None else (residual.dtype, residual.shape, residual.stride(),
                                              residual.get_device()),
               None if bias is None else signature(bias))
    except AttributeError:  # not tensors: the full check below names the argument
        key = None
    plan = _PLANS.get(key)
    if plan is None:
        plan = _PLANS.put(key, _check_and_plan(kind, input, weight, bias, out, residual, gemma, weight_name))
    if plan.kernel is None:
        return
    x_ptr, w_ptr, o_ptr = input.data_ptr(), weight.data_ptr(), out.data_ptr()
    b_ptr = bias.data_ptr() if bias is not None else w_ptr
    r_ptr = residual.data_ptr() if residual is not None else x_ptr
    if (x_ptr | w_ptr | b_ptr | o_ptr | r_ptr) & 15:
        _check_and_plan(kind, input, weight, bias, out, residual, gemma, weight_name)  # raises, naming it
    x_stride, out_stride, res_stride = plan.strides
    plan.kernel.launch(plan.grid, plan.device, None, True if enable_pdl is None else bool(enable_pdl),
                       x=x_ptr, weight=w_ptr, bias=b_ptr, out=o_ptr, residual=r_ptr, M=plan.rows, N=plan.n,
                       x_row_stride=x_stride, out_row_stride=out_stride, residual_row_stride=res_stride,
                       eps=eps)


def _check_and_plan(kind: str, input: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None,
                    out: torch.Tensor, residual: torch.Tensor | None, gemma: bool, weight_name: str) -> _Plan:
    # types, dimensions, shapes and layouts first (CPU tensors reach these too); devices last
    require_tensor("input", input)
    require_tensor(weight_name, weight)
    require_tensor("out", out)
    if residual is not None:
        require_tensor("residual", residual)
    if bias is not None:
        require_tensor("beta", bias)
    if input.dtype not in _INPUT_DTYPES:
        require_dtype("input", input, _INPUT_DTYPES)
    n = hidden_size("input", input)  # the hidden-size rule before the row layout
    spec, n_class = plan(kind, input.dtype, n, residual is not None, gemma)
    param_dtype = torch.float32 if kind == "layer" else input.dtype
    _check_param(weight_name, weight, n, param_dtype)
    if bias is not None:
        _check_param("beta", bias, n, param_dtype)
    for name, tensor in (("out", out), ("residual", residual)):
        if tensor is not None and (tensor.shape != input.shape or tensor.dtype != input.dtype):
            raise ValueError(f"{name} {tuple(tensor.shape)} {tensor.dtype} must match input "
                             f"{tuple(input.shape)} {input.dtype}")
    rows, _, x_stride = check_rows("input", input)
    out_stride = check_rows("out", out)[2] if out is not input else x_stride
    res_stride = check_rows("residual", residual)[2] if residual is not None else x_stride
    if rows > MAX_ROWS:
        raise ValueError(f"at most {MAX_ROWS} rows; got {rows}")
    device = require_cuda("input", input)
    named = [("input", input), (weight_name, weight), ("out", out)]
    named += [("residual", residual)] if residual is not None else []
    named += [("beta", bias)] if bias is not None else []
    require_same_device(*named)
    kernel = get_kernel(spec, device) if rows else None
    grid = kernel.contract.grid({"M": rows}) if kernel else (0, 0, 0)
    return _Plan(kernel, device, grid, rows, n, (x_stride, out_stride, res_stride))


# ---- public API -------------------------------------------------------------------------
# enable_pdl (FlashInfer's meaning): None = on where the GPU has programmatic dependent
# launch (sm_90+); the kernel waits for its inputs, so PDL never reads stale data.
def _output(input: torch.Tensor, out: torch.Tensor | None) -> torch.Tensor:
    return torch.empty_like(require_tensor("input", input)) if out is None else out


@api_log
def rmsnorm(input: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6,
            out: torch.Tensor | None = None, enable_pdl: bool | None = None) -> torch.Tensor:
    """``out = input / sqrt(mean(input**2, -1) + eps) * weight``.

    input: ``[rows, hidden]`` or ``[tokens, heads, head_dim]`` (per-head, qk-norm), fp16 or
    bf16, last dimension contiguous, rows a multiple of 8 elements apart; hidden a multiple
    of 8 in [8, 32768]. weight: ``[hidden]``, same dtype. fp32 accumulation. ``out`` may be
    ``input`` (in place). ``enable_pdl``: programmatic dependent launch (None: where available).
    """
    out = _output(input, out)
    launch_norm("rms", input, weight, None, out, None, eps, False, enable_pdl)
    return out


@api_log
def fused_add_rmsnorm(input: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor,
                      eps: float = 1e-6, enable_pdl: bool | None = None) -> None:
    """In place, FlashInfer's definition: ``s = input + residual`` in fp32, ``residual = s``
    (rounded to the input dtype), ``input = s * rsqrt(mean(s**2) + eps) * weight`` (from the
    fp32 ``s``)."""
    launch_norm("rms", input, weight, None, input, require_tensor("residual", residual), eps, False, enable_pdl)


@api_log
def gemma_rmsnorm(input: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6,
                  out: torch.Tensor | None = None, enable_pdl: bool | None = None) -> torch.Tensor:
    """Gemma's RMSNorm: like :func:`rmsnorm` with the weight applied as ``1 + weight``."""
    out = _output(input, out)
    launch_norm("rms", input, weight, None, out, None, eps, True, enable_pdl)
    return out


@api_log
def gemma_fused_add_rmsnorm(input: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor,
                            eps: float = 1e-6, enable_pdl: bool | None = None) -> None:
    """Gemma's fused add + RMSNorm, in place (weight applied as ``1 + weight``)."""
    launch_norm("rms", input, weight, None, input, require_tensor("residual", residual), eps, True, enable_pdl)


@api_log
def layernorm(input: torch.Tensor, gemma: torch.Tensor, beta: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """``(input - mean) / sqrt(var + eps) * gemma + beta`` over the last dimension.

    input: ``[rows, hidden]`` fp16 or bf16, last dimension contiguous, rows a multiple of 8
    elements apart; hidden a multiple of 8 in [8, 32768]. gemma (gamma, FlashInfer's name) and
    beta: fp32 ``[hidden]``. Returns a new tensor with the input's dtype and shape.
    """
    require_tensor("input", input)
    if input.dim() != 2:
        raise ValueError(f"input must be 2-D [rows, hidden]; got shape {tuple(input.shape)}")
    out = torch.empty_like(input, memory_format=torch.contiguous_format)
    launch_norm("layer", input, gemma, require_tensor("beta", beta), out, None, eps, False, False,
                weight_name="gamma")
    return out


# ---- torch.compile: the ops Dynamo records (one per mutation pattern) ---------------------
def _no_output(*args: object) -> None:
    return None


_define_ops = [
    ("rmsnorm_out(Tensor(a!) out, Tensor input, Tensor weight, float eps, bool gemma, bool? enable_pdl) -> ()",
     lambda out, input, weight, eps, gemma, pdl: launch_norm("rms", input, weight, None, out, None, eps, gemma, pdl)),
    ("rmsnorm_inplace(Tensor(a!) input, Tensor weight, float eps, bool gemma, bool? enable_pdl) -> ()",
     lambda input, weight, eps, gemma, pdl: launch_norm("rms", input, weight, None, input, None, eps, gemma, pdl)),
    ("fused_add_rmsnorm(Tensor(a!) input, Tensor(b!) residual, Tensor weight, float eps, bool gemma, "
     "bool? enable_pdl) -> ()",
     lambda input, residual, weight, eps, gemma, pdl: launch_norm("rms", input, weight, None, input, residual, eps,
                                                                   gemma, pdl)),
    ("layernorm_out(Tensor(a!) out, Tensor input, Tensor gemma, Tensor beta, float eps) -> ()",
     lambda out, input, gamma, beta, eps: launch_norm("layer", input, gamma, beta, out, None, eps, False, False,
                                                      weight_name="gamma")),
]
_OPS = {schema.split("(", 1)[0]: define(schema, impl, _no_output) for schema, impl in _define_ops}


def _record_op(kind: str, input: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None,
               out: torch.Tensor, residual: torch.Tensor | None, eps: float, gemma: bool,
               enable_pdl: bool | None) -> None:
    if kind == "layer":
        _OPS["layernorm_out"](out, input, weight, bias, eps)
    elif residual is not None:
        _OPS["fused_add_rmsnorm"](input, residual, weight, eps, gemma, enable_pdl)
    elif out is input:
        _OPS["rmsnorm_inplace"](input, weight, eps, gemma, enable_pdl)
    else:
        _OPS["rmsnorm_out"](out, input, weight, eps, gemma, enable_pdl)


for _public in (rmsnorm, fused_add_rmsnorm, gemma_rmsnorm, gemma_fused_add_rmsnorm, layernorm):
    declare(_public, (Family.SIMT,), launch.SUPPORTED_DTYPES)
