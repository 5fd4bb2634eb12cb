"""How a norm call maps onto a build: argument checks, row layout, access width, the plan.

Rows: a 2-D ``[rows, hidden]`` tensor or a 3-D ``[tokens, heads, head_dim]`` view with any
token and head strides (row ``r`` starts at ``(r // heads) * row_stride + (r % heads) *
head_stride``; a 3-D view whose rows are evenly spaced is planned as 2-D). Only the last
dimension must be contiguous. Tensors the kernel writes must not overlap themselves.

Builds: the aligned one when the hidden size, every stride and every data pointer are
multiples of 8 elements (16 bytes); otherwise the shifted one (any hidden size from 1 to the
largest class, 32768, any strides), which needs the rows of x, out and residual to sit alike in their
16-byte chunks (equal strides modulo 8 elements, pointers equally misaligned) and 16-byte
aligned parameters. Calls that break that ("staged") run on aligned copies. RMSNorm (not
the fused add) on contiguous rows (each ``n`` after the last) off 16-byte boundaries, from
``PACKED_MIN_ROWS`` rows and the hidden sizes of ``packed.CLASSES``, takes the packed-rows
build instead (``packed.py``: blocks of eight rows read and written as one aligned span). Hidden
sizes above the largest class take the long-row builds (``long_rows.py``: a CTA a row, x read
twice; element accesses where the rows are not aligned, so never staged). The pointer tests
run on every call (pointers change); the rest is checked once per call layout and kept.
"""

from __future__ import annotations

import functools
import math
from typing import NamedTuple

import torch

from .._checks import require_cuda, require_dtype, require_same_device, require_tensor
from ..dtypes import name_of
from ..jit.driver import device_info
from ..jit.loader import Kernel
from ..jit.lookup import get_kernel
from ..jit.spec import KernelSpec
from . import launch, long_rows, packed

INPUT_DTYPES = (torch.bfloat16, torch.float16)
QUANT_DTYPES = (torch.float8_e4m3fn, torch.float8_e5m2)
# RMSNorm + SiLU (fused_rmsnorm_silu): FlashInfer's dtypes (launch.SILU_DTYPES, SILU_OUT_DTYPES)
SILU_DTYPES = (torch.bfloat16,)
SILU_QUANT_DTYPES = (torch.float8_e4m3fn,)
# LayerNorm's gamma and beta: fp32, or 16-bit as FlashInfer's CuTe LayerNorm takes them (read as
# they are where both have the input's dtype, else run on fp32 copies: Plan.widen_params)
LAYER_PARAM_DTYPES = (torch.float32, torch.bfloat16, torch.float16)
MIN_N, MAX_N = 1, long_rows.MAX_N  # hidden sizes above the largest class take the long-row builds
MAX_ROWS = 2**31 - 1
ALIGN_ELEMS = 8  # elements per 128-bit access of a 16-bit dtype
ALIGN_BYTES = 16
# rows from which contiguous RMSNorm rows off 16-byte boundaries take the packed-rows build
PACKED_MIN_ROWS = 1024
# what the data pointers of a call allow (computed on every call, part of the plan's key)
POINTERS_ALIGNED, POINTERS_ALIKE, POINTERS_STAGED = 0, 1, 2


