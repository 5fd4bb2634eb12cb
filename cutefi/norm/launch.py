"""Contract, size-class heuristics and specs of the CuTe DSL row-norm kernel (RMSNorm and
LayerNorm families). Pure Python, no cutlass import.

The kernel (``norm_kernel.py``) is specialised at build time on ``(norm, dtype, n_class,
fused_add, gemma)``; rows, the hidden size within its class, row strides and eps are kernel
arguments. Parameters (the contract below is the only list): ``x``, ``weight``, ``bias``
(layernorm's beta), ``out`` (may alias ``x``), ``residual`` (fused add, read and written in
place), ``M`` rows, ``N`` hidden size (``N % 8 == 0``, ``N <= n_class``), the three row
strides in elements (multiples of 8) and ``eps``. Grid: ``ceil(M / rows_per_cta)`` CTAs.
"""

from __future__ import annotations

from .. import dtypes
from ..jit.contract import LaunchContract, Param, ceil_div, pointers, scalars
from ..jit.policy import Family
from ..jit.registry import register
from ..jit.spec import KernelSpec

KINDS = ("rms", "layer")

# element width in bits for the supported storage dtypes

# Elements per 128-bit vector access (8 x 16-bit).
VEC_BITS = 128

# Size-class heuristics for 16-bit dtypes:
#   n_class -> (threads_per_row, block_threads)
# Rule: keep every thread at <= 64 elements of the row (8 x 128-bit chunks,
# 64 fp32 registers) so the whole row stays in registers with no spills; use
# >=128-thread CTAs (several rows per CTA for narrow rows) so there are enough
# 16-byte loads in flight per SM.  Mirrors quack's threads_per_row ladder
# (8/16/32/64/128/256), but widens the CTA for 16k/32k instead of reloading
# from smem.
_CLASS_TABLE = {
    64: (8, 128),  # 16 rows/CTA, 1 chunk/thread
    128: (16, 128),  # 8 rows/CTA, 1 chunk
    256: (32, 128),  # 4 rows/CTA, 1 chunk
    512: (32, 128),  # 4 rows/CTA, 2 chunks
    1024: (32, 128),  # 4 rows/CTA, 4 chunks
    2048: (32, 128),  # 4 rows/CTA, 8 chunks
    4096: (64, 128),  # 2 rows/CTA, 8 chunks
    8192: (128, 128),  # 1 row/CTA, 8 chunks
    16384: (256, 256),  # 1 row/CTA, 8 chunks
    32768: (512, 512),  # 1 row/CTA, 8 chunks
}

# LayerNorm at 4096 columns: twice the threads per row (32 elements a thread) and 8 CTAs per
# SM (see _LAYER_THREADS_PER_SM): 3861 GB/s at 16384x4096 bf16 on the H200 against 3095 with
# the RMSNorm row (64 elements a thread, which spilled fp32 gamma and beta). The same split at
# 2048, 8192 and 16384 without the occupancy change measured 9-30% slower than the RMSNorm row
# (session 4, layernorm_h200.json against norm_h200.json), so those keep it.
_LAYER_CLASS_TABLE = {**_CLASS_TABLE, 4096: (128, 128)}  # 1 row/CTA, 4 chunks

SUPPORTED_N_CLASSES = tuple(sorted(_CLASS_TABLE))
SUPPORTED_DTYPES = ("bf16", "fp16")


def dtype_bits(dtype_name: str) -> int:
    if dtype_name not in SUPPORTED_DTYPES:
        raise ValueError(f"unsupported dtype {dtype_name!r}; expected one of {SUPPORTED_DTYPES}")
    return dtypes.bits(dtype_name)


def _check(n_class: int, dtype_name: str) -> None:
    dtype_bits(dtype_name)
    if n_class not in _CLASS_TABLE:
        raise ValueError(f"unsupported n_class {n_class}; expected one of {SUPPORTED_N_CLASSES}")


def vec_elems(dtype_name: str) -> int:
    """Elements per 128-bit global access (8 for bf16/fp16)."""
    return VEC_BITS // dtype_bits(dtype_name)


def _config(n_class: int, dtype_name: str, kind: str) -> tuple[int, int]:
    _check(n_class, dtype_name)
    return (_LAYER_CLASS_TABLE if kind == "layer" else _CLASS_TABLE)[n_class]


def threads_per_row(n_class: int, dtype_name: str, kind: str = "rms") -> int:
    return _config(n_class, dtype_name, kind)[0]


def block_threads(n_class: int, dtype_name: str, kind: str = "rms") -> int:
    return _config(n_class, dtype_name, kind)[1]


def rows_per_cta(n_class: int, dtype_name: str, kind: str = "rms") -> int:
    return block_threads(n_class, dtype_name, kind) // threads_per_row(n_class, dtype_name, kind)


