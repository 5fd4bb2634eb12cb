"""Dense GEMM: FlashInfer's ``mm_bf16`` / ``bmm_bf16`` (and their fp16 twins) in CuTe DSL: the
Hopper wgmma kernel (``sm90_kernel.py``), the mma.sync multistage kernel on every other GPU
from sm_80 on (``sm80_kernel.py``), and for decode-sized M <= 16 with an nn.Linear weight the
mma.sync weight-streaming kernel everywhere (``skinny_kernel.py``; on Hopper up to 4096 weight
rows), and on Hopper for one or two tokens the GEMV builds (``gemv_kernel.py``); contracts and builds:
``launch.py``; heuristic: ``plan.py``.

Layouts taken without a copy (rows of 16 bytes' multiple, base addresses 16-byte aligned):
  - ``a`` ``[M, K]`` (``A`` ``[b, M, K]``): rows contiguous (``stride(-1) == 1``);
  - ``b`` ``[K, N]`` (``B`` ``[b, K, N]``): column-major, i.e. the transposed view ``w.t()`` of an
    ``[N, K]`` nn.Linear weight (``stride(-2) == 1``), or row-major (``stride(-1) == 1``);
  - ``out`` ``[M, N]`` (``[b, M, N]``): rows contiguous.
Batch strides are free. M, N, K, b are runtime arguments: no new build per shape.

``backend``: "auto" or "cutefi" (FlashInfer's names of other libraries' kernels are refused by
name). ``skip_check`` (keyword-only, every GEMM FlashInfer decorates with its backend checks):
accepted and ignored; cutefi's checks are kept per call layout, so skipping them would save nothing.
"""

from __future__ import annotations

import functools

import torch

from .._capability import declare
from .._checks import require_cuda, require_same_device, require_tensor
from .._library import compiling, define
from .._plans import PlanCache
from ..jit.logs import api_log
from ..jit.lookup import device_cc, get_kernel
from ..jit.policy import Family
from . import launch
from .plan import GENERATION, GemvPlan, SkinnyPlan, Sm80Plan, launch_plan

_PLANS = PlanCache()
_TORCH_DTYPES = {torch.bfloat16: "bf16", torch.float16: "fp16"}
# outputs: the inputs' types, or fp32 (the sums as they are, FlashInfer's out_dtype=torch.float32)
_OUT_DTYPES = {**_TORCH_DTYPES, torch.float32: "fp32"}
BACKENDS = ("auto", "cutefi")
_FLASHINFER_BACKENDS = ("cudnn", "cutlass", "tgv", "cublas", "cublaslt", "tinygemm", "cutile", "cute-dsl", "trtllm",
                        "trtllm_low_latency")
_current_stream = torch._C._cuda_getCurrentRawStream if hasattr(torch._C, "_cuda_getCurrentRawStream") \
    else (lambda device: torch.cuda.current_stream(device).cuda_stream)
# split-K scratch per (device, stream): fp32 partial tiles and per-tile arrival counters
# (zeroed when made, on that stream; the last split of each tile resets its counter), so
# split-K GEMMs on two streams never share one; launches on one stream run in order. Made on
# a stream's first split-K launch (during CUDA-graph capture: from the graph's pool, zeroed
# by a captured memset). Grown, never shrunk, never freed: a CUDA graph captured on the old
# scratch keeps its addresses, so a grown stream's old tensors stay alive (_RETIRED).
_SCRATCH: dict[tuple[int, int], tuple[torch.Tensor, torch.Tensor]] = {}
_RETIRED: list[tuple[torch.Tensor, torch.Tensor]] = []


@functools.lru_cache(maxsize=None)
def _properties(device: int):
    return torch.cuda.get_device_properties(device)


def _sms(device: int) -> int:
    return _properties(device).multi_processor_count


def _l2_bytes(device: int) -> int:
    return _properties(device).L2_cache_size


def _check_backend(backend: object) -> None:
    if backend in BACKENDS:
        return
    if backend in _FLASHINFER_BACKENDS:
        raise ValueError(f"backend={backend!r} is one of FlashInfer's; cutefi runs its own kernels only: "
                         f"pass backend='auto' or 'cutefi'")
    raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")


