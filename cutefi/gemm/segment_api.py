"""Grouped (segment) GEMM in one launch: FlashInfer's ``SegmentGEMMWrapper`` (bf16/fp16, for
multi-LoRA and MoE) and ``group_gemm_fp8_nt_groupwise`` (FP8 with DeepSeek-style block scales,
for MoE experts), on the Hopper grouped builds (``sm90_kernel.py`` with ``grouped``) and, on
every other GPU, the mma.sync grouped builds (``sm80_kernel.py`` with ``grouped``: one CTA a
work unit, the grid an upper bound on the units; FP8 from sm_89 on).

Segment ``s`` is rows ``[indptr[s], indptr[s + 1])`` of ``x`` and of the output, multiplied by
weight ``weight_indices[s]`` (default ``s``). Segment bounds stay on the device: no host
synchronisation, so a call can be captured in a CUDA graph. The Hopper builds' persistent
CTAs each count the output tiles before every segment from those bounds and walk the tiles;
for the mma.sync builds the host counts them (a few small torch operations). Rows outside
every segment are not written: a new output of ``SegmentGEMMWrapper.run`` is zero-filled and
one of ``group_gemm_fp8_nt_groupwise`` is ``torch.empty`` (each as FlashInfer's). Up to
``MAX_GROUPS`` segments a call.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .._capability import declare
from .._checks import require_cuda, require_same_device, require_tensor
from .._library import compiling, define
from .._plans import PlanCache, signature
from ..jit.logs import api_log
from ..jit.lookup import device_cc, get_kernel
from ..jit.policy import Family, family_target
from ..jit.targets import Target
from . import launch
from .api import _TORCH_DTYPES, _no_output, _operand, _sms
from .fp8_api import _FP8, _NATIVE_FP8_MMA, _OUT
from .groupwise_api import BLOCK, _ceil, _check_options, _scale_strides
from .launch import MAX_GROUPS, Sm80Config, Sm90Config
from .plan import GENERATION, forced_config

_INDEX_DTYPES = (torch.int32, torch.int64)


def _mma_sync_config(device: int, what: str, family: Family, rows: int, n: int, groups: int,
                     configs: tuple[Sm80Config, Sm80Config]) -> Sm80Config | None:
    """None where ``device`` takes the Hopper builds; else the mma.sync build of ``configs``:
    one forced by ``plan.override`` (which a Hopper runs too), or the 128 x 128 one
    (``configs[1]``) when an estimate of its tile count fills half the SMs (and, FP8, the chip
    has FP8 MMAs), else the 64 x 64 one. Raises where ``family`` has no target for the device."""
    cc = device_cc(device)
    forced = forced_config()
    if isinstance(forced, Sm80Config) and forced not in configs:
        raise ValueError(f"GEMM config {forced.name} has no {what} build; built: {', '.join(c.name for c in configs)}")
    if cc == (9, 0) and not isinstance(forced, Sm80Config):
        return None
    if not isinstance(family_target(family, Target(*cc)), Target):
        needs = "FP8 tensor cores (compute capability 8.9 or newer)" if family is Family.MMA_SYNC_FP8 else \
            "tensor cores (compute capability 8.0 or newer)"
        raise RuntimeError(f"{what} needs {needs}; device {device} is sm_{cc[0]}{cc[1]}")
    if isinstance(forced, Sm80Config):
        return forced
    native = family is not Family.MMA_SYNC_FP8 or cc in _NATIVE_FP8_MMA
    estimate = (_ceil(rows, 128) + groups) * _ceil(n, 128)
    return configs[1] if native and 2 * estimate >= _sms(device) else configs[0]


def _launch_mma_sync(kernel, config: Sm80Config, device: int, a: torch.Tensor, weights: torch.Tensor,
                     out: torch.Tensor, indptr: torch.Tensor, weight_indices: torch.Tensor, **extra: int) -> None:
    """One CTA a work unit: the grid is an upper bound (every segment's rows rounded up), the
    CTAs past the last unit exit; ``weights`` ``[L, N, K]`` or ``[L, K, N]``, rows contiguous."""
    rows, k = a.shape
    n = out.shape[1]
    groups = indptr.shape[0] - 1
    tiles_n = _ceil(n, config.tile_n)
    prefix = _tile_prefix(indptr, tiles_n, config.tile_m)
    kernel.launch(((_ceil(rows, config.tile_m) + groups) * tiles_n, 1, 1), device, None, False, a=a.data_ptr(),
                  b=weights.data_ptr(), c=out.data_ptr(), bias=out.data_ptr(), m=rows, n=n, k=k,
                  batch=weights.shape[0], group_m=1, has_bias=0, lda=a.stride(0) if rows > 1 else k,
                  ldb=weights.stride(1), ldc=out.stride(0) if rows > 1 else n, batch_a=0,
                  batch_b=weights.stride(0) if weights.shape[0] > 1 else 0, batch_c=0, seg_indptr=indptr.data_ptr(),
                  tile_prefix=prefix.data_ptr(), weight_indices=weight_indices.data_ptr(), groups=groups, **extra)


_IDENTITY: dict[torch.device, torch.Tensor] = {}  # per device: 0, 1, ..., MAX_GROUPS - 1


def _identity(groups: int, device: torch.device) -> torch.Tensor:
    """The default ``weight_indices`` (segment s takes weight s) without a launch a call: one
    int32 range a device, copied from the host once (a blocking copy, so any stream may read it
    at once); while torch.compile traces, or inside a CUDA graph capture before the first eager
    call, a range made there."""
    if compiling():
        return torch.arange(groups, dtype=torch.int32, device=device)
    cached = _IDENTITY.get(device)
    if cached is None:
        if torch.cuda.is_current_stream_capturing():
            return torch.arange(groups, dtype=torch.int32, device=device)
        cached = _IDENTITY[device] = torch.arange(MAX_GROUPS, dtype=torch.int32).to(device)
    return cached[:groups]


def _index(name: str, tensor: torch.Tensor, length: int, device: torch.device) -> torch.Tensor:
    """``tensor`` as contiguous int32 on ``device`` (a copy where it is not already; a host
    tensor is copied over, as FlashInfer does: pass device tensors where the copy matters)."""
    require_tensor(name, tensor)
    if tensor.dim() != 1 or tensor.shape[0] != length or tensor.dtype not in _INDEX_DTYPES:
        raise ValueError(f"{name} must be a 1-D int32 or int64 tensor of {length} entries, got "
                         f"{tuple(tensor.shape)} {tensor.dtype}")
    if tensor.device != device:
        if tensor.is_cuda:
            raise ValueError(f"{name} must be on {device} or the host, got {tensor.device}")
        tensor = tensor.to(device)
    return tensor.to(torch.int32).contiguous()


def _config(rows: int, n: int, groups: int, sms: int, swapped: bool = False) -> Sm90Config:
    """``swapped`` (FP8 builds have them): segments of 64 rows or fewer on average take the
    weight as A and their tokens in 32- or 64-token tiles (``launch.GROUPED_SWAP_CONFIGS``).
    Else 128 x 256 tiles when an estimate of their count (every segment's rows rounded up)
    fills 0.8 of a wave, else 128 x 128."""
    if swapped and rows <= 64 * groups:
        return launch.GROUPED_SWAP_CONFIGS[0 if rows <= 32 * groups else 1]
    wide = Sm90Config(128, 256, 1)
    estimate = (_ceil(rows, 128) + groups) * _ceil(n, wide.tile_n)
    return wide if 5 * estimate >= 4 * sms else Sm90Config(128, 128, 1)


def _swapped(config: Sm80Config | Sm90Config) -> bool:
    return isinstance(config, Sm90Config) and config.swap


def _tile_prefix(indptr: torch.Tensor, tiles_n: int, tile_m: int) -> torch.Tensor:
    """Output tiles before each segment (``groups + 1`` int32, the last the total)."""
    lens = (indptr[1:] - indptr[:-1]).clamp_(min=0)
    prefix = torch.zeros(indptr.shape[0], dtype=torch.int32, device=indptr.device)
    torch.cumsum((lens + tile_m - 1) // tile_m * tiles_n, 0, out=prefix[1:])
    return prefix


def _launch(kernel, config: Sm90Config, device: int, a: torch.Tensor, weights: torch.Tensor, out: torch.Tensor,
            indptr: torch.Tensor, weight_indices: torch.Tensor, **extra: int) -> None:
    """``weights`` row-major ``[L, N, K]`` (a K-major build) or ``[L, K, N]`` (an N-major one)."""
    rows, k = a.shape
    n = out.shape[1]
    groups = indptr.shape[0] - 1
    common = dict(c_rows=out.data_ptr(), bias=a.data_ptr(), workspace=out.data_ptr(), counters=indptr.data_ptr(), k=k,
                  batch=1, group_m=1, has_bias=0, splits=1, ldc=out.stride(0) if rows > 1 else n,
                  seg_indptr=indptr.data_ptr(), weight_indices=weight_indices.data_ptr(), groups=groups, **extra)
    # (an upper bound on the units: each CTA counts them from seg_indptr)
    if _swapped(config):  # (the weight is the kernel's A, the tokens its B; out written transposed)
        ctas = min(_sms(device), (_ceil(rows, config.tile_n) + groups) * _ceil(n, config.tile_m))
        kernel.launch((ctas, 1, 1), device, None, False, a=_operand(weights, True), b=_operand(a, False),
                      c=out.data_ptr(), m=n, n=rows, ctas=ctas, **common)
    else:
        ctas = min(_sms(device), (_ceil(rows, config.tile_m) + groups) * _ceil(n, config.tile_n))
        kernel.launch((ctas, 1, 1), device, None, False, a=_operand(a, False), b=_operand(weights, True),
                      c=_operand(out, False), m=rows, n=n, ctas=ctas, **common)


def _rows_operand(name: str, tensor: torch.Tensor, align: int) -> None:
    rows, cols = tensor.shape
    if cols > 1 and tensor.stride(1) != 1 or rows > 1 and (tensor.stride(0) < cols or tensor.stride(0) % align):
        raise ValueError(f"{name} {tuple(tensor.shape)} with strides {tuple(tensor.stride())} is not taken: its rows "
                         f"must be contiguous and a multiple of 16 bytes apart")


def _check_pointers(tensors: tuple[tuple[str, torch.Tensor, int], ...]) -> None:
    """Each tensor starts on its boundary (checked in the launch: torch.compile traces no pointers)."""
    for name, tensor, align in tensors:
        if tensor.data_ptr() % align:
            raise ValueError(f"{name} must start on a {align}-byte boundary")


class SegmentGEMMWrapper:
    """FlashInfer's segment GEMM: ``y[seg] = x[seg] @ W[weight_indices[seg]]`` for every segment
    in one launch. ``weights`` is ``[num_weights, d_out, d_in]`` when ``weight_column_major``
    (nn.Linear weights), else ``[num_weights, d_in, d_out]``; bf16 or fp16 like ``x``."""

    def __init__(self, float_workspace_buffer: torch.Tensor, backend: str = "auto") -> None:
        require_tensor("float_workspace_buffer", float_workspace_buffer)
        if backend not in ("auto", "cutefi"):
            raise ValueError(f"backend must be 'auto' or 'cutefi' (cutefi runs its own kernels), got {backend!r}")
        self._float_workspace_buffer = float_workspace_buffer  # (kept for FlashInfer's API; not used)

    def reset_workspace_buffer(self, float_workspace_buffer: torch.Tensor, int_workspace_buffer: torch.Tensor) -> None:
        self._float_workspace_buffer = float_workspace_buffer

    @api_log
    def run(self, x: torch.Tensor, weights: torch.Tensor, batch_size: int, weight_column_major: bool,
            out: torch.Tensor | None = None, seg_lens: torch.Tensor | None = None,
            seg_indptr: torch.Tensor | None = None, weight_indices: torch.Tensor | None = None) -> torch.Tensor:
        """Eager calls check their arguments once per layout and keep the launch
        (``_SegmentCall``); later calls of that layout read the index tensors and pointers."""
        key = None
        if not compiling():
            try:
                key = ("segment", signature(x), signature(weights), batch_size, weight_column_major, signature(out),
                       signature(seg_lens), signature(seg_indptr), signature(weight_indices), GENERATION[0])
            except (AttributeError, TypeError):
                key = None
            planned = _SEGMENT_CALLS.get(key)
            if planned is not None:
                return planned(x, weights, out, seg_lens, seg_indptr, weight_indices)
        require_tensor("x", x)
        require_tensor("weights", weights)
        if x.dtype not in _TORCH_DTYPES or weights.dtype != x.dtype:
            raise TypeError(f"x and weights must both be bfloat16 or float16, got {x.dtype} and {weights.dtype}")
        if x.dim() != 2 or weights.dim() != 3:
            raise ValueError(f"x must be 2-D [rows, d_in] and weights 3-D; got {tuple(x.shape)}, {tuple(weights.shape)}")
        if not 1 <= batch_size <= MAX_GROUPS:
            raise ValueError(f"batch_size (segments) must be in [1, {MAX_GROUPS}], got {batch_size}")
        d_in = x.shape[1]
        d_out, w_in = (weights.shape[1], weights.shape[2]) if weight_column_major else (weights.shape[2], weights.shape[1])
        if w_in != d_in:
            raise ValueError(f"weights {tuple(weights.shape)} (weight_column_major={weight_column_major}) do not take "
                             f"d_in={d_in}")
        if d_in % 8 or d_out % 8:
            raise ValueError(f"d_in and d_out must be multiples of 8 (16-byte rows, for TMA); got {d_in}, {d_out}")
        require_cuda("x", x)
        indptr = self._indptr(x, batch_size, seg_lens, seg_indptr)
        chosen = _index("weight_indices", weight_indices, batch_size, x.device) if weight_indices is not None \
            else _identity(batch_size, x.device)
        if out is None:
            out = torch.zeros(x.shape[0], d_out, dtype=x.dtype, device=x.device)
        elif tuple(out.shape) != (x.shape[0], d_out) or out.dtype != x.dtype:
            raise ValueError(f"out must be {(x.shape[0], d_out)} {x.dtype}, got {tuple(out.shape)} {out.dtype}")
        require_same_device(("x", x), ("weights", weights), ("out", out))
        for name, tensor in (("x", x), ("out", out)):
            _rows_operand(name, tensor, 8)
        inner = weights.stride(2) if weights.shape[2] > 1 else 1
        if inner != 1 or weights.stride(1) % 8 or (weights.shape[0] > 1 and weights.stride(0) % 8):
            raise ValueError(f"weights {tuple(weights.shape)} with strides {tuple(weights.stride())} is not taken: "
                             f"its last dimension must be contiguous, the others 16-byte multiples")
        if compiling():
            if x.shape[0]:
                _OPS["segment"](x, weights, indptr, chosen, weight_column_major, out)
            return out
        plan = _segment_launch(x, weights, batch_size, weight_column_major, out) if x.shape[0] else None
        if plan is not None:
            plan.run(x, weights, out, indptr, chosen)
        _SEGMENT_CALLS.put(key, _SegmentCall(plan, batch_size, d_out))
        return out

    forward = run

    @staticmethod
    def _indptr(x: torch.Tensor, batch_size: int, seg_lens: torch.Tensor | None,
                seg_indptr: torch.Tensor | None) -> torch.Tensor:
        if seg_indptr is not None:
            return _index("seg_indptr", seg_indptr, batch_size + 1, x.device)
        if seg_lens is None:
            raise ValueError("either seg_lens or seg_indptr must be given")
        lens = _index("seg_lens", seg_lens, batch_size, x.device)
        indptr = torch.zeros(batch_size + 1, dtype=torch.int32, device=x.device)
        torch.cumsum(lens, 0, out=indptr[1:])
        return indptr


@api_log
def group_gemm_fp8_nt_groupwise(a: torch.Tensor, b: torch.Tensor, a_scale: torch.Tensor, b_scale: torch.Tensor,
                                m_indptr: torch.Tensor, scale_granularity_mnk: tuple[int, int, int] = (1, 128, 128),
                                scale_major_mode: str = "MN", mma_sm: int = 1, out: torch.Tensor | None = None,
                                out_dtype: torch.dtype | None = None, backend: str = "auto", *,
                                skip_check: bool = False) -> torch.Tensor:
    """Segment ``s`` (rows ``[m_indptr[s], m_indptr[s + 1])`` of ``a`` [cum_m, K]) times expert
    ``b[s]`` (``b`` [experts, N, K]) with block scales: ``a_scale`` ``[cum_m, K/128]`` ("K") or
    ``[K/128, cum_m]`` ("MN"), ``b_scale`` ``[experts, N/128, K/128]`` ("K") or
    ``[experts, K/128, N/128]`` ("MN"); output ``[cum_m, N]`` bf16 (or ``out_dtype`` / ``out``).

    Eager calls check their arguments once per layout (dtypes, shapes, strides, devices) and
    keep the launch (``_Fp8Call``); later calls of that layout read only the pointers."""
    key = None
    if not compiling():
        try:
            key = ("group_gemm_fp8", signature(a), signature(b), signature(a_scale), signature(b_scale),
                   signature(m_indptr), signature(out), out_dtype, scale_major_mode, mma_sm,
                   tuple(scale_granularity_mnk), backend, GENERATION[0])
        except (AttributeError, TypeError):
            key = None
        planned = _FP8_CALLS.get(key)
        if planned is not None:
            return planned(a, b, a_scale, b_scale, m_indptr, out)
    granularity = _check_options(scale_major_mode, mma_sm, scale_granularity_mnk, backend)
    if granularity != (1, BLOCK, BLOCK):
        raise ValueError(f"group_gemm_fp8_nt_groupwise takes scale_granularity_mnk (1, 128, 128), got {granularity}")
    if scale_major_mode is None:
        raise ValueError("scale_major_mode must be 'K' or 'MN'")
    for name, tensor, rank in (("a", a, 2), ("b", b, 3)):
        require_tensor(name, tensor)
        if tensor.dim() != rank or tensor.dtype not in _FP8:
            raise TypeError(f"{name} must be a {rank}-D float8_e4m3fn or float8_e5m2 tensor, got "
                            f"{tuple(tensor.shape)} {tensor.dtype}")
    if a.dtype != b.dtype:
        raise TypeError(f"a and b must share one FP8 format, got {a.dtype} and {b.dtype}")
    (rows, k), (experts, n, k_b) = a.shape, b.shape
    if k != k_b or k % 16 or n % 8:
        raise ValueError(f"a {tuple(a.shape)} and b {tuple(b.shape)}: K must match and be a multiple of 16, N of 8")
    out_dtype = out.dtype if out is not None else (out_dtype or torch.bfloat16)
    if out_dtype not in _OUT:
        raise TypeError(f"the output dtype must be torch.bfloat16 or torch.float16, got {out_dtype}")
    groups = m_indptr.shape[0] - 1 if isinstance(m_indptr, torch.Tensor) and m_indptr.dim() == 1 else -1
    if not 1 <= groups <= min(experts, MAX_GROUPS):
        raise ValueError(f"m_indptr must be 1-D with experts + 1 = {experts + 1} entries (at most {MAX_GROUPS + 1})")
    require_cuda("a", a)
    indptr = _index("m_indptr", m_indptr, groups + 1, a.device)
    k_blocks, n_blocks = _ceil(k, BLOCK), _ceil(n, BLOCK)
    k_major = scale_major_mode == "K"
    sa_row, sa_k = _scale_strides("a_scale", a_scale, rows, k_blocks, k_major)
    require_tensor("b_scale", b_scale)
    if b_scale.dim() != 3 or b_scale.shape[0] != experts:
        raise ValueError(f"b_scale must be [experts={experts}, ...], got {tuple(b_scale.shape)}")
    sb_col, sb_k = _scale_strides("b_scale", b_scale[0], n_blocks, k_blocks, k_major)
    if out is None:  # (FlashInfer's: rows outside every segment are left as allocated)
        out = torch.empty(rows, n, dtype=out_dtype, device=a.device)
    elif tuple(out.shape) != (rows, n):
        raise ValueError(f"out must be {(rows, n)}, got {tuple(out.shape)}")
    require_same_device(("a", a), ("b", b), ("a_scale", a_scale), ("b_scale", b_scale), ("out", out))
    for name, tensor, align in (("a", a, 16), ("out", out, 8)):
        _rows_operand(name, tensor, align)
    if (b.stride(2) != 1 and k > 1) or b.stride(1) % 16 or b.stride(0) % 16:
        raise ValueError(f"b {tuple(b.shape)} with strides {tuple(b.stride())} is not taken: rows of K contiguous, "
                         f"16-byte multiples apart")
    if compiling():
        if rows:
            _OPS["fp8"](a, b, a_scale, b_scale, indptr, scale_major_mode, out)
        return out
    launch_plan = _fp8_launch(a, b, a_scale, b_scale, indptr, scale_major_mode, out) if rows else None
    planned = _FP8_CALLS.put(key, _Fp8Call(launch_plan, rows, n, out_dtype, indptr is m_indptr))
    return planned(a, b, a_scale, b_scale, m_indptr, out)


# ---- the launches, and the ops torch.compile records (arguments checked by the callers) -----
def _segment_launch(x: torch.Tensor, weights: torch.Tensor, groups: int, weight_column_major: bool,
                    out: torch.Tensor) -> _GroupedLaunch:
    device = x.get_device()
    # (checked here, not in run: torch.compile traces run, not this)
    mma_sync = _mma_sync_config(device, "SegmentGEMMWrapper", Family.MMA_SYNC, x.shape[0], out.shape[1], groups,
                                launch.SM80_GROUPED_CONFIGS)
    dtype, major = _TORCH_DTYPES[x.dtype], "k" if weight_column_major else "n"
    if mma_sync is None:
        config = _config(x.shape[0], out.shape[1], groups, _sms(device))
        kernel = get_kernel(launch.GROUPED_SPECS[(dtype, dtype, major, config)], device)
    else:
        config, kernel = mma_sync, get_kernel(launch.SM80_GROUPED_SPECS[(dtype, dtype, major, mma_sync)], device)
    return _GroupedLaunch(kernel, config, device, groups, ("x", "weights"))


def _segment_into(x: torch.Tensor, weights: torch.Tensor, indptr: torch.Tensor, chosen: torch.Tensor,
                  weight_column_major: bool, out: torch.Tensor) -> None:
    """The op torch.compile records (arguments checked by the caller)."""
    _segment_launch(x, weights, indptr.shape[0] - 1, weight_column_major, out).run(x, weights, out, indptr, chosen)


@dataclass(frozen=True)
class _GroupedLaunch:
    """A grouped launch worked out from a call's layout; ``run`` reads the pointers, checks
    their alignment and launches. ``names``: A's and B's argument names (for the errors);
    ``scale_strides``: the FP8 builds' scale strides (none for 16-bit)."""

    kernel: object
    config: Sm80Config | Sm90Config
    device: int
    groups: int
    names: tuple[str, str]
    scale_strides: tuple[tuple[str, int], ...] = ()

    def run(self, a: torch.Tensor, b: torch.Tensor, out: torch.Tensor, indptr: torch.Tensor, chosen: torch.Tensor,
            a_scale: torch.Tensor | None = None, b_scale: torch.Tensor | None = None) -> None:
        checked = ((self.names[0], a, 16), (self.names[1], b, 16), ("out", out, 16))
        extra = dict(self.scale_strides)
        if a_scale is not None and b_scale is not None:
            checked += (("a_scale", a_scale, 4), ("b_scale", b_scale, 4))
            # (a swapped build's A is the weight: its scales are the kernel's scale_a)
            pointers = (b_scale, a_scale) if _swapped(self.config) else (a_scale, b_scale)
            extra.update(scale_a=pointers[0].data_ptr(), scale_b=pointers[1].data_ptr())
        _check_pointers(checked)
        if isinstance(self.config, Sm80Config):
            _launch_mma_sync(self.kernel, self.config, self.device, a, b, out, indptr, chosen, **extra)
        else:
            _launch(self.kernel, self.config, self.device, a, b, out, indptr, chosen, **extra)


@dataclass(frozen=True)
class _Fp8Call:
    """A checked eager call of one layout: a new output if none, ``m_indptr`` as int32 if it is
    not (``direct``: it is), then the launch (none for zero rows)."""

    launch: _GroupedLaunch | None
    rows: int
    n: int
    out_dtype: torch.dtype
    direct: bool

    def __call__(self, a, b, a_scale, b_scale, m_indptr, out):
        if out is None:  # (FlashInfer's: rows outside every segment are left as allocated)
            out = torch.empty(self.rows, self.n, dtype=self.out_dtype, device=a.device)
        if self.launch is not None:
            indptr = m_indptr if self.direct else m_indptr.to(torch.int32).contiguous()
            self.launch.run(a, b, out, indptr, _identity(self.launch.groups, a.device), a_scale, b_scale)
        return out


_FP8_CALLS = PlanCache()


@dataclass(frozen=True)
class _SegmentCall:
    """A checked eager ``SegmentGEMMWrapper.run`` of one layout: the segment bounds and weight
    indices as int32 (``seg_lens`` summed), a zero-filled output if none, the launch (none
    for zero rows)."""

    launch: _GroupedLaunch | None
    batch_size: int
    d_out: int

    def __call__(self, x, weights, out, seg_lens, seg_indptr, weight_indices):
        indptr = SegmentGEMMWrapper._indptr(x, self.batch_size, seg_lens, seg_indptr)
        chosen = _index("weight_indices", weight_indices, self.batch_size, x.device) if weight_indices is not None \
            else _identity(self.batch_size, x.device)
        if out is None:
            out = torch.zeros(x.shape[0], self.d_out, dtype=x.dtype, device=x.device)
        if self.launch is not None:
            self.launch.run(x, weights, out, indptr, chosen)
        return out


_SEGMENT_CALLS = PlanCache()


def _fp8_launch(a: torch.Tensor, b: torch.Tensor, a_scale: torch.Tensor, b_scale: torch.Tensor, indptr: torch.Tensor,
                scale_major_mode: str, out: torch.Tensor) -> _GroupedLaunch:
    device = a.get_device()
    (rows, k), (_, n, _) = a.shape, b.shape
    groups = indptr.shape[0] - 1
    mma_sync = _mma_sync_config(device, "group_gemm_fp8_nt_groupwise", Family.MMA_SYNC_FP8, rows, n, groups,
                                launch.SM80_BLOCK_SCALED_CONFIGS[::-1])
    k_major = scale_major_mode == "K"
    sa_row, sa_k = _scale_strides("a_scale", a_scale, rows, _ceil(k, BLOCK), k_major)
    sb_col, sb_k = _scale_strides("b_scale", b_scale[0], _ceil(n, BLOCK), _ceil(k, BLOCK), k_major)
    formats = (_FP8[a.dtype], _OUT[out.dtype], "k")
    config = _config(rows, n, groups, _sms(device), swapped=True) if mma_sync is None else mma_sync
    if _swapped(config):  # (the kernel's A is the weight: sa_* its block scales', sb_* the tokens')
        sa_row, sa_k, sb_col, sb_k = sb_col, sb_k, sa_row, sa_k
    # (sb_batch: between the weights' block scales, whichever operand the weight is)
    strides = (("scale_rows", 1), ("sa_row", sa_row), ("sa_k", sa_k), ("sb_col", sb_col), ("sb_k", sb_k),
               ("sb_batch", b_scale.stride(0)))
    if mma_sync is None:
        kernel = get_kernel(launch.GROUPED_SPECS[(*formats, config)], device)
    else:
        config, kernel = mma_sync, get_kernel(launch.SM80_GROUPED_SPECS[(*formats, mma_sync)], device)
    return _GroupedLaunch(kernel, config, device, groups, ("a", "b"), strides)


def _fp8_into(a: torch.Tensor, b: torch.Tensor, a_scale: torch.Tensor, b_scale: torch.Tensor, indptr: torch.Tensor,
              scale_major_mode: str, out: torch.Tensor) -> None:
    """The op torch.compile records (arguments checked by the caller)."""
    plan = _fp8_launch(a, b, a_scale, b_scale, indptr, scale_major_mode, out)
    plan.run(a, b, out, indptr, _identity(plan.groups, a.device), a_scale, b_scale)


_OPS = {
    "segment": define("segment_gemm_into(Tensor x, Tensor weights, Tensor seg_indptr, Tensor weight_indices, "
                      "bool weight_column_major, Tensor(a!) out) -> ()", _segment_into, _no_output),
    "fp8": define("group_gemm_fp8_into(Tensor a, Tensor b, Tensor a_scale, Tensor b_scale, Tensor m_indptr, "
                  "str scale_major_mode, Tensor(a!) out) -> ()", _fp8_into, _no_output),
}


declare(SegmentGEMMWrapper, (Family.MMA_SYNC,), ("bf16", "fp16"))  # (Hopper: wgmma)
declare(group_gemm_fp8_nt_groupwise, (Family.MMA_SYNC_FP8,), ("fp8e4m3", "fp8e5m2"))
