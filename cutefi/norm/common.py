"""Pieces shared by the row-norm APIs (RMSNorm, LayerNorm): specs and row-layout checks."""

from __future__ import annotations

import functools
from typing import NamedTuple

import torch

from .._checks import (
    current_stream,
    require_cuda,
    require_dtype,
    require_same_device,
    require_tensor,
)
from .._plans import PlanCache, signature
from ..jit.loader import Kernel
from ..jit.lookup import get_kernel
from ..jit.policy import Family
from ..jit.registry import register
from ..jit.spec import KernelSpec
from . import norm_launch as launch

DTYPE_NAME = {torch.bfloat16: "bf16", torch.float16: "fp16"}
MIN_N, MAX_N, N_MULTIPLE = 8, max(launch.SUPPORTED_N_CLASSES), 8
MAX_ROWS = 2**31 - 1


def make_norm_spec(kind: str, dtype_name: str, n_class: int, fused_add: bool = False,
                   gemma: bool = False) -> KernelSpec:
    return KernelSpec.make(
        f"norm.{kind}norm", "cute", "cutefi.norm.norm_kernel:dsl_entry", "cutefi.norm.norm_launch:contract",
        Family.SIMT, sources=("cutefi.kernels.reduce",),
        norm=kind, dtype_name=dtype_name, n_class=n_class, fused_add=fused_add, gemma=gemma,
    )


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


# Every build of the row-norm kernel: RMSNorm (plain / fused add x plain / gemma weight) and
# LayerNorm (fp32 gamma and beta), per dtype and hidden-size class.
NORM_SPECS = {
    ("rms", dtype, n_class, fused, gemma): make_norm_spec("rms", dtype, n_class, fused, gemma)
    for dtype in launch.SUPPORTED_DTYPES for n_class in launch.SUPPORTED_N_CLASSES
    for fused in (False, True) for gemma in (False, True)
} | {
    ("layer", dtype, n_class, False, False): make_norm_spec("layer", dtype, n_class)
    for dtype in launch.SUPPORTED_DTYPES for n_class in launch.SUPPORTED_N_CLASSES
}
register(*NORM_SPECS.values())


@functools.lru_cache(maxsize=None)
def plan(kind: str, dtype: torch.dtype, n: int, fused: bool, gemma: bool) -> tuple[KernelSpec, int]:
    """(spec, size class) for a dtype and hidden size; raises for unsupported sizes."""
    if not MIN_N <= n <= MAX_N or n % N_MULTIPLE:
        raise ValueError(f"hidden size must be a multiple of {N_MULTIPLE} in [{MIN_N}, {MAX_N}]; got {n}")
    dtype_name = DTYPE_NAME[dtype]
    n_class = launch.pick_n_class(n)
    return NORM_SPECS[(kind, dtype_name, n_class, fused, gemma)], n_class


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
                weight_name: str = "weight") -> None:
    """Check every argument, then launch the row-norm build for ``kind`` ("rms" or "layer").

    rms: ``weight`` has the input dtype, ``bias`` is None. layer: ``weight`` (gamma) and
    ``bias`` (beta) are fp32.
    """
    try:
        key = (kind, gemma, signature(input), signature(weight), signature(bias),
               out is input or signature(out), signature(residual))
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
    plan.kernel.launch(plan.grid, (x_ptr, w_ptr, b_ptr, o_ptr, r_ptr, plan.rows, plan.n, *plan.strides, float(eps)),
                       current_stream(plan.device), plan.device)


def _check_and_plan(kind: str, input: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None,
                    out: torch.Tensor, residual: torch.Tensor | None, gemma: bool, weight_name: str) -> _Plan:
    device = require_cuda("input", input)
    require_tensor(weight_name, weight)
    if input.dtype not in DTYPE_NAME:
        require_dtype("input", input, DTYPE_NAME)
    named = [("input", input), (weight_name, weight), ("out", require_tensor("out", out))]
    named += [("residual", residual)] if residual is not None else []
    named += [("beta", require_tensor("beta", bias))] if bias is not None else []
    require_same_device(*named)
    rows, n, x_stride = check_rows("input", input)
    spec, n_class = plan(kind, input.dtype, n, residual is not None, gemma)
    param_dtype = torch.float32 if kind == "layer" else input.dtype
    _check_param(weight_name, weight, n, param_dtype)
    if bias is not None:
        _check_param("beta", bias, n, param_dtype)
    for name, tensor in (("out", out), ("residual", residual)):
        if tensor is not None and (tensor.shape != input.shape or tensor.dtype != input.dtype):
            raise ValueError(f"{name} {tuple(tensor.shape)} {tensor.dtype} must match input "
                             f"{tuple(input.shape)} {input.dtype}")
    out_stride = check_rows("out", out)[2] if out is not input else x_stride
    res_stride = check_rows("residual", residual)[2] if residual is not None else x_stride
    if rows > MAX_ROWS:
        raise ValueError(f"at most {MAX_ROWS} rows; got {rows}")
    kernel = get_kernel(spec, device) if rows else None
    return _Plan(kernel, device, (launch.grid_x(rows, n_class, DTYPE_NAME[input.dtype]), 1, 1), rows, n,
                 (x_stride, out_stride, res_stride))