def _operand_layout(name: str, tensor: torch.Tensor, rows_dim: int, cols_dim: int) -> str:
    """'row' when rows are contiguous, 'col' when columns are; raises otherwise."""
    shape, stride = tensor.shape, tensor.stride()
    for layout, inner, outer in (("row", cols_dim, rows_dim), ("col", rows_dim, cols_dim)):
        if stride[inner] == 1 or shape[inner] == 1:
            lead = stride[outer]
            if shape[outer] > 1 and (lead < shape[inner] or lead % launch.ALIGN_ELEMS):
                continue
            return layout
    raise ValueError(f"{name} {tuple(shape)} with strides {tuple(stride)} is not taken without a copy: one of "
                     f"its last two dimensions must have stride 1 and the other a stride >= its extent and a "
                     f"multiple of {launch.ALIGN_ELEMS} elements (16 bytes)")


def _plan(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor | None, bias: torch.Tensor | None,
          out_dtype: torch.dtype, batched: bool, dtype_name: str) -> tuple:
    """Check every argument of one call layout; return what the launch needs."""
    a_name, b_name = ("A", "B") if batched else ("a", "b")
    require_tensor(a_name, a)
    require_tensor(b_name, b)
    rank = 3 if batched else 2
    for name, tensor in ((a_name, a), (b_name, b)):
        if tensor.dim() != rank:
            raise ValueError(f"{name} must be {rank}-D, got shape {tuple(tensor.shape)}")
        if _TORCH_DTYPES.get(tensor.dtype) != dtype_name:
            raise TypeError(f"{name} must be {_dtype_text(dtype_name)}, got {tensor.dtype}")
    if batched and a.shape[0] != b.shape[0]:
        raise ValueError(f"A {tuple(a.shape)} and B {tuple(b.shape)} must have the same batch size")
    m, k = a.shape[-2:]
    if b.shape[-2] != k:
        raise ValueError(f"{a_name} {tuple(a.shape)} and {b_name} {tuple(b.shape)}: K must match "
                         f"({k} vs {b.shape[-2]})")
    n = b.shape[-1]
    batch = a.shape[0] if batched else 1
    if n % launch.ALIGN_ELEMS or k % launch.ALIGN_ELEMS:
        raise ValueError(f"N and K must be multiples of {launch.ALIGN_ELEMS} (rows of 16 bytes, for TMA); "
                         f"got N={n}, K={k}")
    if out_dtype not in _OUT_DTYPES:
        raise TypeError(f"out_dtype must be torch.bfloat16, torch.float16 or torch.float32, got {out_dtype}")
    expected = (batch, m, n) if batched else (m, n)
    if out is not None:
        require_tensor("out", out)
        if tuple(out.shape) != expected or out.dtype != out_dtype:
            raise ValueError(f"out must be {expected} {out_dtype} (out_dtype), got {tuple(out.shape)} {out.dtype}")
    if bias is not None:
        if batched:
            raise ValueError("bmm takes no bias")
        require_tensor("bias", bias)
        if bias.dtype != a.dtype or tuple(bias.shape) != (n,) or (n > 1 and bias.stride(0) != 1):
            raise ValueError(f"bias must be a contiguous ({n},) {a.dtype} tensor, got {tuple(bias.shape)} "
                             f"{bias.dtype} with strides {tuple(bias.stride())}")
    if min(m, n, k, batch) > 0:
        if _operand_layout(a_name, a, rank - 2, rank - 1) != "row":
            raise ValueError(f"{a_name} must have contiguous rows (stride(-1) == 1), got strides {tuple(a.stride())}")
        b_major = "k" if _operand_layout(b_name, b, rank - 2, rank - 1) == "col" else "n"
        if out is not None and _operand_layout("out", out, rank - 2, rank - 1) != "row":
            raise ValueError(f"out must have contiguous rows (stride(-1) == 1), got strides {tuple(out.stride())}")
    else:
        b_major = "k"
    device = require_cuda(a_name, a)
    require_cuda(b_name, b)
    named = [(a_name, a), (b_name, b)] + [(n_, t) for n_, t in (("out", out), ("bias", bias)) if t is not None]
    require_same_device(*named)
    if min(m, n, k, batch) == 0:
        return None, device, expected, b_major, (None, None)
    if batched and batch > 1:
        for name, tensor in ((a_name, a), (b_name, b), ("out", out)):
            if tensor is not None and tensor.stride(0) % launch.ALIGN_ELEMS:
                raise ValueError(f"{name}'s batch stride must be a multiple of {launch.ALIGN_ELEMS} elements "
                                 f"(16 bytes), got {tensor.stride(0)}")
    plan = launch_plan(m, n, k, batch, _sms(device), b_major == "k", wgmma=device_cc(device) == (9, 0),
                       l2_bytes=_l2_bytes(device))
    if isinstance(plan, GemvPlan):
        spec = launch.GEMV_SPECS[(dtype_name, _OUT_DTYPES[out_dtype], plan.config.tokens)]
    elif isinstance(plan, SkinnyPlan):
        spec = launch.SKINNY_SPECS[(dtype_name, _OUT_DTYPES[out_dtype], plan.config)]
    elif isinstance(plan, Sm80Plan):
        spec = launch.SM80_SPECS[(dtype_name, _OUT_DTYPES[out_dtype], b_major, plan.config)]
    else:
        spec = launch.SM90_SPECS[(dtype_name, _OUT_DTYPES[out_dtype], b_major, plan.config)]
    return get_kernel(spec, device), device, expected, b_major, plan


