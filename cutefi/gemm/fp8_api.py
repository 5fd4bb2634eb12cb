"""FP8 GEMM with per-tensor scales: FlashInfer's ``bmm_fp8`` and ``mm_fp8`` on the Hopper
wgmma builds (``sm90_kernel.py`` with 8-bit operands: 128-element K stages, the scales read
on the device and applied to the fp32 sums at the store), and on other GPUs from sm_89 on the
mma.sync builds (``sm80_kernel.py`` with FP8 operands: ``mma.sync`` m16n8k32, in hardware on
sm_89 and sm_120a/121a; ptxas emulates it on sm_100a/103a through f16 MMAs). GPUs before
sm_89 have no FP8 tensor cores: refused.

``out = A_scale * B_scale * (A @ B)`` (``mm_fp8``: ``alpha * (a @ b)``), rounded once to the
output dtype. Taken without a copy: ``A`` ``[b, M, K]`` / ``a`` ``[M, K]`` with contiguous rows;
``B`` ``[b, K, N]`` / ``b`` ``[K, N]`` column-major (the transposed view of an ``[N, K]``
weight: wgmma reads 8-bit operands K-major only); ``out`` with contiguous rows. K must be a
multiple of 16 and N of 8 (rows of 16 bytes, for TMA); A and B each e4m3 or e5m2, mixed
formats included (as FlashInfer's ``bmm_fp8`` takes them; the FP8 MMAs take each operand's
format on its own).

Accuracy: the sums are the FP8 wgmmas' own (as in cuBLAS's fast-accumulation mode), not
promoted into a second fp32 set every K stage, so the error grows with K: on the H200, 2.1e-3
relative at K = 4096 and 3.3e-3 at K = 14336 against cuBLAS's 1.7e-3 (bf16 out).
"""

from __future__ import annotations

import torch

from .._capability import declare
from .._checks import require_cuda, require_same_device, require_tensor
from .._library import compiling, define
from ..jit.logs import api_log
from ..jit.lookup import device_cc, get_kernel
from ..jit.policy import Family, family_target
from ..jit.targets import Target
from . import launch
from .api import (_PLANS, _check_backend, _current_stream, _l2_bytes, _no_output, _operand, _out_for, _scratch,
                  _sms)
from .plan import GENERATION, Sm80Plan, launch_plan

_FP8 = {torch.float8_e4m3fn: "fp8e4m3", torch.float8_e5m2: "fp8e5m2"}
_OUT = {torch.bfloat16: "bf16", torch.float16: "fp16"}
_ONES: dict[int, torch.Tensor] = {}  # a 1.0 scale per device (mm_fp8 without alpha)
_ELEMS = launch.align_elems("fp8e4m3")  # 16: a 16-byte row of FP8
_NATIVE_FP8_MMA = {(8, 9), (12, 0), (12, 1)}  # mma.sync with FP8 operands in hardware (QMMA)


def _check_scale(name: str, scale: torch.Tensor) -> None:
    require_tensor(name, scale)
    if scale.dtype != torch.float32 or scale.numel() != 1:
        raise ValueError(f"{name} must be a one-element float32 tensor (a per-tensor scale), got "
                         f"{tuple(scale.shape)} {scale.dtype}")


