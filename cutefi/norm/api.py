"""RMSNorm and LayerNorm, and their FP8-quantising variants: FlashInfer's names and arguments
on the CuTe DSL row-norm kernel.

Kernel: ``norm_kernel.py`` (one class for all; specialised on dtype, hidden-size class, the
fused-add / gemma flags, access width and quant format); contract, heuristics and specs:
``launch.py``; argument checks and the choice of build: ``plan.py``. Rows, heads, the hidden
size within its class, strides and eps are runtime arguments: no new build for a new batch or
sequence length. Each distinct call layout is checked once and its plan kept.
"""

from __future__ import annotations


import torch

from .._capability import declare
from .._checks import F32_MAX, require_dtype, require_eps, require_pdl, require_real, require_tensor
from .._library import compiling, define
from .._plans import PlanCache, signature
from ..jit.logs import api_log
from ..jit.policy import Family
from . import launch
from .plan import POINTERS_ALIGNED, POINTERS_STAGED, check_and_plan, pointer_mode

_PLANS = PlanCache()


def launch_norm(kind: str, input: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None,
                out: torch.Tensor, residual: torch.Tensor | None, eps: float, gemma: bool,
                enable_pdl: bool | None = None, weight_name: str = "weight",
                scale: float | torch.Tensor | None = None, silu: bool = False) -> None:
    """Check every argument, then launch the row-norm build for ``kind`` ("rms" or "layer").

    rms: ``weight`` has the input dtype, ``bias`` is None. layer: ``weight`` (gamma) and
    ``bias`` (beta) are fp32, or both the input's dtype (read as they are; other 16-bit mixes run
    on fp32 copies). ``scale`` (not None: the FP8 quant variant, ``out`` FP8): a nonzero float,
    or a one-element tensor read on the device. ``silu``: RMSNorm + SiLU (``fused_rmsnorm_silu``).
    """
    # scalars, every call: the cheap test first (a float in range, a bool or None), then the
    # full check, which names the argument (and turns an int or NumPy eps into a float)
    if type(eps) is not float or not 0.0 <= eps <= F32_MAX:
        eps = require_eps(eps)
    if enable_pdl is not None and enable_pdl is not True and enable_pdl is not False:
        enable_pdl = require_pdl(enable_pdl)
    quant = scale is not None
    scale_value, scale_tensor = _scale_arguments(scale) if quant else (1.0, None)
    if compiling():  # torch.compile traces this: one cutefi op in the graph (see _library)
        return _record_op(kind, input, weight, bias, out, residual, eps, gemma, enable_pdl, quant, scale_tensor,
                          scale_value, silu)
    try:  # what a plan depends on (signature() inlined: this runs on every call)
        x_ptr, w_ptr, o_ptr = input.data_ptr(), weight.data_ptr(), out.data_ptr()
        b_ptr = bias.data_ptr() if bias is not None else w_ptr
        r_ptr = residual.data_ptr() if residual is not None else x_ptr
        pointers = POINTERS_ALIGNED if not (x_ptr | w_ptr | b_ptr | o_ptr | r_ptr) & 15 else \
            pointer_mode(x_ptr, w_ptr, b_ptr, o_ptr, r_ptr, out.element_size())
        key = (kind, gemma, quant, input.dtype, input.shape, input.stride(), input.get_device(),
               weight.dtype, weight.shape, weight.stride(), weight.get_device(),
               None if out is input else (out.dtype, out.shape, out.stride(), out.get_device()),
               None if residual is None else (residual.dtype, residual.shape, residual.stride(),
                                              residual.get_device()),
               None if bias is None else signature(bias), pointers, silu)
    except AttributeError:  # not tensors: the full check below names the argument
        key, pointers = None, POINTERS_STAGED
    plan = _PLANS.get(key)
    if plan is None:
        plan = _PLANS.put(key, check_and_plan(kind, input, weight, bias, out, residual, gemma, weight_name, quant,
                                              pointers, silu))
    if plan.kernel is None:  # (off the hot path: a plan with a kernel never branches here)
        if plan.staged:
            _run_staged(kind, input, weight, bias, out, residual, eps, gemma, enable_pdl, weight_name, scale, silu)
        elif plan.widen_params:  # LayerNorm's other 16-bit gamma/beta, as fp32 copies made on the stream
            launch_norm(kind, input, weight.float(), bias.float(), out, residual, eps, gemma, enable_pdl, weight_name,
                        scale)
        return
    if scale_tensor is not None and scale_tensor.get_device() != plan.device:
        scale_tensor = scale_tensor.to(f"cuda:{plan.device}")  # (another GPU's: copied over, as FlashInfer does)
    s_ptr = scale_tensor.data_ptr() if scale_tensor is not None else w_ptr
    shift = 0
    if plan.shifted:  # pointers rounded down to 16 bytes; the kernel adds the shift back
        shift = (x_ptr >> 1) & 7
        x_ptr, r_ptr, o_ptr = x_ptr - 2 * shift, r_ptr - 2 * shift, o_ptr - out.element_size() * shift
    x_stride, x_head, out_stride, out_head, res_stride, res_head = plan.strides
    plan.kernel.launch(plan.grid, plan.device, None, True if enable_pdl is None else bool(enable_pdl),
                       x=x_ptr, weight=w_ptr, bias=b_ptr, out=o_ptr, residual=r_ptr, scale=s_ptr,
                       M=plan.rows, N=plan.n, heads=plan.heads, shift=shift, row_iters=plan.row_iters,
                       x_row_stride=x_stride, x_head_stride=x_head, out_row_stride=out_stride,
                       out_head_stride=out_head, residual_row_stride=res_stride,
                       residual_head_stride=res_head, eps=eps, scale_value=scale_value)


