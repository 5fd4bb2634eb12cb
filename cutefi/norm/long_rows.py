"""Contract and specs of the long-row norm kernel (``long_rows_kernel.py``): hidden sizes above
the largest class of the row-norm builds (``launch.SUPPORTED_N_CLASSES``, 32768), which no
longer fit a CTA's registers. Pure Python, no cutlass import.

One CTA a row walks the row twice: a pass for the statistics (RMSNorm's sum of squares,
LayerNorm's moments), then a pass that reads x (and the fused add's residual) again, mostly
from L2, and writes the output. Two builds a specialisation: ``aligned`` (128-bit accesses:
the hidden size, every stride and every pointer 8-element aligned) and the other (an element
an access: any hidden size, stride and pointer). Every norm variant of the row-norm builds has
both: RMSNorm (plain, gemma weight, fused add) and LayerNorm, and their FP8 outputs.

Parameters: the row-norm contract's names (``launch.norm_params``, so ``api.launch_norm``
serves both kernels); the element-access build declares its pointers an element aligned. The
kernel reads x, weight, bias, out, residual, scale, M, N, heads, the strides, eps and
scale_value; ``shift`` and ``row_iters`` are unused (0 and 1).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..jit.contract import LaunchContract, Param
from ..jit.policy import Family
from ..jit.registry import register
from ..jit.spec import KernelSpec
from . import launch

# hidden sizes from MIN_N up take these builds (the row-norm builds take the rest)
MIN_N = max(launch.SUPPORTED_N_CLASSES) + 1
MAX_N = 2**31 - 1
# a CTA of 512 threads a row, 2 CTAs an SM (64 registers): each thread's loop over its chunks
# is unrolled UNROLL deep, so that many accesses of each tensor are in flight
BLOCK_THREADS = 512
CTAS_PER_SM = 2
UNROLL = 4


@dataclass(frozen=True)
class LongGeometry:
    aligned: bool

    @property
    def vec(self) -> int:
        """Elements an access: 8 (128 bits of a 16-bit dtype) on aligned rows, else 1."""
        return launch.vec_elems("bf16") if self.aligned else 1

    @property
    def warps(self) -> int:
        return BLOCK_THREADS // 32


def _params(dtype_name: str, param_dtype: str, out_name: str, aligned: bool) -> tuple[Param, ...]:
    """``launch.norm_params``, pointers an element aligned on the element-access build and at most
    16 bytes on the other: the plan checks 16 (fp32 gamma and beta declared 32, a chunk of 8,
    let sm_100a read them in 256-bit loads, which fault on a 16-byte aligned view)."""
    params = launch.norm_params(dtype_name, param_dtype, out_name, element_aligned=not aligned)
    return tuple(replace(p, align=min(p.align, 16)) if p.kind == "ptr" else p for p in params)


def entry_name(norm: str, dtype_name: str, fused_add: bool, gemma: bool, aligned: bool,
               out_dtype: str | None, silu: bool = False) -> str:
    return (f"cutefi_{norm}norm_{dtype_name}_long" + ("_add" if fused_add else "") + ("_gemma" if gemma else "")
            + ("" if aligned else "_any") + (f"_to_{out_dtype}" if out_dtype else "") + ("_silu" if silu else ""))


def contract(norm: str, dtype_name: str, fused_add: bool = False, gemma: bool = False, aligned: bool = True,
             out_dtype: str | None = None, silu: bool = False) -> LaunchContract:
    launch.dtype_bits(dtype_name)
    param_dtype = "fp32" if norm == "layer" else dtype_name
    return LaunchContract(
        params=_params(dtype_name, param_dtype, out_dtype or dtype_name, aligned),
        block=(BLOCK_THREADS, 1, 1),
        grid=lambda p: (p["M"], 1, 1),  # a CTA a row
        sample={"M": 1000, "N": 65536, "heads": 1, "shift": 0, "row_iters": 1, "x_row_stride": 65536,
                "x_head_stride": 0, "out_row_stride": 65536, "out_head_stride": 0,
                "residual_row_stride": 65536, "residual_head_stride": 0, "eps": 1e-6, "scale_value": 1.0},
        min_ctas_per_sm=CTAS_PER_SM,
        entry=entry_name(norm, dtype_name, fused_add, gemma, aligned, out_dtype, silu),
        pdl=True,
    )


def make_spec(norm: str, dtype_name: str, fused_add: bool = False, gemma: bool = False, aligned: bool = True,
              out_dtype: str | None = None, silu: bool = False) -> KernelSpec:
    extra = ({} if aligned else {"aligned": False}) | ({"out_dtype": out_dtype} if out_dtype else {})
    extra |= {"silu": True} if silu else {}
    return KernelSpec.make(
        f"norm.{norm}norm" + ("_silu" if silu else "") + "_long", "cute", "cutefi.norm.long_rows_kernel:LongRowNormKernel",
        "cutefi.norm.long_rows:contract", Family.SIMT, norm=norm, dtype_name=dtype_name, fused_add=fused_add,
        gemma=gemma, **extra,
    )


def _variants():
    """(norm, dtype, fused_add, gemma, aligned, out_dtype) of every build: the row-norm builds'
    variants (``launch._variants``) without their classes."""
    for dtype in launch.SUPPORTED_DTYPES:
        for aligned in (True, False):
            for fused in (False, True):
                for gemma in (False, True):
                    yield ("rms", dtype, fused, gemma, aligned, None)
                for out_dtype in launch.QUANT_DTYPES:
                    yield ("rms", dtype, fused, False, aligned, out_dtype)
            for out_dtype in (None, *launch.QUANT_DTYPES):
                yield ("layer", dtype, False, False, aligned, out_dtype)


# keyed (norm, dtype, fused_add, gemma, aligned, out_dtype), as the plan looks them up
LONG_SPECS = {key: make_spec(*key) for key in _variants()}
# RMSNorm + SiLU (launch.SILU_SPECS' long-row twins), keyed as LONG_SPECS
LONG_SILU_SPECS = {key: make_spec(*key, silu=True) for key in LONG_SPECS
                   if key[0] == "rms" and key[1] in launch.SILU_DTYPES and not key[2] and not key[3]
                   and key[5] in launch.SILU_OUT_DTYPES}
register(*LONG_SPECS.values(), *LONG_SILU_SPECS.values())
