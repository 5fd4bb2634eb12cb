"""FP8 GEMM with DeepSeek-style block scales: FlashInfer's ``gemm_fp8_nt_groupwise`` (and
``gemm_fp8_nt_blockscaled``) on the Hopper block-scaled wgmma builds (``sm90_kernel.py`` with
``block_scaled``: each 128-element K block's sums promoted into fp32 registers times its scales),
and on other GPUs from sm_89 on the block-scaled mma.sync builds (``sm80_kernel.py``, the same
promotion per K tile of 128; FP8 MMAs in hardware on sm_89 and sm_120a/121a, emulated by ptxas
on sm_100a/103a).

``out[i, j] = sum over K blocks kb of a_scale[i, kb] * b_scale[j // 128, kb] * (a[i, kb] . b[j, kb])``
with ``a`` ``[M, K]`` and ``b`` ``[N, K]`` (an nn.Linear weight; both rows contiguous, one FP8
format), rounded once to bf16 or fp16. ``scale_granularity_mnk`` is ``(1, 128, 128)`` (an
activation scale per row and 128 columns of K, as DeepSeek-V3 quantises activations) or
``(128, 128, 128)`` (per 128 x 128 block, as its weights are stored). Scale shapes, with
``mb = M`` (or ``ceil(M / 128)``), ``nb = ceil(N / 128)``, ``kb = ceil(K / 128)``:

  - ``scale_major_mode="K"``: ``a_scale`` ``[mb, kb]``, ``b_scale`` ``[nb, kb]``;
  - ``"MN"``: ``a_scale`` ``[kb, mb]``, ``b_scale`` ``[kb, nb]``;
  - ``None`` (FlashInfer's trtllm backend): ``a_scale`` ``[mb, kb]``, ``b_scale`` ``[kb, nb]``.

Any strides (a transposed view is taken as it is). K must be a multiple of 16 and N of 8
(16-byte rows, for TMA); M, N and K need not be multiples of 128. sm_80/86 (no FP8 tensor
cores) are refused.
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
from .api import _PLANS, _check_backend, _no_output
from .fp8_api import _FP8, _NATIVE_FP8_MMA, _OUT, launch_hopper, launch_mma_sync, output_for
from .plan import GENERATION, Sm80Plan, block_scaled_plan

BLOCK = 128
GRANULARITIES = ((1, BLOCK, BLOCK), (BLOCK, BLOCK, BLOCK))
SCALE_MAJOR_MODES = ("K", "MN", None)
_ELEMS = launch.align_elems("fp8e4m3")  # 16


def _ceil(x: int, y: int) -> int:
    return -(-x // y)


def _operand_rows(name: str, tensor: torch.Tensor, what: str) -> None:
    require_tensor(name, tensor)
    if tensor.dim() != 2:
        raise ValueError(f"{name} must be 2-D {what}, got shape {tuple(tensor.shape)}")
    if tensor.dtype not in _FP8:
        raise TypeError(f"{name} must be torch.float8_e4m3fn or torch.float8_e5m2, got {tensor.dtype}")
    rows, cols = tensor.shape
    if cols > 1 and tensor.stride(1) != 1 or rows > 1 and (tensor.stride(0) < cols or tensor.stride(0) % _ELEMS):
        raise ValueError(f"{name} {tuple(tensor.shape)} with strides {tuple(tensor.stride())} is not taken: its rows "
                         f"must be contiguous and a multiple of {_ELEMS} elements (16 bytes) apart")


def _scale_strides(name: str, scale: torch.Tensor, rows: int, k_blocks: int, k_major: bool) -> tuple[int, int]:
    """(stride between rows, stride between K blocks) of a scale tensor, in elements."""
    require_tensor(name, scale)
    shape = (rows, k_blocks) if k_major else (k_blocks, rows)
    if scale.dtype != torch.float32 or tuple(scale.shape) != shape:
        raise ValueError(f"{name} must be float32 of shape {shape} ({'[rows, K blocks]' if k_major else '[K blocks, rows]'}"
                         f"); got {tuple(scale.shape)} {scale.dtype}")
    row_stride, k_stride = (scale.stride(0), scale.stride(1)) if k_major else (scale.stride(1), scale.stride(0))
    return (row_stride if rows > 1 else 0), (k_stride if k_blocks > 1 else 0)


def _plan(a, b, a_scale, b_scale, scale_major_mode, granularity, out, out_dtype) -> tuple:
    _operand_rows("a", a, "[M, K]")
    _operand_rows("b", b, "[N, K] (an nn.Linear weight)")
    if a.dtype != b.dtype:
        raise TypeError(f"a and b must share one FP8 format, got {a.dtype} and {b.dtype}")
    (m, k), (n, k_b) = a.shape, b.shape
    if k != k_b:
        raise ValueError(f"a {tuple(a.shape)} and b {tuple(b.shape)}: K must match ({k} vs {k_b})")
    if k % _ELEMS or n % launch.ALIGN_ELEMS:
        raise ValueError(f"K must be a multiple of {_ELEMS} and N of {launch.ALIGN_ELEMS} (rows of 16 bytes, for "
                         f"TMA); got N={n}, K={k}")
    if out_dtype not in _OUT:
        raise TypeError(f"the output dtype must be torch.bfloat16 or torch.float16, got {out_dtype}")
    if out is not None:
        require_tensor("out", out)
        if tuple(out.shape) != (m, n) or out.dtype != out_dtype:
            raise ValueError(f"out must be {(m, n)} {out_dtype}, got {tuple(out.shape)} {out.dtype}")
        if n > 1 and out.stride(1) != 1 or m > 1 and (out.stride(0) < n or out.stride(0) % launch.ALIGN_ELEMS):
            raise ValueError(f"out {tuple(out.shape)} with strides {tuple(out.stride())} is not taken: its rows must "
                             f"be contiguous and a multiple of {launch.ALIGN_ELEMS} elements apart")
    scale_rows = granularity[0]
    k_blocks, n_blocks, m_blocks = _ceil(k, BLOCK), _ceil(n, BLOCK), _ceil(m, scale_rows)
    a_k_major = scale_major_mode in ("K", None)
    b_k_major = scale_major_mode == "K"
    sa_row, sa_k = _scale_strides("a_scale", a_scale, m_blocks, k_blocks, a_k_major)
    sb_col, sb_k = _scale_strides("b_scale", b_scale, n_blocks, k_blocks, b_k_major)
    device = require_cuda("a", a)
    require_same_device(*[(name, t) for name, t in (("a", a), ("b", b), ("a_scale", a_scale), ("b_scale", b_scale),
                                                     ("out", out)) if t is not None])
    cc = device_cc(device)
    if not isinstance(family_target(Family.MMA_SYNC_FP8, Target(*cc)), Target):
        raise RuntimeError(f"gemm_fp8_nt_groupwise needs FP8 tensor cores (compute capability 8.9 or newer: sm_89, "
                           f"sm_90a, sm_100a, sm_120a ...); device {device} is sm_{cc[0]}{cc[1]}")
    strides = dict(scale_rows=scale_rows, sa_row=sa_row, sa_k=sa_k, sb_col=sb_col, sb_k=sb_k)
    if min(m, n, k) == 0:
        return None, device, (m, n), None, strides
    from .api import _sms

    plan = block_scaled_plan(m, n, k, _sms(device), wgmma=cc == (9, 0), native_fp8=cc in _NATIVE_FP8_MMA)
    specs = launch.SM80_BLOCK_SCALED_SPECS if isinstance(plan, Sm80Plan) else launch.BLOCK_SCALED_SPECS
    spec = specs[(_FP8[a.dtype], _OUT[out_dtype], plan.config)]
    return get_kernel(spec, device), device, (m, n), plan, strides


def _groupwise(a: torch.Tensor, b: torch.Tensor, a_scale: torch.Tensor, b_scale: torch.Tensor,
               scale_major_mode: str | None, granularity: tuple[int, int, int], out: torch.Tensor | None,
               out_dtype: torch.dtype) -> torch.Tensor:
    try:
        key = ("fp8 groupwise", a.dtype, a.shape, a.stride(), a.get_device(), b.dtype, b.shape, b.stride(),
               b.get_device(), a_scale.shape, a_scale.stride(), a_scale.dtype, a_scale.get_device(), b_scale.shape,
               b_scale.stride(), b_scale.dtype, b_scale.get_device(), scale_major_mode, granularity,
               None if out is None else (out.dtype, out.shape, out.stride(), out.get_device()), out_dtype,
               GENERATION[0])
    except AttributeError:
        key = None
    found = _PLANS.get(key)
    if found is None:
        found = _PLANS.put(key, _plan(a, b, a_scale, b_scale, scale_major_mode, granularity, out, out_dtype))
    kernel, device, shape, grid, strides = found
    out, empty = output_for(kernel, shape, out, out_dtype, a.device)
    if empty:
        return out
    if (a.data_ptr() | b.data_ptr() | out.data_ptr()) & 15 or (a_scale.data_ptr() | b_scale.data_ptr()) & 3:
        raise ValueError("a, b and out must start on 16-byte boundaries (slice views that start mid-row are not "
                         "taken), a_scale and b_scale on 4-byte ones")
    run = launch_mma_sync if isinstance(grid, Sm80Plan) else launch_hopper
    scales = dict(scale_a=a_scale.data_ptr(), scale_b=b_scale.data_ptr(), **strides)
    if not isinstance(grid, Sm80Plan) and grid.config.swap:  # the weight is the kernel's A: its scales too
        scales = dict(scale_a=b_scale.data_ptr(), scale_b=a_scale.data_ptr(), scale_rows=strides["scale_rows"],
                      sa_row=strides["sb_col"], sa_k=strides["sb_k"], sb_col=strides["sa_row"], sb_k=strides["sa_k"])
    run(kernel, grid, device, a, b.t(), out, shape[0], shape[1], a.shape[1], False, **scales)
    return out


def _check_options(scale_major_mode: object, mma_sm: object, granularity: object, backend: object) -> tuple:
    _check_backend(backend)
    if scale_major_mode not in SCALE_MAJOR_MODES:
        raise ValueError(f"scale_major_mode must be 'K', 'MN' or None, got {scale_major_mode!r}")
    if mma_sm not in (1, 2):
        raise ValueError(f"mma_sm must be 1 or 2, got {mma_sm!r}")
    try:
        granularity = tuple(int(g) for g in granularity)  # type: ignore[union-attr]
    except TypeError:
        granularity = ()
    if granularity not in GRANULARITIES:
        raise ValueError(f"scale_granularity_mnk must be (1, 128, 128) or (128, 128, 128), got {granularity!r}")
    return granularity


@api_log
def gemm_fp8_nt_groupwise(a: torch.Tensor, b: torch.Tensor, a_scale: torch.Tensor, b_scale: torch.Tensor,
                          scale_major_mode: str | None = None, mma_sm: int = 1,
                          scale_granularity_mnk: tuple[int, int, int] = (1, 128, 128),
                          out: torch.Tensor | None = None, out_dtype: torch.dtype | None = None,
                          backend: str = "auto", *, skip_check: bool = False) -> torch.Tensor:
    """``a @ b.T`` of FP8 ``a`` [M, K] and ``b`` [N, K] with block scales (see the module
    docstring for their shapes); ``out`` or ``out_dtype`` (default bf16) picks the output.
    ``mma_sm`` (Blackwell's two-SM MMA) is accepted and has no effect on Hopper."""
    granularity = _check_options(scale_major_mode, mma_sm, scale_granularity_mnk, backend)
    out_dtype = out.dtype if out is not None else (out_dtype or torch.bfloat16)
    if compiling():
        return _OPS["traced"](a, b, a_scale, b_scale, scale_major_mode, granularity, out, out_dtype)
    return _groupwise(a, b, a_scale, b_scale, scale_major_mode, granularity, out, out_dtype)


@api_log
def gemm_fp8_nt_blockscaled(a: torch.Tensor, b: torch.Tensor, a_scale: torch.Tensor, b_scale: torch.Tensor,
                            scale_major_mode: str | None = "MN", mma_sm: int = 1, out: torch.Tensor | None = None,
                            out_dtype: torch.dtype | None = None, *, skip_check: bool = False) -> torch.Tensor:
    """``gemm_fp8_nt_groupwise`` with 128 x 128 activation blocks (``scale_granularity_mnk``
    ``(128, 128, 128)``)."""
    return gemm_fp8_nt_groupwise(a, b, a_scale, b_scale, scale_major_mode, mma_sm, (BLOCK, BLOCK, BLOCK), out,
                                 out_dtype)


# ---- torch.compile: the op Dynamo records ---------------------------------------------------
def _into(a: torch.Tensor, b: torch.Tensor, a_scale: torch.Tensor, b_scale: torch.Tensor,
          scale_major_mode: str | None, scale_rows: int, out: torch.Tensor) -> None:
    _groupwise(a, b, a_scale, b_scale, scale_major_mode, (scale_rows, BLOCK, BLOCK), out, out.dtype)


def _traced(a, b, a_scale, b_scale, scale_major_mode, granularity, out, out_dtype) -> torch.Tensor:
    out = a.new_empty((a.shape[0], b.shape[0]), dtype=out_dtype) if out is None else out
    _OPS["into"](a, b, a_scale, b_scale, scale_major_mode, granularity[0], out)
    return out


_OPS = {
    "into": define("gemm_fp8_groupwise_into(Tensor a, Tensor b, Tensor a_scale, Tensor b_scale, str? scale_major_mode,"
                   " int scale_rows, Tensor(a!) out) -> ()", _into, _no_output),
    "traced": _traced,
}
for _function in (gemm_fp8_nt_groupwise, gemm_fp8_nt_blockscaled):  # (Hopper: wgmma)
    declare(_function, (Family.MMA_SYNC_FP8,), ("fp8e4m3", "fp8e5m2"))