def _scratch(device: int, stream: int, workspace_elems: int,
             counter_elems: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(workspace, counters) of ``stream`` on ``device``, big enough for one split-K launch."""
    found = _SCRATCH.get((device, stream))
    if found is None or found[0].numel() < workspace_elems or found[1].numel() < counter_elems:
        # the old counters are all zero between launches, so replacing them loses nothing; the
        # old tensors are kept, not freed (a captured graph may still use them)
        # (at least twice the old sizes: a few growths at most, so few retired tensors)
        workspace_elems, counter_elems = max(workspace_elems, 1 << 20), max(counter_elems, 1024)
        if found is not None:
            _RETIRED.append(found)
            workspace_elems = max(workspace_elems, 2 * found[0].numel())
            counter_elems = max(counter_elems, 2 * found[1].numel())
        found = _SCRATCH[(device, stream)] = (
            torch.empty(workspace_elems, dtype=torch.float32, device=f"cuda:{device}"),
            torch.zeros(counter_elems, dtype=torch.int32, device=f"cuda:{device}"))
    return found


def _dtype_text(name: str) -> str:
    return "torch.bfloat16" if name == "bf16" else "torch.float16"


class _TmaOperand:
    """What the loader reads of a TMA operand (address, ``[L, rows, cols]`` shape and strides,
    element size), made without a torch view per call (three views cost ~3 µs of host time)."""

    __slots__ = ("_ptr", "shape", "_strides", "_elem")

    def __init__(self, ptr: int, shape: tuple[int, int, int], strides: tuple[int, int, int], elem: int) -> None:
        self._ptr, self.shape, self._strides, self._elem = ptr, shape, strides, elem

    def data_ptr(self) -> int:
        return self._ptr

    def stride(self) -> tuple[int, int, int]:
        return self._strides

    def element_size(self) -> int:
        return self._elem


def _operand(tensor: torch.Tensor, batched: bool, transpose: bool = False) -> _TmaOperand:
    """``tensor`` as ``[L, rows, cols]`` with contiguous cols (``transpose``: its last two modes
    swapped). The stride of a single row or batch entry is never followed: a valid one is used."""
    shape, strides = tensor.shape, tensor.stride()
    rows, cols = (shape[-1], shape[-2]) if transpose else (shape[-2], shape[-1])
    row_stride = strides[-1] if transpose else strides[-2]
    row_stride = row_stride if rows > 1 else cols
    batch = shape[0] if batched else 1
    batch_stride = strides[0] if batch > 1 else rows * row_stride
    return _TmaOperand(tensor.data_ptr(), (batch, rows, cols), (batch_stride, row_stride, 1), tensor.element_size())


def _gemm(a: torch.Tensor, b: torch.Tensor, bias: torch.Tensor | None, pdl: bool, out: torch.Tensor | None,
          out_dtype: torch.dtype, backend: str, batched: bool, dtype_name: str) -> torch.Tensor:
    if backend != "auto" and backend != "cutefi":
        _check_backend(backend)
    if pdl is not True and pdl is not False:
        raise TypeError(f"pdl must be a bool, got {pdl!r}")
    try:
        key = (a.dtype, a.shape, a.stride(), a.get_device(), b.dtype, b.shape, b.stride(), b.get_device(),
               None if out is None else (out.dtype, out.shape, out.stride(), out.get_device()),
               None if bias is None else (bias.dtype, bias.shape, bias.stride(), bias.get_device()),
               out_dtype, batched, dtype_name, GENERATION[0])
    except AttributeError:
        key = None
    plan = _PLANS.get(key)
    if plan is None:
        plan = _PLANS.put(key, _plan(a, b, out, bias, out_dtype, batched, dtype_name))
    kernel, device, shape, b_major, grid = plan
    if out is None:
        out = torch.empty(shape, dtype=out_dtype, device=a.device)
    if kernel is None:  # an empty dimension: nothing to multiply
        if out.numel():
            out.copy_(bias.expand_as(out)) if bias is not None else out.zero_()
        return out
    b_ptr = b.data_ptr()
    bias_ptr = bias.data_ptr() if bias is not None else b_ptr
    if (a.data_ptr() | b_ptr | out.data_ptr()) & 15 or bias_ptr & 1:
        raise ValueError("a, b and out must start on 16-byte boundaries (bias on 2-byte ones); "
                         "slice views that start mid-row are not taken")
    workspace = counters = b_ptr  # (not read without split-K)
    stream = None  # (the loader takes torch's current one)
    if grid.workspace_elems:
        stream = _current_stream(device)
        workspace_t, counters_t = _scratch(device, stream, grid.workspace_elems, grid.counter_elems)
        workspace, counters = workspace_t.data_ptr(), counters_t.data_ptr()
    m, n, k = shape[-2], shape[-1], a.shape[-1]
    common = dict(bias=bias_ptr, workspace=workspace, counters=counters, m=m, n=n, k=k,
                  has_bias=0 if bias is None else 1, splits=grid.splits)
    if isinstance(grid, GemvPlan):
        kernel.launch((grid.blocks, 1, 1), device, stream, pdl, a=a.data_ptr(), b=b_ptr, c=out.data_ptr(),
                      bias=bias_ptr, m=m, n=n, k=k, has_bias=common["has_bias"], lda=a.stride(-2) if m > 1 else k,
                      ldb=b.stride(-1), ldc=out.stride(-2) if m > 1 else n)
        return out
    if isinstance(grid, SkinnyPlan):
        # (a stride of a single row is never multiplied by a row index: pass a harmless one)
        kernel.launch((grid.blocks, grid.splits, 1), device, stream, pdl, a=a.data_ptr(), b=b_ptr,
                      c=out.data_ptr(), lda=a.stride(-2) if m > 1 else k, ldb=b.stride(-1),
                      ldc=out.stride(-2) if m > 1 else n, **common)
        return out
    if isinstance(grid, Sm80Plan):
        batch = shape[0] if batched else 1
        kernel.launch((grid.tiles, 1, 1), device, None, pdl, a=a.data_ptr(), b=b_ptr, c=out.data_ptr(),
                      bias=bias_ptr, m=m, n=n, k=k, batch=batch, group_m=grid.group_m,
                      has_bias=0 if bias is None else 1, lda=a.stride(-2) if m > 1 else k,
                      ldb=b.stride(-1) if b_major == "k" else b.stride(-2), ldc=out.stride(-2) if m > 1 else n,
                      batch_a=a.stride(0) if batch > 1 else 0, batch_b=b.stride(0) if batch > 1 else 0,
                      batch_c=out.stride(0) if batch > 1 else 0)
        return out
    b_view = _operand(b, batched, transpose=b_major == "k")  # the loader reads row-major operands
    if grid.config.swap:  # the weight is A, the tokens B; out is written transposed, by pointer
        kernel.launch((grid.ctas, 1, 1), device, stream, pdl, a=b_view, b=_operand(a, batched),
                      c=out.data_ptr(), ldc=out.stride(-2) if m > 1 else n, batch=1, group_m=grid.group_m,
                      ctas=grid.ctas, weight_policy=grid.weight_policy, k_rotation=grid.k_rotation,
                      **{**common, "m": n, "n": m})
        return out
    kernel.launch((grid.ctas, 1, 1), device, stream, pdl,
                  a=_operand(a, batched), b=b_view, c=_operand(out, batched),
                  batch=shape[0] if batched else 1, group_m=grid.group_m, ctas=grid.ctas, **common)
    return out


@api_log
def mm_bf16(a: torch.Tensor, b: torch.Tensor, bias: torch.Tensor | None = None, pdl: bool = False,
            out: torch.Tensor | None = None, out_dtype: torch.dtype = torch.bfloat16,
            backend: str = "auto", *, skip_check: bool = False) -> torch.Tensor:
    """``out = a @ b (+ bias)``: ``a`` [M, K] bf16, ``b`` [K, N] bf16 (``w.t()`` of an [N, K]
    weight, or row-major), ``bias`` [N] bf16, output bf16, fp16 or fp32 ``out_dtype`` (or ``out``)."""
    if compiling():
        return _OPS["mm"](a, b, bias, pdl, out, out_dtype, "bf16")
    return _gemm(a, b, bias, pdl, out, out_dtype, backend, False, "bf16")


@api_log
def mm_fp16(a: torch.Tensor, b: torch.Tensor, bias: torch.Tensor | None = None, pdl: bool = False,
            out: torch.Tensor | None = None, out_dtype: torch.dtype = torch.float16,
            backend: str = "auto", *, skip_check: bool = False) -> torch.Tensor:
    """``mm_bf16`` for fp16 inputs (output fp16 by default)."""
    if compiling():
        return _OPS["mm"](a, b, bias, pdl, out, out_dtype, "fp16")
    return _gemm(a, b, bias, pdl, out, out_dtype, backend, False, "fp16")


@api_log
def bmm_bf16(A: torch.Tensor, B: torch.Tensor, out: torch.Tensor | None = None,
             out_dtype: torch.dtype = torch.bfloat16, backend: str = "auto", *,
             skip_check: bool = False) -> torch.Tensor:
    """``out[i] = A[i] @ B[i]``: ``A`` [b, M, K], ``B`` [b, K, N] (column- or row-major), bf16;
    output bf16, fp16 or fp32 ``out_dtype``."""
    if compiling():
        return _OPS["mm"](A, B, None, False, out, out_dtype, "bf16")
    return _gemm(A, B, None, False, out, out_dtype, backend, True, "bf16")


@api_log
def bmm_fp16(A: torch.Tensor, B: torch.Tensor, out: torch.Tensor | None = None,
             out_dtype: torch.dtype = torch.float16, backend: str = "auto", *,
             skip_check: bool = False) -> torch.Tensor:
    """``bmm_bf16`` for fp16 inputs."""
    if compiling():
        return _OPS["mm"](A, B, None, False, out, out_dtype, "fp16")
    return _gemm(A, B, None, False, out, out_dtype, backend, True, "fp16")


# ---- torch.compile: the ops Dynamo records ------------------------------------------------
def _mm_into(a: torch.Tensor, b: torch.Tensor, bias: torch.Tensor | None, pdl: bool, out: torch.Tensor,
             dtype: str) -> None:
    _gemm(a, b, bias, pdl, out, out.dtype, "auto", a.dim() == 3, dtype)


def _no_output(*args: object) -> None:
    return None


def _out_for(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor | None, out_dtype: torch.dtype) -> torch.Tensor:
    """``out``, or a new ``[..., M, N]`` output of ``out_dtype`` (traced: a fake under torch.compile)."""
    return a.new_empty((*a.shape[:-1], b.shape[-1]), dtype=out_dtype) if out is None else out


def _traced_mm(a: torch.Tensor, b: torch.Tensor, bias: torch.Tensor | None, pdl: bool, out: torch.Tensor | None,
               out_dtype: torch.dtype, dtype: str) -> torch.Tensor:
    out = _out_for(a, b, out, out_dtype)
    _OPS["mm_into"](a, b, bias, pdl, out, dtype)
    return out


_OPS = {
    "mm_into": define("gemm_mm_into(Tensor a, Tensor b, Tensor? bias, bool pdl, Tensor(a!) out, str dtype) -> ()",
                      _mm_into, _no_output),
    "mm": _traced_mm,
}
for _function in (mm_bf16, bmm_bf16):
    declare(_function, (Family.MMA_SYNC,), ("bf16",))  # (Hopper: wgmma where it pays)
for _function in (mm_fp16, bmm_fp16):
    declare(_function, (Family.MMA_SYNC,), ("fp16",))

# FP8 with per-tensor scales (Hopper): defined beside, public from here like the family's others
from .fp8_api import bmm_fp8, mm_fp8  # noqa: E402
from .groupwise_api import gemm_fp8_nt_blockscaled, gemm_fp8_nt_groupwise  # noqa: E402
from .quantize import quantize_fp8  # noqa: E402
from .segment_api import SegmentGEMMWrapper, group_gemm_fp8_nt_groupwise  # noqa: E402

FP8_OPS = (bmm_fp8, mm_fp8, gemm_fp8_nt_groupwise, gemm_fp8_nt_blockscaled, quantize_fp8, group_gemm_fp8_nt_groupwise)
GROUPED = (SegmentGEMMWrapper, group_gemm_fp8_nt_groupwise)
