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