def _plan(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor | None, out_dtype: torch.dtype,
          batched: bool) -> tuple:
    a_name, b_name = ("A", "B") if batched else ("a", "b")
    require_tensor(a_name, a)
    require_tensor(b_name, b)
    rank = 3 if batched else 2
    for name, tensor in ((a_name, a), (b_name, b)):
        if tensor.dim() != rank:
            raise ValueError(f"{name} must be {rank}-D, got shape {tuple(tensor.shape)}")
        if tensor.dtype not in _FP8:
            raise TypeError(f"{name} must be torch.float8_e4m3fn or torch.float8_e5m2, got {tensor.dtype}")
    if batched and a.shape[0] != b.shape[0]:
        raise ValueError(f"A {tuple(a.shape)} and B {tuple(b.shape)} must have the same batch size")
    m, k = a.shape[-2:]
    n = b.shape[-1]
    if b.shape[-2] != k:
        raise ValueError(f"{a_name} {tuple(a.shape)} and {b_name} {tuple(b.shape)}: K must match "
                         f"({k} vs {b.shape[-2]})")
    if k % _ELEMS or n % launch.ALIGN_ELEMS:
        raise ValueError(f"K must be a multiple of {_ELEMS} and N of {launch.ALIGN_ELEMS} (rows of 16 bytes, "
                         f"for TMA); got N={n}, K={k}")
    if out_dtype not in _OUT:
        raise TypeError(f"the output dtype must be torch.bfloat16 or torch.float16, got {out_dtype}")
    batch = a.shape[0] if batched else 1
    expected = (batch, m, n) if batched else (m, n)
    if out is not None:
        require_tensor("out", out)
        if tuple(out.shape) != expected or out.dtype != out_dtype:
            raise ValueError(f"out must be {expected} {out_dtype}, got {tuple(out.shape)} {out.dtype}")
    device = require_cuda(a_name, a)
    require_cuda(b_name, b)
    require_same_device(*[(name, t) for name, t in ((a_name, a), (b_name, b), ("out", out)) if t is not None])
    cc = device_cc(device)
    if not isinstance(family_target(Family.MMA_SYNC_FP8, Target(*cc)), Target):
        raise RuntimeError(f"FP8 GEMM needs FP8 tensor cores (compute capability 8.9 or newer: sm_89, sm_90a, "
                           f"sm_100a, sm_120a ...); device {device} is sm_{cc[0]}{cc[1]}")
    if min(m, n, k, batch) == 0:
        return None, device, expected, None
    # (name, tensor, stride along a row, stride between rows, row length, rows, alignment)
    layouts = [(a_name, a, a.stride(-1), a.stride(-2), k, m, _ELEMS, "with contiguous rows"),
               (b_name, b, b.stride(-2), b.stride(-1), k, n, _ELEMS,
                "column-major (the transposed view of an [N, K] weight)")]
    if out is not None:
        layouts.append(("out", out, out.stride(-1), out.stride(-2), n, m, launch.ALIGN_ELEMS, "with contiguous rows"))
    for name, tensor, inner, lead, length, rows, align, what in layouts:
        if inner != 1 or (rows > 1 and (lead < length or lead % align)):
            raise ValueError(f"{name} {tuple(tensor.shape)} with strides {tuple(tensor.stride())} is not taken: it "
                             f"must be {what}, rows a multiple of 16 bytes apart")
        if batched and batch > 1 and tensor.stride(0) % align:
            raise ValueError(f"{name}'s batch stride must be a multiple of {align} elements (16 bytes)")
    plan = launch_plan(m, n, k, batch, _sms(device), True, wgmma=cc == (9, 0), k_tile=launch.tile_k("fp8e4m3"),
                       native_fp8=cc in _NATIVE_FP8_MMA, l2_bytes=_l2_bytes(device))
    # the kernel's (A, B) formats: a swapped build's A is the weight; mixed ones keyed as a pair
    formats = (_FP8[a.dtype], _FP8[b.dtype])
    if not isinstance(plan, Sm80Plan) and plan.config.swap:
        formats = formats[::-1]
    specs = launch.SM80_SPECS if isinstance(plan, Sm80Plan) else launch.SM90_SPECS
    spec = specs[(formats[0] if formats[0] == formats[1] else formats, _OUT[out_dtype], "k", plan.config)]
    return get_kernel(spec, device), device, expected, plan