def _run_staged(kind: str, input: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None,
                out: torch.Tensor, residual: torch.Tensor | None, eps: float, gemma: bool,
                enable_pdl: bool | None, weight_name: str, scale: float | torch.Tensor | None,
                silu: bool = False) -> None:
    """A call whose rows sit unlike in their 16-byte chunks (e.g. an odd hidden size with out at
    another offset than input): the same op on fresh, aligned copies, results copied back."""
    def fresh(tensor: torch.Tensor) -> torch.Tensor:
        return torch.empty(tensor.shape, dtype=tensor.dtype, device=tensor.device).copy_(tensor)

    x = fresh(input)
    r = fresh(residual) if residual is not None else None
    y = x if out is input else torch.empty(out.shape, dtype=out.dtype, device=out.device)
    w = weight if not weight.data_ptr() % 16 else weight.clone()
    b = bias if bias is None or not bias.data_ptr() % 16 else bias.clone()
    launch_norm(kind, x, w, b, y, r, eps, gemma, enable_pdl, weight_name, scale, silu)
    out.copy_(y)
    if residual is not None:
        residual.copy_(r)


def _scale_arguments(scale: float | torch.Tensor) -> tuple[float, torch.Tensor | None]:
    """(scale_value, scale_tensor): a float scale goes to the kernel as a value, a CUDA tensor
    by pointer (read on the device, so CUDA graphs see its updates; scale_value 0 says so). A
    tensor of any real dtype is taken as float32, as FlashInfer converts it (an integer or
    half-precision tensor through a float32 copy made on the stream, so a graph sees updates)."""
    if isinstance(scale, torch.Tensor):
        if scale.numel() != 1:
            raise ValueError(f"scale must be a float or a tensor of one element; got shape {tuple(scale.shape)}")
        if scale.is_complex():
            raise TypeError(f"scale tensor must be real; got {str(scale.dtype)[6:]}")
        if not scale.is_cuda:  # a host value: no device memory needed
            return _scale_arguments(float(scale.item()))
        return 0.0, scale if scale.dtype == torch.float32 else scale.float()
    value = require_real("scale", scale)
    if not 1.0 / F32_MAX <= abs(value) <= F32_MAX:  # its float32 reciprocal must be finite too
        raise ValueError(f"scale must be a nonzero finite float32 with a finite reciprocal (the output is "
                         f"divided by it); got {scale!r}")
    return value, None


# ---- public API -------------------------------------------------------------------------
# enable_pdl (FlashInfer's meaning): None = on where the GPU has programmatic dependent
# launch (sm_90+); the kernel waits for its inputs, so PDL never reads stale data.
def _output(input: torch.Tensor, out: torch.Tensor | None) -> torch.Tensor:
    return torch.empty_like(require_tensor("input", input)) if out is None else out


