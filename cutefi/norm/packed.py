"""Contract, geometry and specs of the packed-rows RMSNorm and LayerNorm kernel
(``packed_kernel.py``).
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
CLASSES = {("rms", False): (1024,), ("rms", True): (1024, 2048),
           ("layer", False): (1024, 2048), ("layer", True): (1024, 2048)}
# resident threads an SM the builds ask for: 64 registers a thread; LayerNorm (gamma, beta and
# the means on top) 128, where 64 spilled ~200 bytes a thread
THREADS_PER_SM = 1024
LAYER_THREADS_PER_SM = 512


@dataclass(frozen=True)
class PackedGeometry:
    n_class: int
    elem_bytes: int  # of x
    layer: bool = False  # LayerNorm: fp32 gamma and beta; else RMSNorm: one weight of x's dtype

    @property
    def block_threads(self) -> int:
        return self.n_class // CHUNKS

    @property
    def params(self) -> int:
        return 2 if self.layer else 1

    @property
    def param_bytes(self) -> int:
        return 4 if self.layer else self.elem_bytes

    @property
    def copies(self) -> int:
        """Shifted copies of each parameter: one a start of a chunk's first column within an
        aligned read (16-bit weights: 128-bit reads, 8 copies; fp32 gamma and beta: 64-bit
        reads, 2 copies, which keeps their shared memory that of the RMSNorm weight)."""
        return 2 if self.layer else COPIES

    @property
    def copy_elems(self) -> int:
        """Elements of one shifted copy: a chunk at column n - 1 reads up to n + 6."""
        return self.n_class + 8

    @property
    def partials_offset(self) -> int:
        """Byte offset of the fp32 chunk partials (after the parameter copies)."""
        return self.params * self.copies * self.copy_elems * self.param_bytes

    @property
    def boundary_offset(self) -> int:
        """Byte offset of the ``WORDS`` fp32 words after the partials: the boundary chunks'
        parts that fall into rows 1..7 (words 0-7), the rows' factors (8-16) and means
        (17-25; LayerNorm), each list with a pad word a last row's chunks may read."""
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
        threads = LAYER_THREADS_PER_SM if self.layer else THREADS_PER_SM
        return max(1, min(threads // self.block_threads, launch.SMEM_PER_SM // (self.smem_bytes + 1024)))


WORDS = 3 * ROWS_PER_BLOCK + 2


def geometry(dtype_name: str, n_class: int, norm: str = "rms") -> PackedGeometry:
    if n_class not in N_CLASSES:
        raise ValueError(f"unsupported packed n_class {n_class}; expected one of {N_CLASSES}")
    return PackedGeometry(n_class, launch.dtype_bits(dtype_name) // 8, norm == "layer")


def blocks_per_cta(rows: int, n_class: int, sms: int, dtype_name: str = "bf16", norm: str = "rms") -> int:
    """Blocks a CTA normalises (the kernel's ``row_iters``): about one wave of resident CTAs."""
    blocks = ceil_div(rows, ROWS_PER_BLOCK)
    return max(1, ceil_div(blocks, sms * geometry(dtype_name, n_class, norm).min_ctas_per_sm))


def pick_n_class(n: int, norm: str = "rms", quant: bool = False) -> int | None:
    """The packed class for a hidden size, or None where no packed build covers it (or the
    shifted one-row build measured faster)."""
    if n < MIN_N:
        return None
    n_class = next((c for c in N_CLASSES if n <= c), None)
    return n_class if n_class in CLASSES[(norm, quant)] else None


def entry_name(dtype_name: str, n_class: int, gemma: bool, out_dtype: str | None, norm: str = "rms") -> str:
    return (f"cutefi_{norm}norm_{dtype_name}_n{n_class}" + ("_gemma" if gemma else "") + "_packed"
            + (f"_to_{out_dtype}" if out_dtype else ""))


def contract(dtype_name: str, n_class: int, gemma: bool, out_dtype: str | None = None,
             norm: str = "rms") -> LaunchContract:
    shape = geometry(dtype_name, n_class, norm)
    rows_per_cta = ROWS_PER_BLOCK
    return LaunchContract(
        params=launch.norm_params(dtype_name, "fp32" if shape.layer else dtype_name, out_dtype or dtype_name),
        block=(shape.block_threads, 1, 1),
        grid=lambda p: (ceil_div(p["M"], rows_per_cta * p["row_iters"]), 1, 1),
        sample={"M": 1000, "N": n_class - 1, "heads": 1, "shift": 0, "row_iters": 1,
                "x_row_stride": n_class - 1, "x_head_stride": 0, "out_row_stride": n_class - 1,
                "out_head_stride": 0, "residual_row_stride": n_class - 1, "residual_head_stride": 0,
                "eps": 1e-6, "scale_value": 1.0},
        min_ctas_per_sm=shape.min_ctas_per_sm,
        smem_bytes=shape.smem_bytes,
        entry=entry_name(dtype_name, n_class, gemma, out_dtype, norm),
        pdl=True,
    )


def make_spec(norm: str, dtype_name: str, n_class: int, gemma: bool = False, out_dtype: str | None = None) -> KernelSpec:
    # RMSNorm's options leave the kind out (its spec names read as when it was the only one)
    extra = ({"out_dtype": out_dtype} if out_dtype else {}) | ({"norm": norm} if norm != "rms" else {})
    return KernelSpec.make(
        f"norm.{norm}norm_packed", "cute", "cutefi.norm.packed_kernel:PackedRowNormKernel",
        "cutefi.norm.packed:contract", Family.SIMT, dtype_name=dtype_name, n_class=n_class, gemma=gemma, **extra,
    )


def _variants():
    for dtype in launch.SUPPORTED_DTYPES:
        for (norm, quant), classes in CLASSES.items():
            for n_class in classes:
                if quant:
                    for out_dtype in launch.QUANT_DTYPES:
                        yield norm, dtype, n_class, False, out_dtype
                else:
                    for gemma in ((False, True) if norm == "rms" else (False,)):
                        yield norm, dtype, n_class, gemma, None


PACKED_SPECS = {key: make_spec(*key) for key in _variants()}
register(*PACKED_SPECS.values())
