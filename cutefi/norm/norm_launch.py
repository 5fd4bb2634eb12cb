"""Launch contract of the CuTe DSL row-norm kernel (RMSNorm and LayerNorm families).

Pure python, no cutlass import. The compiled kernel (``norm_kernel.py``) is specialised at
build time on ``(kind, dtype, n_class, fused_add, gemma)``. Everything a loader needs to
launch the cubin is derived here from ``(n_class, dtype_name)``, and the ``@cute.jit`` host
wrapper imports these same functions, so the two cannot drift. The contract lives here, not
in the API module, so editing the API does not change the kernels' fingerprints.

Kernel parameter order (PTX ``.entry`` order), identical for every build:

    0 x_ptr               u64  input  [M, N] row-major, 16-byte aligned
    1 w_ptr               u64  weight [N] (input dtype; fp32 gamma for layernorm)
    2 b_ptr               u64  bias [N] fp32 (layernorm beta; ignored by rmsnorm)
    3 out_ptr             u64  output [M, N] (may alias x_ptr)
    4 residual_ptr        u64  residual [M, N], read+written in place when
                               fused_add (ignored otherwise; pass any ptr)
    5 M                   u32  number of rows, >= 1
    6 N                   u32  hidden size, N % 8 == 0, 8 <= N <= n_class
    7 x_row_stride        u64  elements between rows of x, % 8 == 0
    8 out_row_stride      u64  elements between rows of out, % 8 == 0
    9 residual_row_stride u64  elements between rows of residual, % 8 == 0
   10 eps                 f32

Launch: grid = (ceil(M / rows_per_cta), 1, 1), block = (block_threads, 1, 1),
dynamic shared memory = dynamic_smem_bytes = 0, no cluster, any stream.
The PTX entry symbol is ``entry_name(...) + "_0"`` (single kernel per cubin).
"""

from __future__ import annotations

from ..jit.contract import LaunchContract, Param

KINDS = ("rms", "layer")

# element width in bits for the supported storage dtypes
_DTYPE_BITS = {"bf16": 16, "bfloat16": 16, "fp16": 16, "float16": 16}

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

SUPPORTED_N_CLASSES = tuple(sorted(_CLASS_TABLE))
SUPPORTED_DTYPES = ("bf16", "fp16")


def dtype_bits(dtype_name: str) -> int:
    try:
        return _DTYPE_BITS[dtype_name]
    except KeyError:
        raise ValueError(f"unsupported dtype {dtype_name!r}; expected bf16 or fp16") from None


def _check(n_class: int, dtype_name: str) -> None:
    dtype_bits(dtype_name)
    if n_class not in _CLASS_TABLE:
        raise ValueError(f"unsupported n_class {n_class}; expected one of {SUPPORTED_N_CLASSES}")


def vec_elems(dtype_name: str) -> int:
    """Elements per 128-bit global access (8 for bf16/fp16)."""
    return VEC_BITS // dtype_bits(dtype_name)


def threads_per_row(n_class: int, dtype_name: str) -> int:
    _check(n_class, dtype_name)
    return _CLASS_TABLE[n_class][0]


def block_threads(n_class: int, dtype_name: str) -> int:
    _check(n_class, dtype_name)
    return _CLASS_TABLE[n_class][1]


def rows_per_cta(n_class: int, dtype_name: str) -> int:
    return block_threads(n_class, dtype_name) // threads_per_row(n_class, dtype_name)


