"""RMSNorm family: launch contract, specs and the public API (FlashInfer's names).

Kernel: ``rmsnorm_kernel.py`` (one CuTe DSL class; specialised on dtype, hidden-size class
and the fused-add / gemma flags). Rows (M), the hidden size N within its class, row strides
and eps are runtime arguments: no new build for a new batch or sequence length.
"""

from __future__ import annotations

import functools

import torch

from .._checks import current_stream, require_cuda, require_dtype, require_same_device, require_tensor
from ..jit.contract import LaunchContract, Param
from ..jit.lookup import get_kernel
from ..jit.policy import Family
from ..jit.registry import register
from ..jit.spec import KernelSpec
from . import rmsnorm_launch as launch

_DTYPE_NAME = {torch.bfloat16: "bf16", torch.float16: "fp16"}
MIN_N, MAX_N, N_MULTIPLE = 8, max(launch.SUPPORTED_N_CLASSES), 8
MAX_ROWS = 2**31 - 1


def contract(dtype_name: str, n_class: int, fused_add: bool, gemma: bool) -> LaunchContract:
    rows = launch.rows_per_cta(n_class, dtype_name)
    return LaunchContract(
        params=(
            Param("x", "ptr"), Param("weight", "ptr"), Param("out", "ptr"), Param("residual", "ptr"),
            Param("M", "i32"), Param("N", "i32"),
            Param("x_row_stride", "i64"), Param("out_row_stride", "i64"), Param("residual_row_stride", "i64"),
            Param("eps", "f32"),
        ),
        block=launch.block(n_class, dtype_name),
        grid=lambda problem: ((problem["M"] + rows - 1) // rows, 1, 1),
        sample={"M": 1000, "N": n_class, "x_row_stride": n_class, "out_row_stride": n_class,
                "residual_row_stride": n_class, "eps": 0},
        smem_bytes=launch.dynamic_smem_bytes(n_class, dtype_name),
    )


def _make_spec(dtype_name: str, n_class: int, fused_add: bool, gemma: bool) -> KernelSpec:
    return KernelSpec.make(
        "norm.rmsnorm", "cute", "cutefi.norm.rmsnorm_kernel:dsl_entry", "cutefi.norm.rmsnorm:contract",
        Family.SIMT, sources=("cutefi.norm.rmsnorm_launch", "cutefi.kernels.reduce"),
        dtype_name=dtype_name, n_class=n_class, fused_add=fused_add, gemma=gemma,
    )


RMSNORM_SPECS = {
    (dtype, n_class, fused, gemma): _make_spec(dtype, n_class, fused, gemma)
    for dtype in launch.SUPPORTED_DTYPES for n_class in launch.SUPPORTED_N_CLASSES
    for fused in (False, True) for gemma in (False, True)
}
register(*RMSNORM_SPECS.values())


def _rows_view(name: str, tensor: torch.Tensor) -> tuple[int, int, int]:
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


def _check_rows(name: str, tensor: torch.Tensor) -> tuple[int, int, int]:
    if tensor.is_contiguous() and tensor.dim() in (2, 3):  # the common case, checked cheaply
        n = tensor.shape[-1]
        rows, stride = tensor.numel() // n if n else 0, n
    else:
        rows, n, stride = _rows_view(name, tensor)
        if tensor.stride(-1) != 1:
            raise ValueError(f"{name} must be contiguous in its last dimension; got strides {tuple(tensor.stride())}")
    if rows > 1 and (stride % N_MULTIPLE or stride < n):
        raise ValueError(f"{name} row stride must be a multiple of 8 elements and >= {n}; got {stride}")
    if tensor.data_ptr() % 16:
        raise ValueError(f"{name} must start at a 16-byte aligned address")
    return rows, n, max(stride, n)


@functools.lru_cache(maxsize=None)
def _plan(dtype: torch.dtype, n: int, fused: bool, gemma: bool) -> tuple[KernelSpec, int]:
    """(spec, rows per CTA) for a dtype and hidden size; raises for unsupported sizes."""
    if not MIN_N <= n <= MAX_N or n % N_MULTIPLE:
        raise ValueError(f"hidden size must be a multiple of {N_MULTIPLE} in [{MIN_N}, {MAX_N}]; got {n}")
    dtype_name = _DTYPE_NAME[dtype]
    n_class = launch.pick_n_class(n)
    return RMSNORM_SPECS[(dtype_name, n_class, fused, gemma)], launch.rows_per_cta(n_class, dtype_name)


def _launch(input: torch.Tensor, weight: torch.Tensor, out: torch.Tensor, residual: torch.Tensor | None,
            eps: float, gemma: bool) -> None:
    device = require_cuda("input", input)
    require_tensor("weight", weight)
    if input.dtype not in _DTYPE_NAME:
        require_dtype("input", input, _DTYPE_NAME)
    named = [("input", input), ("weight", weight), ("out", out)] + ([("residual", residual)] if residual is not None else [])
    require_same_device(*named)
    rows, n, x_stride = _check_rows("input", input)
    spec, rows_per_cta = _plan(input.dtype, n, residual is not None, gemma)
    if weight.dim() != 1 or weight.shape[0] != n:
        raise ValueError(f"weight must be 1-D of size {n} (the hidden size); got shape {tuple(weight.shape)}")
    if weight.dtype != input.dtype:
        raise TypeError(f"weight dtype {weight.dtype} must match input dtype {input.dtype}")
    if weight.stride(0) != 1 or weight.data_ptr() % 16:
        raise ValueError("weight must be contiguous and 16-byte aligned")
    for name, tensor in named[2:]:
        if tensor.shape != input.shape or tensor.dtype != input.dtype:
            raise ValueError(f"{name} {tuple(tensor.shape)} {tensor.dtype} must match input "
                             f"{tuple(input.shape)} {input.dtype}")
    out_stride = _check_rows("out", out)[2] if out is not input else x_stride
    res_stride = _check_rows("residual", residual)[2] if residual is not None else x_stride
    if rows == 0:
        return
    if rows > MAX_ROWS:
        raise ValueError(f"at most {MAX_ROWS} rows; got {rows}")
    kernel = get_kernel(spec, device)
    args = (input.data_ptr(), weight.data_ptr(), out.data_ptr(),
            residual.data_ptr() if residual is not None else input.data_ptr(),
            rows, n, x_stride, out_stride, res_stride, float(eps))
    kernel.launch(((rows + rows_per_cta - 1) // rows_per_cta, 1, 1), args, current_stream(device), device)


def _normalize(input: torch.Tensor, weight: torch.Tensor, eps: float, out: torch.Tensor | None,
               gemma: bool) -> torch.Tensor:
    if out is None:
        out = torch.empty_like(require_tensor("input", input))
    _launch(input, weight, out, None, eps, gemma)
    return out


def rmsnorm(input: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6,
            out: torch.Tensor | None = None) -> torch.Tensor:
    """``out = input / sqrt(mean(input**2, -1) + eps) * weight``.

    input: ``[rows, hidden]`` or ``[tokens, heads, head_dim]`` (per-head, qk-norm), fp16 or
    bf16, last dimension contiguous, rows a multiple of 8 elements apart; hidden a multiple
    of 8 in [8, 32768]. weight: ``[hidden]``, same dtype. fp32 accumulation. ``out`` may be
    ``input`` (in place).
    """
    return _normalize(input, weight, eps, out, gemma=False)


def fused_add_rmsnorm(input: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor,
                      eps: float = 1e-6) -> None:
    """In place: ``residual += input``, then ``input = rmsnorm(residual) * weight``."""
    _launch(input, weight, input, require_tensor("residual", residual), eps, gemma=False)


def gemma_rmsnorm(input: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6,
                  out: torch.Tensor | None = None) -> torch.Tensor:
    """Gemma's RMSNorm: like :func:`rmsnorm` with the weight applied as ``1 + weight``."""
    return _normalize(input, weight, eps, out, gemma=True)


def gemma_fused_add_rmsnorm(input: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor,
                            eps: float = 1e-6) -> None:
    """Gemma's fused add + RMSNorm, in place (weight applied as ``1 + weight``)."""
    _launch(input, weight, input, require_tensor("residual", residual), eps, gemma=True)