@api_log
def rmsnorm(input: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6,
            out: torch.Tensor | None = None, enable_pdl: bool | None = None) -> torch.Tensor:
    """``out = input / sqrt(mean(input**2, -1) + eps) * weight``.

    input: ``[rows, hidden]`` or ``[tokens, heads, head_dim]`` (per-head, qk-norm; any token
    and head strides), fp16 or bf16, last dimension contiguous; any hidden size from 1 (full
    speed where rows and pointers are 16-byte aligned; above 32768 a CTA a row, x read twice).
    weight: ``[hidden]``, same dtype.
    fp32 accumulation. ``out`` may be ``input`` (in place). ``enable_pdl``: programmatic
    dependent launch (None: where available).
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


def _require_2d(input: object) -> None:
    if require_tensor("input", input).dim() != 2:
        raise ValueError(f"input must be 2-D [rows, hidden]; got shape {tuple(input.shape)}")


@api_log
def layernorm(input: torch.Tensor, gemma: torch.Tensor, beta: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """``(input - mean) / sqrt(var + eps) * gemma + beta`` over the last dimension.

    input: ``[rows, hidden]`` fp16 or bf16, last dimension contiguous, any hidden size from 1.
    gemma (gamma, FlashInfer's name) and beta: ``[hidden]``, fp32, or bf16/fp16 as FlashInfer's
    CuTe LayerNorm takes them (both in the input's dtype: read as they are; other mixes, and
    hidden sizes above 32768: widened to fp32 copies on the stream each call, two small copies).
    Returns a new tensor with the input's dtype and shape.
    """
    _require_2d(input)
    out = torch.empty_like(input, memory_format=torch.contiguous_format)
    launch_norm("layer", input, gemma, require_tensor("beta", beta), out, None, eps, False, False,
                weight_name="gamma")
    return out


# ---- FP8-quantising variants: out (float8_e4m3fn or float8_e5m2) = fp8(clamp(y / scale)) ---
# FlashInfer's semantics: y times 1/scale, saturated to the format's largest finite value
# (448 or 57344; a NaN saturates to +max, as FlashInfer's fminf/fmaxf do), rounded to nearest
# even. scale: a nonzero float, or a one-element tensor (read on the device: CUDA-graph safe).
@api_log
def rmsnorm_quant(out: torch.Tensor, input: torch.Tensor, weight: torch.Tensor, scale: float | torch.Tensor,
                  eps: float = 1e-6, enable_pdl: bool | None = None) -> None:
    """:func:`rmsnorm` of ``input`` written to the FP8 tensor ``out`` (its dtype picks the format)."""
    launch_norm("rms", input, weight, None, require_tensor("out", out), None, eps, False, enable_pdl,
                scale=_require_scale(scale))


@api_log
def fused_add_rmsnorm_quant(out: torch.Tensor, input: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor,
                            scale: float | torch.Tensor, eps: float = 1e-6, enable_pdl: bool | None = None) -> None:
    """``residual = input + residual`` (in place, as :func:`fused_add_rmsnorm`); the RMSNorm of
    the fp32 sum written to the FP8 tensor ``out``. ``input`` is not written."""
    launch_norm("rms", input, weight, None, require_tensor("out", out), require_tensor("residual", residual), eps,
                False, enable_pdl, scale=_require_scale(scale))


@api_log
def layernorm_quant(out: torch.Tensor, input: torch.Tensor, gemma: torch.Tensor, beta: torch.Tensor,
                    scale: float | torch.Tensor, eps: float = 1e-6) -> None:
    """:func:`layernorm` of ``input`` written to the FP8 tensor ``out``."""
    _require_2d(input)
    launch_norm("layer", input, gemma, require_tensor("beta", beta), require_tensor("out", out), None, eps, False,
                False, weight_name="gamma", scale=_require_scale(scale))


# ---- RMSNorm + SiLU (FlashInfer's fused_rmsnorm_silu): out = silu(rmsnorm(input)) -----------
_SILU_OUT_DTYPES = (torch.bfloat16, torch.float8_e4m3fn)


@api_log
def fused_rmsnorm_silu(input: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6,
                       out: torch.Tensor | None = None, block_scale: torch.Tensor | None = None) -> torch.Tensor:
    """``out = silu(input / sqrt(mean(input**2, -1) + eps) * weight)``, ``silu(y) = y * sigmoid(y)``,
    in fp32 and rounded once.

    input: bf16 ``[rows, hidden]`` (or ``[tokens, heads, head_dim]`` with any token and head
    strides), last dimension contiguous, any hidden size from 1; weight: bf16 ``[hidden]``.
    ``out`` (default: a new bf16 tensor like ``input``) picks the output: bf16, or
    ``float8_e4m3fn`` (saturated to +-448 and rounded to nearest even, no scale), as FlashInfer
    takes them. FlashInfer's NVFP4 output (``float4_e2m1fn_x2`` with ``block_scale``, Blackwell)
    is not built: refused; ``block_scale`` is ignored for bf16 and FP8 outputs, as FlashInfer
    ignores it. Returns ``out``.
    """
    if require_tensor("input", input).dtype != torch.bfloat16:
        require_dtype("input", input, (torch.bfloat16,))
    out = torch.empty_like(input) if out is None else require_tensor("out", out)
    if out.dtype not in _SILU_OUT_DTYPES:
        if str(out.dtype) in ("torch.float4_e2m1fn_x2", "torch.uint8"):
            raise NotImplementedError(f"out dtype {str(out.dtype)[6:]} (FlashInfer's NVFP4 output with block_scale, "
                                      f"for Blackwell) is not built in cutefi; pass a bfloat16 or float8_e4m3fn out")
        raise TypeError(f"out dtype must be bfloat16 or float8_e4m3fn; got {str(out.dtype)[6:]}")
    quant = out.dtype == torch.float8_e4m3fn
    launch_norm("rms", input, weight, None, out, None, eps, False, None, scale=1.0 if quant else None, silu=True)
    return out


def _require_scale(scale: object) -> float | torch.Tensor:
    if scale is None:
        raise TypeError("scale must be a float or a one-element tensor; got None")
    return scale  # type: ignore[return-value]


# ---- torch.compile: the ops Dynamo records (one per mutation pattern) ---------------------
def _no_output(*args: object) -> None:
    return None


def _scale(tensor: torch.Tensor | None, value: float) -> float | torch.Tensor:
    return tensor if tensor is not None else value


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
    ("rmsnorm_quant(Tensor(a!) out, Tensor input, Tensor weight, Tensor? scale, float scale_value, float eps, "
     "bool? enable_pdl) -> ()",
     lambda out, input, weight, scale, value, eps, pdl: launch_norm("rms", input, weight, None, out, None, eps, False,
                                                                    pdl, scale=_scale(scale, value))),
    ("fused_add_rmsnorm_quant(Tensor(a!) out, Tensor input, Tensor(b!) residual, Tensor weight, Tensor? scale, "
     "float scale_value, float eps, bool? enable_pdl) -> ()",
     lambda out, input, residual, weight, scale, value, eps, pdl: launch_norm(
         "rms", input, weight, None, out, residual, eps, False, pdl, scale=_scale(scale, value))),
    ("rmsnorm_silu(Tensor(a!) out, Tensor input, Tensor weight, float eps, bool? enable_pdl) -> ()",
     lambda out, input, weight, eps, pdl: launch_norm("rms", input, weight, None, out, None, eps, False, pdl,
                                                      scale=1.0 if out.dtype != input.dtype else None, silu=True)),
    ("layernorm_quant(Tensor(a!) out, Tensor input, Tensor gemma, Tensor beta, Tensor? scale, float scale_value, "
     "float eps) -> ()",
     lambda out, input, gamma, beta, scale, value, eps: launch_norm(
         "layer", input, gamma, beta, out, None, eps, False, False, weight_name="gamma", scale=_scale(scale, value))),
]
_OPS = {schema.split("(", 1)[0]: define(schema, impl, _no_output) for schema, impl in _define_ops}


def _record_op(kind: str, input: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None,
               out: torch.Tensor, residual: torch.Tensor | None, eps: float, gemma: bool,
               enable_pdl: bool | None, quant: bool, scale: torch.Tensor | None, scale_value: float,
               silu: bool = False) -> None:
    if silu:
        _OPS["rmsnorm_silu"](out, input, weight, eps, enable_pdl)
    elif kind == "layer":
        if quant:
            _OPS["layernorm_quant"](out, input, weight, bias, scale, scale_value, eps)
        else:
            _OPS["layernorm_out"](out, input, weight, bias, eps)
    elif quant and residual is not None:
        _OPS["fused_add_rmsnorm_quant"](out, input, residual, weight, scale, scale_value, eps, enable_pdl)
    elif quant:
        _OPS["rmsnorm_quant"](out, input, weight, scale, scale_value, eps, enable_pdl)
    elif residual is not None:
        _OPS["fused_add_rmsnorm"](input, residual, weight, eps, gemma, enable_pdl)
    elif out is input:
        _OPS["rmsnorm_inplace"](input, weight, eps, gemma, enable_pdl)
    else:
        _OPS["rmsnorm_out"](out, input, weight, eps, gemma, enable_pdl)


for _public in (rmsnorm, fused_add_rmsnorm, gemma_rmsnorm, gemma_fused_add_rmsnorm, layernorm):
    declare(_public, (Family.SIMT,), launch.SUPPORTED_DTYPES)
for _public in (rmsnorm_quant, fused_add_rmsnorm_quant, layernorm_quant):
    declare(_public, (Family.SIMT,), launch.SUPPORTED_DTYPES)
declare(fused_rmsnorm_silu, (Family.SIMT,), launch.SILU_DTYPES)
