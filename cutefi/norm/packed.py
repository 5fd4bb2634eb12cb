"""Contract, geometry and specs of the packed-rows RMSNorm kernel (``packed_kernel.py``).
Pure Python, no cutlass import.

The build serves contiguous ``[rows, n]`` tensors whose hidden size is not a multiple of 8
(rows start off 16-byte boundaries): it normalises blocks of ``ROWS_PER_BLOCK`` consecutive
rows, which together span ``8 n`` elements and so start and end on 16-byte boundaries. A CTA
of ``n_class / CHUNKS`` threads owns a block's ``n`` aligned 8-element chunks, ``CHUNKS`` a
thread, and walks blocks ``grid`` apart (``row_iters`` of them). Its shared memory holds
``COPIES`` shifted copies of the weight (one aligned 128-bit read a chunk whatever column the
chunk starts at), one fp32 partial sum a chunk, the rows' boundary partials and factors, and
each chunk's place in its rows (the same every block).

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
# classes (n from 257 to 4096): the CTA is n_class / CHUNKS threads
N_CLASSES = (1024, 2048, 4096)
MIN_N = 257
# The builds made, (norm, quant) -> classes: where they beat the shifted one-row builds on the
# H200 (benchmarks/results/norm_packed_vs_shifted_h200.json, bf16, the same calls, 16384 and
# 65536 rows): RMSNorm 1023 2850/3431 GB/s against 2458/2675 (2047: 2897/3173 against
# 3140/3418, 4095: 3374/3587 against 3419/3523, so those keep the shifted build); FP8
# RMSNorm 1023/2047/4095 2478/2517/2828 against 1635/2011/2096 at 16384 rows; LayerNorm
# 1023/2047 1893/2052 against 1741/1841 and FP8 1351/1560 against 821/1134, but 4095 at one
# CTA an SM (its 128 registers) 1911 against 2596 (FP8 1449 against 1568). FP8 RMSNorm 4095
# left it in session 21: the shifted build (4 chunks a thread, 768 threads an SM) ran 3093
# against 2785 GB/s at 16384 rows, +6% at 65536 (tune_norm_h200_session21_r15.json).
# LayerNorm left it in session 25: its persistent shifted build with gamma and beta in
# registers ran 1023/2047 2363/2636 GB/s against 1861/2064 at 16384 rows, FP8 1664/1887
# against 1381/1604 (tune_norm_h200_session25_r16.json, _r17.json). FP8 RMSNorm 2047 left it
# in session 26: the shifted build looping over rows with the next in flight (launch.
# _RMS_SHIFTED_PREFETCH) ran 3135/3485 against 2502/2875 GB/s at 16384/65536 rows
# (tune_norm_h200_session26_r24.json).
CLASSES = {("rms", False): (1024,), ("rms", True): (1024,)}
# resident threads an SM the builds ask for: 64 registers a thread
THREADS_PER_SM = 1024
MAX_DYNAMIC_SMEM = 99 * 1024  # the least shared memory a CTA may opt in to on a supported target
# Shared memory of an SM on the GPU the tables were tuned on (H100/H200: 228 KB); a CTA costs
# its dynamic shared memory plus the 1 KB the driver reserves.
SMEM_PER_SM = 228 * 1024


@dataclass(frozen=True)
class PackedGeometry:
    n_class: int
    elem_bytes: int  # of x (and of the weight)

    @property
    def block_threads(self) -> int:
        return self.n_class // CHUNKS

    @property
    def copies(self) -> int:
        """Shifted copies of the weight: one a start of a chunk's first column within an
        aligned 128-bit read."""
        return COPIES

    @property
    def copy_elems(self) -> int:
        """Elements of one shifted copy: a chunk at column n - 1 reads up to n + 6."""
        return self.n_class + 8

    @property
    def partials_offset(self) -> int:
        """Byte offset of the fp32 chunk partials (after the weight's copies)."""
        return self.copies * self.copy_elems * self.elem_bytes

    @property
    def boundary_offset(self) -> int:
        """Byte offset of the ``WORDS`` fp32 words after the partials: the boundary chunks'
        parts that fall into rows 1..7 (words 0-7) and the rows' factors (8-16), each list
        with a pad word a last row's chunks may read."""
        return self.partials_offset + 4 * self.n_class

    @property
    def plan_offset(self) -> int:
        """Byte offset of the chunk plan: one int32 a chunk of a thread (after the words)."""
        return self.boundary_offset + 16 * -(-4 * WORDS // 16)

    @property
    def smem_bytes(self) -> int:
        return self.plan_offset + 4 * self.block_threads * CHUNKS

    @property
    def min_ctas_per_sm(self) -> int:
        return max(1, min(THREADS_PER_SM // self.block_threads, SMEM_PER_SM // (self.smem_bytes + 1024)))


WORDS = 2 * ROWS_PER_BLOCK + 1


def geometry(dtype_name: str, n_class: int) -> PackedGeometry:
    if n_class not in N_CLASSES:
        raise ValueError(f"unsupported packed n_class {n_class}; expected one of {N_CLASSES}")
    return PackedGeometry(n_class, launch.dtype_bits(dtype_name) // 8)


def blocks_per_cta(rows: int, n_class: int, sms: int, dtype_name: str = "bf16") -> int:
    """Blocks a CTA normalises (the kernel's ``row_iters``): about one wave of resident CTAs."""
    blocks = ceil_div(rows, ROWS_PER_BLOCK)
    return max(1, ceil_div(blocks, sms * geometry(dtype_name, n_class).min_ctas_per_sm))


def pick_n_class(n: int, norm: str = "rms", quant: bool = False) -> int | None:
    """The packed class for a hidden size, or None where no packed build covers it (LayerNorm,
    or the shifted one-row build measured faster)."""
    if n < MIN_N:
        return None
    n_class = next((c for c in N_CLASSES if n <= c), None)
    return n_class if n_class in CLASSES.get((norm, quant), ()) else None


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
        for (norm, quant), classes in CLASSES.items():
            for n_class in classes:
                for gemma, out_dtype in ([(False, fmt) for fmt in launch.QUANT_DTYPES] if quant
                                         else [(False, None), (True, None)]):
                    yield norm, dtype, n_class, gemma, out_dtype


# keyed (norm, dtype, n_class, gemma, out_dtype), as the plan looks them up
PACKED_SPECS = {key: make_spec(*key[1:]) for key in _variants()}
register(*PACKED_SPECS.values())