def _gemm_fp8(a: torch.Tensor, b: torch.Tensor, scale_a: torch.Tensor | None, scale_b: torch.Tensor | None,
              out: torch.Tensor | None, out_dtype: torch.dtype, batched: bool) -> torch.Tensor:
    """``scale_a * scale_b * (a @ b)``; a None scale is 1.0."""
    try:
        key = ("fp8", a.dtype, a.shape, a.stride(), a.get_device(), b.dtype, b.shape, b.stride(), b.get_device(),
               None if out is None else (out.dtype, out.shape, out.stride(), out.get_device()),
               out_dtype, batched, GENERATION[0])
    except AttributeError:
        key = None
    found = _PLANS.get(key)
    if found is None:
        found = _PLANS.put(key, _plan(a, b, out, out_dtype, batched))
    kernel, device, shape, grid = found
    scale_a = _ones(device) if scale_a is None else scale_a
    scale_b = _ones(device) if scale_b is None else scale_b
    for name, scale in (("A_scale" if batched else "alpha", scale_a), ("B_scale", scale_b)):
        if scale.device != a.device or scale.dtype != torch.float32 or scale.numel() != 1:
            _check_scale(name, scale)
            raise ValueError(f"{name} must be on {a.device}, got {scale.device}")
    out, empty = output_for(kernel, shape, out, out_dtype, a.device)
    if empty:
        return out
    if (a.data_ptr() | b.data_ptr() | out.data_ptr()) & 15:
        raise ValueError("A, B and out must start on 16-byte boundaries; slice views that start mid-row are not taken")
    m, n, k = shape[-2], shape[-1], a.shape[-1]
    if isinstance(grid, Sm80Plan):
        launch_mma_sync(kernel, grid, device, a, b, out, m, n, k, batched, scale_a=scale_a.data_ptr(),
                        scale_b=scale_b.data_ptr())
    else:
        launch_hopper(kernel, grid, device, a, b, out, m, n, k, batched, streams=grid.config.swap,
                      scale_a=scale_a.data_ptr(), scale_b=scale_b.data_ptr())
    return out


def output_for(kernel, shape: tuple, out: torch.Tensor | None, out_dtype: torch.dtype,
               device: torch.device) -> tuple[torch.Tensor, bool]:
    """(``out``, or a new output; whether there is nothing to launch: an empty dimension, the
    output zero-filled)."""
    if out is None:
        out = torch.empty(shape, dtype=out_dtype, device=device)
    if kernel is None:
        if out.numel():
            out.zero_()
        return out, True
    return out, False


def launch_hopper(kernel, grid, device: int, a: torch.Tensor, b: torch.Tensor, out: torch.Tensor, m: int, n: int,
                  k: int, batched: bool, streams: bool = False, **scales: int) -> None:
    """Launch an FP8 Hopper build on ``a`` [(b,) M, K] and the K-major ``b`` (``[(b,) K, N]``
    column-major), ``out`` [(b,) M, N]: split-K scratch, and the swapped builds' operands
    (``streams``: a build that streams the weight, ``launch.streams_weight``, which takes the
    plan's weight policy and K rotation)."""
    workspace = counters = b.data_ptr()  # (not read without split-K through the workspace)
    stream = None
    if grid.workspace_elems:
        stream = _current_stream(device)
        workspace_t, counters_t = _scratch(device, stream, grid.workspace_elems, grid.counter_elems)
        workspace, counters = workspace_t.data_ptr(), counters_t.data_ptr()
    common = dict(bias=b.data_ptr(), workspace=workspace, counters=counters, k=k, has_bias=0, splits=grid.splits,
                  group_m=grid.group_m, ctas=grid.ctas, **scales)
    b_view = _operand(b, batched, transpose=True)
    if grid.config.swap:  # the weight is A, the tokens B; out is written transposed, by pointer
        kernel.launch((grid.ctas, 1, 1), device, stream, False, a=b_view, b=_operand(a, batched),
                      c=out.data_ptr(), ldc=out.stride(-2) if m > 1 else n, batch=1, m=n, n=m,
                      **({"weight_policy": grid.weight_policy, "k_rotation": grid.k_rotation} if streams else {}),
                      **common)
    else:
        kernel.launch((grid.ctas, 1, 1), device, stream, False, a=_operand(a, batched), b=b_view,
                      c=_operand(out, batched), batch=out.shape[0] if batched else 1, m=m, n=n, **common)


