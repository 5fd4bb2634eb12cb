"""Contract, geometry and specs of the packed-rows RMSNorm kernel (``packed_kernel.py``).
Pure Python, no cutlass import.

The build serves contiguous ``[rows, n]`` tensors whose hidden size is not a multiple of 8
(rows start off 16-byte boundaries): it normalises blocks of ``ROWS_PER_BLOCK`` consecutive
rows, which together span ``8 n`` elements and so start and end on 16-byte boundaries. A CTA
of ``n_class / CHUNKS`` threads owns a block's ``n`` aligned 8-element chunks, ``CHUNKS`` a
thread, and walks blocks ``grid`` apart (``row_iters`` of them). Its shared memory holds
``COPIES`` shifted copies of the weight (one aligned 128-bit read a chunk whatever column the
chunk starts at), one fp32 partial sum a chunk, and the rows' boundary partials and factors.

Parameters: the row-norm contract's (``launch.norm_params``), so one launch call serves every
norm build; the packed kernel reads x, weight, out, scale, M, N, row_iters, eps and
scale_value (rows are ``N`` apart by construction).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..jit.contract import LaunchContract, ceil_div
from ..jit.policy import Family
from ..jit.registry import register
from ..jit.spec import KernelSpec
from . import launch

ROWS_PER_BLOCK = 8  # 8 n elements: a multiple of 8 whatever n is
CHUNKS = 8  # 8-element chunks a thread owns in a block (64 elements, as the aligned builds)
COPIES = 8  # shifted copies of the weight: one per start of a chunk's first column in its chunk
# classes built (n from 257 to 4096): the CTA is n_class / CHUNKS threads
N_CLASSES = (1024, 2048, 4096)
MIN_N = 257
# resident threads an SM the builds ask for: 64 registers a thread
THREADS_PER_SM = 1024


@dataclass(frozen=True)
class PackedGeometry:
    n_class: int
    elem_bytes: int  # of x and the weight

    @property
    def block_threads(self) -> int:
        return self.n_class // CHUNKS

    @property
    def copy_elems(self) -> int:
        """Elements of one shifted weight copy: a chunk at column n - 1 reads up to n + 6."""
        return self.n_class + 8

    @property
    def partials_offset(self) -> int:
        """Byte offset of the fp32 chunk partials (after the weight copies)."""
        return COPIES * self.copy_elems * self.elem_bytes

    @property
    def boundary_offset(self) -> int:
        """Byte offset of the 16 fp32 words after the partials: the boundary chunks' parts
        that fall into row 1..7 (words 0-7), then the rows' factors (words 8-16, the last one
        a pad that a last row's boundary-free chunks may read)."""
        return self.partials_offset + 4 * self.n_class

    @property
    def smem_bytes(self) -> int:
        return self.boundary_offset + 4 * (2 * ROWS_PER_BLOCK + 1)

    @property
    def min_ctas_per_sm(self) -> int:
        return max(1, min(THREADS_PER_SM // self.block_threads, launch.SMEM_PER_SM // (self.smem_bytes + 1024)))


def geometry(dtype_name: str, n_class: int) -> PackedGeometry:
    if n_class not in N_CLASSES:
        raise ValueError(f"unsupported packed n_class {n_class}; expected one of {N_CLASSES}")
    return PackedGeometry(n_class, launch.dtype_bits(dtype_name) // 8)


def blocks_per_cta(rows: int, n_class: int, sms: int, dtype_name: str = "bf16") -> int:
    """Blocks a CTA normalises (the kernel's ``row_iters``): about one wave of resident CTAs."""
    blocks = ceil_div(rows, ROWS_PER_BLOCK)
    return max(1, ceil_div(blocks, sms * geometry(dtype_name, n_class).min_ctas_per_sm))


def pick_n_class(n: int) -> int | None:
    """The packed class for a hidden size, or None where no packed build covers it."""
    if n < MIN_N:
        return None
    return next((c for c in N_CLASSES if n <= c), None)


def entry_name(dtype_name: str, n_class: int, gemma: bool, out_dtype: str | None) -> str:
    return (f"cutefi_rmsnorm_{dtype_name}_n{n_class}" + ("_gemma" if gemma else "") + "_packed"
            + (f"_to_{out_dtype}" if out_dtype else ""))


def contract(dtype_name: str, n_class: int, gemma: bool, out_dtype: str | None = None) -> LaunchContract:
    shape = geometry(dtype_name, n_class)
    rows_per_cta = ROWS_PER_BLOCK
    return LaunchContract(
        params=launch.norm_params(dtype_name, dtype_name, out_dtype or dtype_name),
        block=(shape.block_threads, 1, 1),
        grid=lambda p: (ceil_div(p["M"], rows_per_cta * p["row_iters"]), 1, 1),
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
        "norm.rmsnorm_packed", "cute", "cutefi.norm.packed_kernel:PackedRowNormKernel",
        "cutefi.norm.packed:contract", Family.SIMT, dtype_name=dtype_name, n_class=n_class, gemma=gemma, **extra,
    )


def _variants():
    for dtype in launch.SUPPORTED_DTYPES:
        for n_class in N_CLASSES:
            for gemma in (False, True):
                yield dtype, n_class, gemma, None
            for out_dtype in launch.QUANT_DTYPES:
                yield dtype, n_class, False, out_dtype


PACKED_SPECS = {key: make_spec(*key) for key in _variants()}
register(*PACKED_SPECS.values())