def pointer_mode(x_ptr: int, w_ptr: int, b_ptr: int, o_ptr: int, r_ptr: int, out_bytes: int) -> int:
    """Whether all pointers are 16-byte aligned, or x, out and residual start equally far into
    their chunks of 8 elements (with aligned parameters), or neither."""
    if not (x_ptr | w_ptr | b_ptr | o_ptr | r_ptr) & (ALIGN_BYTES - 1):
        return POINTERS_ALIGNED
    shift = (x_ptr >> 1) & 7
    if ((w_ptr | b_ptr) & (ALIGN_BYTES - 1) or (x_ptr | r_ptr) & 1 or (r_ptr >> 1) & 7 != shift
            or o_ptr % out_bytes or (o_ptr // out_bytes) & 7 != shift):
        return POINTERS_STAGED
    return POINTERS_ALIKE


class RowLayout(NamedTuple):
    """Where each row of a tensor starts: ``(r // heads) * row_stride + (r % heads) * head_stride``."""

    rows: int
    n: int
    heads: int
    row_stride: int
    head_stride: int


def hidden_size(name: str, tensor: torch.Tensor) -> int:
    """The hidden size (last dimension) of a 2-D or 3-D ``tensor``, checked against the range."""
    if tensor.dim() not in (2, 3):
        raise ValueError(f"{name} must be 2-D [rows, hidden] or 3-D [tokens, heads, head_dim]; "
                         f"got shape {tuple(tensor.shape)}")
    n = tensor.shape[-1]
    if not MIN_N <= n <= MAX_N:
        raise ValueError(f"{name} hidden size (last dimension) must be in [{MIN_N}, {MAX_N}]; got {n}")
    return n


def row_layout(name: str, tensor: torch.Tensor, written: bool) -> RowLayout:
    """The rows of a 2-D or 3-D tensor; a tensor the kernel writes must not overlap itself."""
    n = tensor.shape[-1]
    if n > 1 and tensor.stride(-1) != 1:
        raise ValueError(f"{name} must be contiguous in its last dimension; got strides {tuple(tensor.stride())}")
    if tensor.dim() == 2:
        layout = RowLayout(tensor.shape[0], n, 1, tensor.stride(0), 0)
    else:
        tokens, heads, _ = tensor.shape
        token_stride, head_stride = tensor.stride(0), tensor.stride(1)
        if heads == 1:
            layout = RowLayout(tokens, n, 1, token_stride, 0)
        elif tokens == 1 or token_stride == heads * head_stride:  # evenly spaced rows
            layout = RowLayout(tokens * heads, n, 1, head_stride, 0)
        else:
            layout = RowLayout(tokens * heads, n, heads, token_stride, head_stride)
    if written and _overlaps(layout):
        raise ValueError(f"{name} is written, so its rows must not overlap; got shape {tuple(tensor.shape)} "
                         f"and strides {tuple(tensor.stride())}")
    return layout


def lead_period(layout: RowLayout) -> int:
    """Rows over which where a row starts in its 16-byte chunk repeats: rows that many apart
    (the same head, tokens a multiple of 8 / gcd(8, row_stride) apart) start alike."""
    return layout.heads * (ALIGN_ELEMS // math.gcd(ALIGN_ELEMS, layout.row_stride))


def _overlaps(layout: RowLayout) -> bool:
    rows, n, heads, row_stride, head_stride = layout
    if heads == 1:
        return rows > 1 and row_stride < n
    tokens = rows // heads
    tokens_outer = head_stride >= n and row_stride >= heads * head_stride
    heads_outer = row_stride >= n and head_stride >= tokens * row_stride
    return not (tokens_outer or heads_outer)


def _aligned(layouts: list[RowLayout]) -> bool:
    """Whether every row of every tensor starts on a 128-bit boundary (given aligned pointers)."""
    return all((layout.n | layout.row_stride | layout.head_stride) % ALIGN_ELEMS == 0 for layout in layouts)


def _check_param(name: str, tensor: torch.Tensor, n: int, dtypes: tuple[torch.dtype, ...]) -> None:
    if tensor.dim() != 1 or tensor.shape[0] != n:
        raise ValueError(f"{name} must be 1-D of size {n} (the hidden size); got shape {tuple(tensor.shape)}")
    if tensor.dtype not in dtypes:
        accepted = " or ".join(str(dtype)[6:] for dtype in dtypes)
        raise TypeError(f"{name} dtype must be {accepted}; got {str(tensor.dtype)[6:]}")
    if n > 1 and tensor.stride(0) != 1:
        raise ValueError(f"{name} must be contiguous; got stride {tensor.stride(0)}")


@functools.lru_cache(maxsize=None)
def spec_for(kind: str, dtype: torch.dtype, n: int, fused: bool, gemma: bool, aligned: bool,
             out_dtype: torch.dtype | None, latency: bool = False, params16: bool = False,
             silu: bool = False) -> KernelSpec:
    """The build for a call: dtype, the hidden size's class, flags, access width, quant format,
    whether it is the class's latency build (``takes_latency_build``), (LayerNorm) whether
    gamma and beta have the input's dtype, and (RMSNorm) SiLU on the output."""
    quant = name_of(out_dtype) if out_dtype is not None else None
    return launch.norm_spec(kind, name_of(dtype), launch.pick_n_class(n), fused, gemma, aligned, quant, latency,
                            params16, silu)


def takes_latency_build(kind: str, n: int, fused: bool, quant: bool, aligned: bool, rows: int) -> bool:
    """Calls of few rows run on their class's latency build where it has one
    (``tuning.LATENCY_BUILDS``; rows off 16-byte boundaries ``LATENCY_SHIFTED_BUILDS``)."""
    most_rows = launch.latency_rows(kind, fused, quant, launch.pick_n_class(n), aligned)
    return rows <= most_rows and most_rows > 0


def _packed_class(kind: str, fused: bool, quant: bool, pointers: int, aligned: bool,
                  layouts: list[RowLayout]) -> int | None:
    """The packed-rows build's class for an RMSNorm (not fused) whose rows are
    contiguous (each ``n`` after the last) but start off 16-byte boundaries, with aligned
    pointers and at least ``PACKED_MIN_ROWS`` rows; None otherwise."""
    x_layout = layouts[0]
    if fused or aligned or pointers != POINTERS_ALIGNED or x_layout.rows < PACKED_MIN_ROWS:
        return None
    if any(layout.heads != 1 or layout.row_stride != layout.n for layout in layouts):
        return None
    return packed.pick_n_class(x_layout.n, kind, quant)


class Plan(NamedTuple):
    """Everything about a call that depends only on shapes, strides, dtypes and devices."""

    kernel: Kernel | None  # None: nothing to do (no rows, or staged)
    staged: bool  # run on aligned copies (rows of x, out and residual sit unlike in their chunks)
    shifted: bool  # the shifted build: pass pointers rounded down to 16 bytes and the shift
    device: int
    grid: tuple[int, int, int]
    rows: int
    n: int
    heads: int
    strides: tuple[int, int, int, int, int, int]  # x, out, residual: row and head strides
    row_iters: int  # rows a thread normalises (launch.row_iters)
    widen_params: bool = False  # LayerNorm with other 16-bit gamma/beta: run on fp32 copies of them


def check_and_plan(kind: str, input: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None,
                   out: torch.Tensor, residual: torch.Tensor | None, gemma: bool, weight_name: str,
                   quant: bool, pointers: int, silu: bool = False) -> Plan:
    """Check every argument (raising an error that names it) and pick the build. ``silu``:
    RMSNorm + SiLU (bf16 input, a bf16 or FP8 e4m3 ``out``, as FlashInfer's fused_rmsnorm_silu)."""
    # types, dimensions, shapes and layouts first (CPU tensors reach these too); devices last
    require_tensor("input", input)
    require_tensor(weight_name, weight)
    require_tensor("out", out)
    if residual is not None:
        require_tensor("residual", residual)
    if bias is not None:
        require_tensor("beta", bias)
    if input.dtype not in (SILU_DTYPES if silu else INPUT_DTYPES):
        require_dtype("input", input, SILU_DTYPES if silu else INPUT_DTYPES)
    n = hidden_size("input", input)
    param_dtypes = LAYER_PARAM_DTYPES if kind == "layer" else (input.dtype,)
    _check_param(weight_name, weight, n, param_dtypes)
    if bias is not None:
        _check_param("beta", bias, n, param_dtypes)
    if quant:
        require_dtype("out", out, SILU_QUANT_DTYPES if silu else QUANT_DTYPES)
    out_dtype = out.dtype if quant else input.dtype
    for name, tensor, dtype in (("out", out, out_dtype), ("residual", residual, input.dtype)):
        if tensor is not None and (tensor.shape != input.shape or tensor.dtype != dtype):
            raise ValueError(f"{name} {tuple(tensor.shape)} {str(tensor.dtype)[6:]} must have the shape of input "
                             f"{tuple(input.shape)} and dtype {str(dtype)[6:]}")
    x_layout = row_layout("input", input, written=out is input)
    out_layout = row_layout("out", out, written=True) if out is not input else x_layout
    res_layout = row_layout("residual", residual, written=True) if residual is not None else x_layout
    if len({x_layout.heads, out_layout.heads, res_layout.heads}) > 1:
        # one tensor's rows evenly spaced, another's not: view all as [tokens, heads, n]
        x_layout, out_layout, res_layout = (
            RowLayout(layout.rows, n, input.shape[1], tensor.stride(0), tensor.stride(1))
            for layout, tensor in ((x_layout, input), (out_layout, out), (res_layout, residual if residual is not None else input)))
    if x_layout.rows > MAX_ROWS:
        raise ValueError(f"at most {MAX_ROWS} rows; got {x_layout.rows}")
    layouts = [x_layout, out_layout, res_layout]
    aligned = pointers == POINTERS_ALIGNED and _aligned(layouts)
    alike = all((layout.row_stride - x_layout.row_stride) % ALIGN_ELEMS == 0
                and (layout.head_stride - x_layout.head_stride) % ALIGN_ELEMS == 0 for layout in layouts)
    staged = not aligned and (pointers == POINTERS_STAGED or not alike)
    device = require_cuda("input", input)
    named = [("input", input), (weight_name, weight), ("out", out)]
    named += [("residual", residual)] if residual is not None else []
    named += [("beta", bias)] if bias is not None else []
    require_same_device(*named)
    strides = (x_layout.row_stride, x_layout.head_stride, out_layout.row_stride, out_layout.head_stride,
               res_layout.row_stride, res_layout.head_stride)
    # LayerNorm's gamma/beta: fp32, or both in the input's dtype (FlashInfer's CuTe LayerNorm builds
    # for the gamma's dtype), read as they are by the class builds; other mixes, and 16-bit ones on
    # the long-row builds, run on fp32 copies made by launch_norm (two small copies a call)
    params16 = kind == "layer" and weight.dtype == bias.dtype == input.dtype
    if kind == "layer" and (weight.dtype != torch.float32 or bias.dtype != torch.float32) \
            and (not params16 or n >= long_rows.MIN_N):
        return Plan(None, False, False, device, (0, 0, 0), x_layout.rows, n, x_layout.heads, strides, 1,
                    widen_params=x_layout.rows > 0)
    if n >= long_rows.MIN_N:  # a CTA a row, any layout (element accesses where not aligned)
        specs = long_rows.LONG_SILU_SPECS if silu else long_rows.LONG_SPECS
        spec = specs[(kind, name_of(input.dtype), residual is not None, gemma, aligned,
                      name_of(out.dtype) if quant else None)]
        kernel = get_kernel(spec, device) if x_layout.rows else None
        return Plan(kernel, False, False, device, (x_layout.rows, 1, 1), x_layout.rows, n, x_layout.heads,
                    strides, 1)
    # (SiLU has no packed-rows build: such rows take the shifted one)
    packed_class = None if silu else _packed_class(kind, residual is not None, quant, pointers, aligned, layouts)
    if packed_class:  # contiguous rows off 16-byte boundaries: blocks of 8 rows, all accesses aligned
        spec = packed.PACKED_SPECS[(kind, name_of(input.dtype), packed_class, gemma,
                                    name_of(out.dtype) if quant else None)]
        kernel = get_kernel(spec, device)
        iters = packed.blocks_per_cta(x_layout.rows, packed_class, device_info(device).sms, name_of(input.dtype))
        grid = kernel.contract.grid({"M": x_layout.rows, "row_iters": iters})
        return Plan(kernel, False, False, device, grid, x_layout.rows, n, 1, (n, 0, n, 0, n, 0), iters)
    latency = takes_latency_build(kind, n, residual is not None, quant, aligned, x_layout.rows)
    spec = spec_for(kind, input.dtype, n, residual is not None, gemma, aligned, out.dtype if quant else None,
                    latency, params16, silu)
    kernel = get_kernel(spec, device) if x_layout.rows and not staged else None
    iters, grid = 1, (0, 0, 0)
    if kernel:
        shape = launch.geometry(kind, name_of(input.dtype), launch.pick_n_class(n), residual is not None, aligned,
                                name_of(out.dtype) if quant else None, latency)
        iters, grid_x = launch.persistent_grid(shape, x_layout.rows, device_info(device).sms, lead_period(x_layout))
        grid = (grid_x, 1, 1)
    return Plan(kernel, staged and x_layout.rows > 0, not aligned, device, grid, x_layout.rows, n, x_layout.heads,
                strides, iters)