# Resident threads per SM the build asks for (``.minnctapersm``): 512, a 128-register cap.
# LayerNorm is latency-bound, not traffic-bound (ncu: one row per CTA and two block
# reductions per row; the same DRAM and L2 bytes as RMSNorm), so more rows in flight win even
# with a few spilled registers: at 16384x4096 bf16 on the H200, 4/5/6/8 CTAs of 128 threads
# per SM gave 3149/3497/3657/3821 GB/s (benchmarks/results/tune_layernorm_h200.json). Only the
# measured class takes it; 32768 would spill over a hundred registers at 1024 threads/SM.
_THREADS_PER_SM = 512
_LAYER_THREADS_PER_SM = {4096: 1024}


def min_ctas_per_sm(n_class: int, dtype_name: str, kind: str = "rms") -> int:
    """Occupancy target baked into the PTX (``.minnctapersm``), in CTAs per SM."""
    threads = _LAYER_THREADS_PER_SM.get(n_class, _THREADS_PER_SM) if kind == "layer" else _THREADS_PER_SM
    return max(1, threads // block_threads(n_class, dtype_name, kind))


def delay_weight_load(n_class: int, dtype_name: str, fused_add: bool, kind: str = "rms") -> bool:
    """Load w (and b) after the row reduction (register budget): fused builds, and layernorm
    whose fp32 gamma and beta take four times the registers of a 16-bit weight."""
    _check(n_class, dtype_name)
    return bool(fused_add) or kind == "layer"


def warps_per_row(n_class: int, dtype_name: str, kind: str = "rms") -> int:
    return max(1, threads_per_row(n_class, dtype_name, kind) // 32)


def chunks_per_thread(n_class: int, dtype_name: str, kind: str = "rms") -> int:
    """Number of 128-bit chunks each thread owns in its row (compile-time K)."""
    return -(-n_class // (vec_elems(dtype_name) * threads_per_row(n_class, dtype_name, kind)))


def tile_n(n_class: int, dtype_name: str, kind: str = "rms") -> int:
    """Columns covered by one CTA row-tile (>= n_class)."""
    return (vec_elems(dtype_name) * threads_per_row(n_class, dtype_name, kind)
            * chunks_per_thread(n_class, dtype_name, kind))


def block(n_class: int, dtype_name: str, kind: str = "rms") -> tuple[int, int, int]:
    return (block_threads(n_class, dtype_name, kind), 1, 1)


def pick_n_class(N: int) -> int:
    """Smallest supported class that covers N."""
    for c in SUPPORTED_N_CLASSES:
        if N <= c:
            return c
    raise ValueError(f"N={N} exceeds the largest supported class {SUPPORTED_N_CLASSES[-1]}")


def entry_name(dtype_name: str, n_class: int, fused_add: bool, gemma: bool, kind: str = "rms") -> str:
    """The PTX entry's name prefix of a build."""
    dtype_bits(dtype_name)
    return f"cutefi_{kind}norm_{dtype_name}_n{n_class}" + ("_add" if fused_add else "") + (
        "_gemma" if gemma else ""
    )


def contract(norm: str, dtype_name: str, n_class: int, fused_add: bool, gemma: bool) -> LaunchContract:
    param_dtype = "fp32" if norm == "layer" else dtype_name
    rows = rows_per_cta(n_class, dtype_name, norm)
    return LaunchContract(
        params=(
            *pointers("x", dtype=dtype_name), *pointers("weight", "bias", dtype=param_dtype),
            *pointers("out", "residual", dtype=dtype_name),
            *scalars("i32", "M", "N"), *scalars("i64", "x_row_stride", "out_row_stride", "residual_row_stride"),
            Param("eps", "f32"),
        ),
        block=block(n_class, dtype_name, norm),
        grid=lambda p: (ceil_div(p["M"], rows), 1, 1),
        sample={"M": 1000, "N": n_class, "x_row_stride": n_class, "out_row_stride": n_class,
                "residual_row_stride": n_class, "eps": 1e-6},
        min_ctas_per_sm=min_ctas_per_sm(n_class, dtype_name, norm),
        entry=entry_name(dtype_name, n_class, fused_add, gemma, norm),
        pdl=True,
    )


def make_spec(norm: str, dtype_name: str, n_class: int, fused_add: bool = False, gemma: bool = False) -> KernelSpec:
    return KernelSpec.make(
        f"norm.{norm}norm", "cute", "cutefi.norm.norm_kernel:RowNormKernel", "cutefi.norm.launch:contract",
        Family.SIMT, norm=norm, dtype_name=dtype_name, n_class=n_class, fused_add=fused_add, gemma=gemma,
    )


# Every build: RMSNorm (plain / fused add x plain / gemma weight) and LayerNorm (fp32 gamma
# and beta), per dtype and hidden-size class.
NORM_SPECS = {
    ("rms", dtype, n_class, fused, gemma): make_spec("rms", dtype, n_class, fused, gemma)
    for dtype in SUPPORTED_DTYPES for n_class in SUPPORTED_N_CLASSES
    for fused in (False, True) for gemma in (False, True)
} | {
    ("layer", dtype, n_class, False, False): make_spec("layer", dtype, n_class)
    for dtype in SUPPORTED_DTYPES for n_class in SUPPORTED_N_CLASSES
}
register(*NORM_SPECS.values())