def launch_mma_sync(kernel, grid: Sm80Plan, device: int, a: torch.Tensor, b: torch.Tensor, out: torch.Tensor,
                    m: int, n: int, k: int, batched: bool, **scales: int) -> None:
    """Launch an FP8 mma.sync build: one CTA a tile; ``b`` [(b,) K, N] column-major is read as
    the K-major [N, K] weight. (A stride of a single row or matrix is never followed: a
    harmless one is passed.)"""
    batch = out.shape[0] if batched else 1
    kernel.launch((grid.tiles, 1, 1), device, None, False, a=a.data_ptr(), b=b.data_ptr(), c=out.data_ptr(),
                  bias=out.data_ptr(), m=m, n=n, k=k, batch=batch, group_m=grid.group_m, has_bias=0,
                  lda=a.stride(-2) if m > 1 else k, ldb=b.stride(-1) if n > 1 else k,
                  ldc=out.stride(-2) if m > 1 else n, batch_a=a.stride(0) if batch > 1 else 0,
                  batch_b=b.stride(0) if batch > 1 else 0, batch_c=out.stride(0) if batch > 1 else 0, **scales)


def _ones(device: int) -> torch.Tensor:
    found = _ONES.get(device)
    if found is None:
        found = _ONES[device] = torch.ones(1, dtype=torch.float32, device=f"cuda:{device}")
    return found


@api_log
def bmm_fp8(A: torch.Tensor, B: torch.Tensor, A_scale: torch.Tensor, B_scale: torch.Tensor, dtype: torch.dtype,
            out: torch.Tensor | None = None, backend: str = "auto", *, skip_check: bool = False) -> torch.Tensor:
    """``out[i] = A_scale * B_scale * (A[i] @ B[i])``: ``A`` [b, M, K] and ``B`` [b, K, N]
    (column-major), each e4m3 or e5m2, the scales one-element float32 tensors, ``dtype``
    (or ``out``) bf16 or fp16."""
    _check_backend(backend)
    _check_scale("A_scale", A_scale)
    _check_scale("B_scale", B_scale)
    if compiling():
        return _OPS["bmm"](A, B, A_scale, B_scale, out, dtype)
    return _gemm_fp8(A, B, A_scale, B_scale, out, dtype, True)


@api_log
def mm_fp8(a: torch.Tensor, b: torch.Tensor, alpha: torch.Tensor | None = None,
           out_dtype: torch.dtype = torch.bfloat16, out: torch.Tensor | None = None,
           backend: str = "auto") -> torch.Tensor:
    """``out = alpha * (a @ b)``: ``a`` [M, K] and ``b`` [K, N] (column-major: ``w.t()`` of an
    [N, K] weight), each e4m3 or e5m2, ``alpha`` a one-element float32 tensor (None: 1.0)."""
    _check_backend(backend)
    if alpha is not None:
        _check_scale("alpha", alpha)
    if compiling():
        return _OPS["bmm"](a, b, alpha, None, out, out_dtype)
    return _gemm_fp8(a, b, alpha, None, out, out_dtype, False)


# ---- torch.compile: the op Dynamo records ---------------------------------------------------
def _fp8_into(a: torch.Tensor, b: torch.Tensor, scale_a: torch.Tensor | None, scale_b: torch.Tensor | None,
              out: torch.Tensor) -> None:
    _gemm_fp8(a, b, scale_a, scale_b, out, out.dtype, a.dim() == 3)


def _traced(a: torch.Tensor, b: torch.Tensor, scale_a: torch.Tensor | None, scale_b: torch.Tensor | None,
            out: torch.Tensor | None, out_dtype: torch.dtype) -> torch.Tensor:
    out = _out_for(a, b, out, out_dtype)
    _OPS["into"](a, b, scale_a, scale_b, out)
    return out


_OPS = {
    "into": define("gemm_fp8_into(Tensor a, Tensor b, Tensor? scale_a, Tensor? scale_b, Tensor(a!) out) -> ()",
                   _fp8_into, _no_output),
    "bmm": _traced,
}
for _function in (bmm_fp8, mm_fp8):  # (Hopper: wgmma)
    declare(_function, (Family.MMA_SYNC_FP8,), ("fp8e4m3", "fp8e5m2"))
