"""Launch contract of the CuTe DSL RoPE kernel (pure python, no cutlass import).

One build per (dtype, position source, index dtype, interleave); head_dim, rotary_dim, head
counts, token count and every stride are run-time arguments.

Thread mapping: a head row of ``head_dim`` elements is cut into ``head_dim / 16`` slots; a
slot owns two 8-element (128-bit) vectors and the 8 rotary frequencies that rotate them:

* non-interleaved (NeoX): elements ``[8s, 8s+8)`` and ``[8s + R/2, ...)`` form the pairs,
* interleaved (GPT-J):    elements ``[16s, 16s+16)`` hold pairs ``(2i, 2i+1)``,

so in both styles slot ``s`` uses frequencies ``8s .. 8s+7`` and rotates iff ``s < R/16``;
other slots pass ``[16s, 16s+16)`` through. A CTA of 128 threads holds ``128 // slots``
tokens (one slot per thread), computes each token's cos/sin once, and walks a group of
``heads_per_cta`` heads of q then k (grid.y splits the heads when there are few tokens).

Parameters: the contract below (the only list); pointers to 16-bit [nnz, heads, head_dim]
views, the position source and the fp32 cos|sin cache, then sizes, strides (elements,
multiples of 8) and the frequency scalars.

Launch: grid = (ceil(nnz / tokens_per_cta), ceil((Hq + Hk) / heads_per_cta), 1),
block = (128, 1, 1), no shared memory, no cluster.
"""

from __future__ import annotations

from ..jit.contract import LaunchContract, ceil_div, pointers, scalars
from ..jit.policy import Family
from ..jit.registry import register
from ..jit.spec import KernelSpec

THREADS = 128
VEC = 8  # 16-bit elements per 128-bit access
SLOT = 2 * VEC  # elements per slot
POSITION_SOURCES = ("pos_ids", "indptr", "cache")
INDEX_DTYPES = ("i32", "i64")
DTYPES = ("bf16", "fp16")
# heads whose loads a thread issues before its first store (memory-level parallelism)
HEADS_IN_FLIGHT = 8
MAX_HEAD_DIM = SLOT * THREADS  # one token per CTA at most
# aim for this many CTAs before splitting a token's heads over grid.y (~16 per SM on 132 SMs)
TARGET_CTAS = 2048

STRIDES = ("q_stride_t", "q_stride_h", "k_stride_t", "k_stride_h",
           "q_out_stride_t", "q_out_stride_h", "k_out_stride_t", "k_out_stride_h")


def tokens_per_cta(head_dim):
    """Works on python ints and on the DSL's traced Int32."""
    return THREADS // (head_dim // SLOT)


def grid(nnz, head_dim, num_heads_total, heads_per_cta):
    return (ceil_div(nnz, tokens_per_cta(head_dim)), ceil_div(num_heads_total, heads_per_cta), 1)