def min_ctas_per_sm(n_class: int, dtype_name: str) -> int:
    """Occupancy target baked into the PTX (``.minnctapersm``): 512 resident
    threads per SM, i.e. a 128-register cap per thread."""
    return max(1, 512 // block_threads(n_class, dtype_name))


def delay_weight_load(n_class: int, dtype_name: str, fused_add: bool, kind: str = "rms") -> bool:
    """Load w (and b) after the row reduction (register budget): fused builds, and layernorm
    whose fp32 gamma and beta take four times the registers of a 16-bit weight."""
    _check(n_class, dtype_name)
    return bool(fused_add) or kind == "layer"


def warps_per_row(n_class: int, dtype_name: str) -> int:
    return max(1, threads_per_row(n_class, dtype_name) // 32)


def chunks_per_thread(n_class: int, dtype_name: str) -> int:
    """Number of 128-bit chunks each thread owns in its row (compile-time K)."""
    v = vec_elems(dtype_name)
    tpr = threads_per_row(n_class, dtype_name)
    return -(-n_class // (v * tpr))


def tile_n(n_class: int, dtype_name: str) -> int:
    """Columns covered by one CTA row-tile (>= n_class)."""
    return vec_elems(dtype_name) * threads_per_row(n_class, dtype_name) * chunks_per_thread(
        n_class, dtype_name
    )


def reductions(kind: str) -> int:
    """Row reductions per row: sum(x^2) for rms; sum(x) then sum((x-mean)^2) for layer."""
    return {"rms": 1, "layer": 2}[kind]


def static_smem_bytes(n_class: int, dtype_name: str, kind: str = "rms") -> int:
    """Statically declared shared memory of the build (``.shared`` array in the
    PTX, not a launch parameter): fp32 cross-warp partial sums, one per
    (reduction, row in CTA, warp of that row); 0 when a row fits in one warp."""
    wpr = warps_per_row(n_class, dtype_name)
    if wpr == 1:
        return 0
    return reductions(kind) * rows_per_cta(n_class, dtype_name) * wpr * 4


def dynamic_smem_bytes(n_class: int, dtype_name: str) -> int:
    """Dynamic shared memory to pass at launch: always 0 (the block-reduction
    buffer is a static ``.shared`` array, see ``static_smem_bytes``)."""
    _check(n_class, dtype_name)
    return 0


def grid_x(M, n_class: int, dtype_name: str):
    """ceil(M / rows_per_cta).  Pure arithmetic (no branches) so the CuTe DSL
    host wrapper can call it with a traced Int32 M as well as a python int."""
    r = rows_per_cta(n_class, dtype_name)
    return (M + (r - 1)) // r


def block(n_class: int, dtype_name: str) -> tuple[int, int, int]:
    return (block_threads(n_class, dtype_name), 1, 1)


def pick_n_class(N: int) -> int:
    """Smallest supported class that covers N."""
    for c in SUPPORTED_N_CLASSES:
        if N <= c:
            return c
    raise ValueError(f"N={N} exceeds the largest supported class {SUPPORTED_N_CLASSES[-1]}")


def entry_name(dtype_name: str, n_class: int, fused_add: bool, gemma: bool, kind: str = "rms") -> str:
    """Prefix of the PTX/cubin ``.entry`` symbol of a build (see norm_kernel)."""
    dtype_bits(dtype_name)
    canon = "bf16" if "b" in dtype_name else "fp16"
    return f"cutefi_{kind}norm_{canon}_n{n_class}" + ("_add" if fused_add else "") + (
        "_gemma" if gemma else ""
    )


def contract(norm: str, dtype_name: str, n_class: int, fused_add: bool, gemma: bool) -> LaunchContract:
    return LaunchContract(
        params=(
            Param("x", "ptr"), Param("weight", "ptr"), Param("bias", "ptr"), Param("out", "ptr"),
            Param("residual", "ptr"), Param("M", "i32"), Param("N", "i32"),
            Param("x_row_stride", "i64"), Param("out_row_stride", "i64"), Param("residual_row_stride", "i64"),
            Param("eps", "f32"),
        ),
        block=block(n_class, dtype_name),
        grid=lambda problem: (grid_x(problem["M"], n_class, dtype_name), 1, 1),
        sample={"M": 1000, "N": n_class, "x_row_stride": n_class, "out_row_stride": n_class,
                "residual_row_stride": n_class, "eps": 0},
        smem_bytes=dynamic_smem_bytes(n_class, dtype_name),
    )
