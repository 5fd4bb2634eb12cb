"""Contract, geometry and specs of the warp-a-row RMSNorm kernel (``warp_rows_kernel.py``).
Pure Python, no cutlass import.

The build serves RMSNorm rows that start off 16-byte boundaries (any hidden size of its class,
any row and head strides; x and out rows alike in their chunks, as the shifted builds): one
warp normalises a row at a time, its CTAs persistent. A row's aligned span (``chunks`` 8-element
chunks: the row and the up to 7 elements before it in its first chunk) is staged in the warp's
slot of a shared-memory ring with cp.async, read there twice (sum of squares, then output),
and each chunk's slot takes the warp's next row's chunk as soon as its second read is done;
the row's sum is a warp's shuffles (no barrier). The weight sits in shared memory as fp32
(1 added for Gemma), a pad word after every 8 (so the 32 lanes' reads of the k-th weight of
their chunks, 8 columns apart, fall in 32 different banks), and whatever column a chunk of the
row starts at, its 8 weights are 8 conflict-free 32-bit reads and no conversion.

Parameters: the row-norm contract's (``launch.norm_params``), so one launch call serves every
norm build; the kernel reads all but bias and residual (a fused add has no build here).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..jit.contract import LaunchContract, ceil_div
from ..jit.policy import Family
from ..jit.registry import register
from ..jit.spec import KernelSpec
from . import launch

VEC = 8  # elements a chunk (128 bits of a 16-bit dtype)
PAD = 8  # elements before the weight's copy: a row's first chunk reads up to 7 columns before column 0
# The least dynamic shared memory a CTA may opt in to on a supported target (sm_86/89/120: 99 KB).
MAX_DYNAMIC_SMEM = 99 * 1024
SMEM_PER_SM = 228 * 1024  # an H100/H200 SM's (the geometry's CTAs an SM: what fits)
# Warps a CTA at most: a lane holds its 16 chunks of the row (64 registers) through the output
# pass, so the next row's loads can be in flight meanwhile; 2 CTAs of 8 warps an SM leave it
# 128 registers (10 warps, 102, spilled).
MAX_WARPS = 8
# (kind, quant) -> classes built. Measured on the H200 against the shifted builds: see tuning.
CLASSES = {("rms", False): (4096,), ("rms", True): (4096,)}


def physical(element: int) -> int:
    """Where element ``element`` of the weight's copy sits: a pad word after every 8."""
    return element + (element >> 3)


@dataclass(frozen=True)
class WarpRowsGeometry:
    n_class: int
    elem_bytes: int  # of x and the weight

    @property
    def chunks(self) -> int:
        """Chunks of a row's aligned span: a row of ``n_class`` starting 7 elements into its
        first chunk ends in chunk ``n_class / 8``."""
        return self.n_class // VEC + 1

    @property
    def copy_elems(self) -> int:
        """Elements of the weight's fp32 copy: ``PAD`` before column 0, the class and a chunk after."""
        return PAD + self.n_class + VEC

    @property
    def params_bytes(self) -> int:
        """The copy's bytes (a pad word after every 8 elements: ``physical``), up to 128 bytes:
        a quarter warp's 128-bit accesses of a slot after it are one 128-byte line (unaligned
        slots took twice the shared-memory wavefronts, ncu)."""
        return -(-4 * physical(self.copy_elems) // 128) * 128

    @property
    def slot_bytes(self) -> int:
        """A warp's slot: the row's span, up to 128 bytes (see ``params_bytes``)."""
        return -(-self.chunks * VEC * self.elem_bytes // 128) * 128

    @property
    def warps(self) -> int:
        """Warps a CTA (a row in flight each): as many slots as fit beside the copies, at most
        ``MAX_WARPS``."""
        return min(MAX_WARPS, (MAX_DYNAMIC_SMEM - self.params_bytes) // self.slot_bytes)

    @property
    def block_threads(self) -> int:
        return 32 * self.warps

    @property
    def smem_bytes(self) -> int:
        return self.params_bytes + self.warps * self.slot_bytes

    @property
    def min_ctas_per_sm(self) -> int:
        return max(1, SMEM_PER_SM // (self.smem_bytes + 1024))


def geometry(dtype_name: str, n_class: int) -> WarpRowsGeometry:
    if not any(n_class in classes for classes in CLASSES.values()):
        raise ValueError(f"no warp-rows build for n_class {n_class}")
    return WarpRowsGeometry(n_class, launch.dtype_bits(dtype_name) // 8)


def rows_per_warp(rows: int, n_class: int, sms: int, dtype_name: str = "bf16") -> int:
    """Rows a warp normalises (the kernel's ``row_iters``): about one wave of resident CTAs."""
    shape = geometry(dtype_name, n_class)
    return max(1, ceil_div(rows, sms * shape.min_ctas_per_sm * shape.warps))


def pick_n_class(n: int, kind: str, quant: bool) -> int | None:
    """The class of a hidden size with a warp-rows build, or None."""
    n_class = launch.pick_n_class(n)
    return n_class if n_class in CLASSES.get((kind, quant), ()) and n > n_class // 2 else None


def entry_name(dtype_name: str, n_class: int, gemma: bool, out_dtype: str | None) -> str:
    return (f"cutefi_rmsnorm_{dtype_name}_n{n_class}" + ("_gemma" if gemma else "") + "_warp_rows"
            + (f"_to_{out_dtype}" if out_dtype else ""))


def contract(dtype_name: str, n_class: int, gemma: bool, out_dtype: str | None = None) -> LaunchContract:
    shape = geometry(dtype_name, n_class)
    warps = shape.warps
    return LaunchContract(
        params=launch.norm_params(dtype_name, dtype_name, out_dtype or dtype_name),
        block=(shape.block_threads, 1, 1),
        grid=lambda p: (ceil_div(p["M"], warps * p["row_iters"]), 1, 1),
        sample={"M": 1000, "N": n_class - 1, "heads": 1, "shift": 0, "row_iters": 1,
                "x_row_stride": n_class - 1, "x_head_stride": 0, "out_row_stride": n_class - 1,
                "out_head_stride": 0, "residual_row_stride": n_class - 1, "residual_head_stride": 0,
                "eps": 1e-6, "scale_value": 1.0},
        min_ctas_per_sm=shape.min_ctas_per_sm,
        smem_bytes=shape.smem_bytes,
        entry=entry_name(dtype_name, n_class, gemma, out_dtype),
        pdl=True,
    )


def make_spec(dtype_name: str, n_class: int, gemma: bool = False, out_dtype: str | None = None) -> KernelSpec:
    extra = {"out_dtype": out_dtype} if out_dtype else {}
    return KernelSpec.make(
        "norm.rmsnorm_warp_rows", "cute", "cutefi.norm.warp_rows_kernel:WarpRowsNormKernel",
        "cutefi.norm.warp_rows:contract", Family.SIMT, dtype_name=dtype_name, n_class=n_class, gemma=gemma,
        **extra,
    )


def _variants():
    for dtype in launch.SUPPORTED_DTYPES:
        for (kind, quant), classes in CLASSES.items():
            for n_class in classes:
                for gemma, out_dtype in ([(False, fmt) for fmt in launch.QUANT_DTYPES] if quant
                                         else [(False, None), (True, None)]):
                    yield kind, dtype, n_class, gemma, out_dtype


# keyed (kind, dtype, n_class, gemma, out_dtype), as the plan looks them up
WARP_ROWS_SPECS = {key: make_spec(*key[1:]) for key in _variants()}
register(*WARP_ROWS_SPECS.values())