def pick_heads_per_cta(nnz: int, head_dim: int, num_heads_total: int) -> int:
    """Split the heads of a token over grid.y only when the tokens alone give too few CTAs."""
    token_ctas = -(-nnz // tokens_per_cta(head_dim))
    groups = max(1, min(num_heads_total, -(-TARGET_CTAS // token_ctas)))
    return -(-num_heads_total // groups)


def entry_name(dtype: str, positions: str, index_dtype: str, interleave: bool) -> str:
    return f"cutefi_rope_{dtype}_{positions}_{index_dtype}" + ("_interleave" if interleave else "")


def contract(dtype: str, positions: str, index_dtype: str, interleave: bool) -> LaunchContract:
    index_bytes = {"i32": 4, "i64": 8}[index_dtype]
    return LaunchContract(
        params=(
            *pointers("q", "k", "q_out", "k_out", dtype=dtype),
            *pointers("pos", "offsets", dtype=index_dtype, align=index_bytes),
            *pointers("cos_sin_cache", dtype="fp32"),
            *scalars("i32", "nnz", "batch", "num_q_heads", "num_k_heads", "head_dim", "rotary_dim", "heads_per_cta"),
            *scalars("i64", *STRIDES, "cache_row_stride"),
            *scalars("f32", "rcp_scale", "log2_theta", "smooth_a", "smooth_b"),
        ),
        block=(THREADS, 1, 1),
        grid=lambda p: grid(p["nnz"], p["head_dim"], p["num_q_heads"] + p["num_k_heads"], p["heads_per_cta"]),
        sample={"nnz": 1000, "batch": 3, "num_q_heads": 32, "num_k_heads": 8, "head_dim": 128,
                "rotary_dim": 128, "heads_per_cta": 7, **{s: 4096 for s in STRIDES},
                "cache_row_stride": 128, "rcp_scale": 1.0, "log2_theta": 13.3},
        entry=entry_name(dtype, positions, index_dtype, interleave),
    )


ROPE_SPECS = {
    (dtype, positions, index_dtype, interleave): KernelSpec.make(
        "rope.rope", "cute", "cutefi.rope.rope_kernel:RopeKernel", "cutefi.rope.launch:contract",
        Family.SIMT, dtype=dtype, positions=positions, index_dtype=index_dtype, interleave=interleave,
    )
    for dtype in DTYPES for positions in POSITION_SOURCES
    for index_dtype in INDEX_DTYPES for interleave in (False, True)
}
register(*ROPE_SPECS.values())


# ---- rope.quant: RoPE + FP8 quantisation (FlashInfer's rope_quantize_fp8) ----------------------
# Four row sets a token: q_rope, k_rope (rotated), q_nope, k_nope (passed through); each times
# its scale (q's or kv's) and saturated to the FP8 format. A row is cut into 16-element slots
# (a NeoX slot: [8s, 8s + 8) and [8s + R/2, ...); interleaved and nope: [16s, 16s + 16)); the
# grid is the four sets' CTAs one after another, and a thread takes QUANT_UNITS (token, head,
# slot) units of its set, QUANT_THREADS apart, loading all of them before its first store.
# One unit a thread measured fastest (H200, 16384 tokens of MLA's 128 heads: 1 unit 840 us,
# 2 units 924, 4 units 1012, 8 units 1421; 32 tokens 4.9 / 5.3 / 6.0 / 7.5 us): more CTAs in
# flight, fewer registers (rope_quant_units_ab_h200_session45.txt).
QUANT_THREADS = 128
QUANT_UNITS = 1
QUANT_OUT_DTYPES = ("fp8e4m3", "fp8e5m2")
QUANT_SETS = ("q_rope", "k_rope", "q_nope", "k_nope")
QUANT_STRIDES = tuple(f"{name}{io}_stride_{d}" for name in QUANT_SETS for io in ("", "_out") for d in "th")


def quant_set_ctas(nnz, heads, width):
    """CTAs of one row set: its (token, head, slot) units over a CTA's. Python ints or traced Int32."""
    return ceil_div(nnz * heads * (width // SLOT), QUANT_THREADS * QUANT_UNITS)


def quant_grid(nnz, num_q_heads, num_k_heads, rope_dim, nope_dim) -> tuple:
    ctas = (quant_set_ctas(nnz, num_q_heads, rope_dim) + quant_set_ctas(nnz, num_k_heads, rope_dim)
            + quant_set_ctas(nnz, num_q_heads, nope_dim) + quant_set_ctas(nnz, num_k_heads, nope_dim))
    return (ctas, 1, 1)


def quant_contract(dtype: str, out_dtype: str, index_dtype: str, interleave: bool) -> LaunchContract:
    index_bytes = {"i32": 4, "i64": 8}[index_dtype]
    return LaunchContract(
        params=(
            *pointers(*QUANT_SETS, dtype=dtype),
            *pointers(*(f"{name}_out" for name in QUANT_SETS), dtype=out_dtype),
            *pointers("pos", dtype=index_dtype, align=index_bytes),
            *pointers("cos_sin_cache", dtype="fp32"),
            *scalars("i32", "nnz", "num_q_heads", "num_k_heads", "rope_dim", "nope_dim", "cache_rows"),
            *scalars("i64", *QUANT_STRIDES, "cache_row_stride"),
            *scalars("f32", "scale_q", "scale_kv"),
        ),
        block=(QUANT_THREADS, 1, 1),
        grid=lambda p: quant_grid(p["nnz"], p["num_q_heads"], p["num_k_heads"], p["rope_dim"], p["nope_dim"]),
        sample={"nnz": 1000, "num_q_heads": 128, "num_k_heads": 1, "rope_dim": 64, "nope_dim": 512,
                "cache_rows": 4096, **{s: 4096 for s in QUANT_STRIDES}, "cache_row_stride": 64,
                "scale_q": 1.0, "scale_kv": 1.0},
        entry=f"cutefi_rope_quant_{dtype}_{out_dtype}_{index_dtype}" + ("_interleave" if interleave else ""),
        pdl=True,
    )


QUANT_SPECS = {
    (dtype, out_dtype, index_dtype, interleave): KernelSpec.make(
        "rope.quant", "cute", "cutefi.rope.quant_kernel:RopeQuantKernel", "cutefi.rope.launch:quant_contract",
        Family.SIMT, dtype=dtype, out_dtype=out_dtype, index_dtype=index_dtype, interleave=interleave,
    )
    for dtype in DTYPES for out_dtype in QUANT_OUT_DTYPES for index_dtype in INDEX_DTYPES
    for interleave in (False, True)
}
register(*QUANT_SPECS.values())


# ---- rope.quant_append: RoPE + FP8 + append to a paged cache --------------------------------
# (FlashInfer's rope_quantize_fp8_append_paged_kv_cache) The quant kernel with a fifth row set,
# v (GQA/MHA; none for MLA), and k's and v's rows written into a paged FP8 cache instead of
# dense outputs: token t goes to the page and entry of (batch_indices[t], positions[t])
# (cute/paged.py; a padding or out-of-range token writes no K/V). GQA/MHA: k_rope to columns
# [0, R) of its K-cache head row, k_nope to [R, R + N), v to the V cache; MLA: k_rope to
# kpe_cache, k_nope to ckv_cache. A cache destination is a pointer to its first column and
# (page, entry, head) strides in elements (multiples of 16: 16-byte stores).
APPEND_SETS = (*QUANT_SETS, "v")
APPEND_CACHES = ("k_rope_cache", "k_nope_cache", "v_cache")
APPEND_STRIDES = (
    *(f"{name}_stride_{d}" for name in APPEND_SETS for d in "th"),
    *(f"{name}_out_stride_{d}" for name in ("q_rope", "q_nope") for d in "th"),
    *(f"{name}_stride_{d}" for name in APPEND_CACHES for d in "peh"),
)


def append_grid(nnz, num_q_heads, num_k_heads, num_v_heads, rope_dim, nope_dim) -> tuple:
    q_k = quant_grid(nnz, num_q_heads, num_k_heads, rope_dim, nope_dim)[0]
    return (q_k + quant_set_ctas(nnz, num_v_heads, rope_dim + nope_dim), 1, 1)


def append_contract(dtype: str, out_dtype: str, index_dtype: str, interleave: bool) -> LaunchContract:
    index_bytes = {"i32": 4, "i64": 8}[index_dtype]
    return LaunchContract(
        params=(
            *pointers(*APPEND_SETS, dtype=dtype),
            *pointers("q_rope_out", "q_nope_out", *APPEND_CACHES, dtype=out_dtype),
            *pointers("pos", dtype=index_dtype, align=index_bytes),
            *pointers("batch_indices", "positions", "kv_indptr", "kv_indices", dtype="i32", align=4),
            *pointers("cos_sin_cache", dtype="fp32"),
            *scalars("i32", "nnz", "num_q_heads", "num_k_heads", "num_v_heads", "rope_dim", "nope_dim",
                     "cache_rows", "page_size", "batch", "num_indices", "num_pages"),
            *scalars("i64", *APPEND_STRIDES, "cache_row_stride"),
            *scalars("f32", "scale_q", "scale_kv"),
        ),
        block=(QUANT_THREADS, 1, 1),
        grid=lambda p: append_grid(p["nnz"], p["num_q_heads"], p["num_k_heads"], p["num_v_heads"], p["rope_dim"],
                                   p["nope_dim"]),
        sample={"nnz": 64, "num_q_heads": 32, "num_k_heads": 8, "num_v_heads": 8, "rope_dim": 64, "nope_dim": 64,
                "cache_rows": 4096, "page_size": 16, "batch": 4, "num_indices": 100, "num_pages": 100,
                **{s: 4096 for s in APPEND_STRIDES}, "cache_row_stride": 64, "scale_q": 1.0, "scale_kv": 1.0},
        entry=f"cutefi_rope_quant_append_{dtype}_{out_dtype}_{index_dtype}" + ("_interleave" if interleave else ""),
        pdl=True,
    )


APPEND_SPECS = {
    (dtype, out_dtype, index_dtype, interleave): KernelSpec.make(
        "rope.quant_append", "cute", "cutefi.rope.quant_kernel:RopeQuantAppendKernel",
        "cutefi.rope.launch:append_contract", Family.SIMT, dtype=dtype, out_dtype=out_dtype,
        index_dtype=index_dtype, interleave=interleave,
    )
    for dtype in DTYPES for out_dtype in QUANT_OUT_DTYPES for index_dtype in INDEX_DTYPES
    for interleave in (False, True)
}
register(*APPEND_SPECS.values())
