"""Launch contracts of the prefill attention family (pure Python, no cutlass import).

``prefill.sm90`` (Hopper, ``sm90_kernel.py``): FlashAttention-3's structure. A CTA holds
``TILE_M`` = 128 query rows of one (request, q head): a producer warp TMA-loads the Q tile
once and the request's K and V tiles (``tile_n`` tokens each) into two rings (``RINGS``);
two consumer warpgroups own 64 rows each and, per KV tile, compute S = Q K^T (wgmma, both
operands in shared memory), the online softmax in registers (base 2), and O += P V (wgmma
with P from registers). Persistent CTAs walk the plan's work units (``plan.py``), the most
expensive first.

Tensors are passed as ``[heads, tokens, head_dim]`` views (any token and head strides that are
multiples of 16 bytes): q, k and v through TMA descriptors (``PLACEHOLDER`` is their compiled
shape; the loader encodes the real ones), out and lse through pointers with strides (a tile's
rows past its request's end are not stored: they belong to the next request). KV tiles that
cross the request's end are loaded from the next request's rows (or zero-filled past the
tensor) and masked.

Work units: the plan's ``work`` array is int32 ``[WORK_ROWS, pairs]`` (row-major) describing
(request, q tile) pairs: q_begin (the request's first q row), qo_len, kv_begin, kv_len,
m_block (the q tile), mask_begin (the byte where the request's custom mask starts; the
mma.sync kernel's only), the most expensive first. Unit ``u`` is q head ``u // pairs`` (kv head
``head // group``), pair ``u % pairs``: the CTAs running at once share a head's K and V in
L2. Causal masks are aligned to the end of the KV (q row ``r`` sees keys
``<= r + kv_len - qo_len``); ``window_left >= 0`` also hides keys ``< r + kv_len - qo_len -
window_left``. Scores become base-2 logits: ``s = S * q_mult``, or with a soft cap ``s =
cap_scale * tanh(S * q_mult)``. lse is base 2 (FlashInfer's). ``has_sinks``: ``sinks[head]``
(float32, natural-log units) is a logit with no value in every row's denominator (gpt-oss).

Scheduling: a CTA's first unit is its index; later ones come from ``counter`` (an int32 that
is zero between launches: each CTA takes units with an atomic add until it gets one past the
end, and the launch's last fetch puts it back to zero), so the CTAs running at once hold
neighbouring units and one that finishes early takes more.
"""

from __future__ import annotations

from ..jit.contract import LaunchContract, Param, TmaRecipe, scalars
from ..jit.policy import Family
from ..jit.registry import register
from ..jit.spec import KernelSpec

DTYPES = ("bf16", "fp16")
HEAD_DIMS = (64, 128, 256)
TILE_M = 128           # q rows of a CTA: two consumer warpgroups of 64
WARPGROUP = 128
THREADS = 3 * WARPGROUP  # producer warpgroup + two consumers
BOX_COLS = 64          # head-dim elements of a TMA box: one 128-byte swizzle row (16-bit)
SMEM_LIMIT = 227 * 1024
BARRIER_BYTES = 1024
WORK_ROWS = 6          # q_begin, qo_len, kv_begin, kv_len, m_block, mask_begin
PLACEHOLDER_TOKENS = 4096
OUT_STRIDES = ("out_stride_token", "out_stride_head", "lse_stride_token", "lse_stride_head")


MLA_HEAD_DIMS = (192, 128)  # DeepSeek-style MLA prefill: (head_dim_qk, head_dim_vo), ragged K/V
PAGE_SIZES = (16, 32, 64)  # paged builds: a page is whole 1 KiB swizzle atoms of rows (8+)


def tile_n(head_dim: int, page_size: int = 0) -> int:
    """KV tokens a tile: S (64 x tile_n fp32) and O (64 x head_dim fp32) share a consumer's
    registers, so the widest head dim takes the narrowest tile. (At head dim 128, 128 fits
    only with P packed two elements an instruction, ``cute/pack16``: before, ptxas serialised
    the wgmmas for want of registers (C7512) and the tile had to be 112.) A paged build's tile
    is whole pages: 64 keys at head dim 256 with pages of 32 or 64."""
    keys = {64: 128, 128: 128, 192: 128, 256: 80}[head_dim]
    if page_size and keys % page_size:
        keys = 64
    if page_size and keys % page_size:
        raise ValueError(f"prefill d{head_dim}: pages of {page_size} tokens do not tile {keys}-key tiles")
    return keys


def plan_tile_n(head_dim: int, page_size: int = 0) -> int:
    """The tile a plan weighs its units by: the Hopper kernel's where it has a build for the
    page size, the mma.sync kernel's otherwise."""
    hopper = (head_dim in HEAD_DIMS and page_size in (0, *PAGE_SIZES)) or (head_dim == MLA_HEAD_DIMS[0]
                                                                         and not page_size)
    return tile_n(head_dim, page_size) if hopper else SM80_TILE_N[head_dim]


def q_bytes(head_dim: int) -> int:
    return TILE_M * head_dim * 2


def tile_bytes(head_dim: int, page_size: int = 0, columns: int | None = None) -> int:
    """One K tile (or V tile of ``columns`` head-dim elements: MLA's head_dim_vo)."""
    return tile_n(head_dim, page_size) * (columns or head_dim) * 2


# (K stages, V stages): a K tile is free once S = Q K^T is done, a V tile only after the next
# tile's S (P V of tile j runs with S of tile j + 1), so V takes the deeper ring; all but the
# Q tile of shared memory, at most 227 KB a CTA
# (d256: 80-key tiles and two V stages beat 64 and three, +3.5%; MLA 192/128: 48 KiB K tiles)
RINGS = {64: (4, 6), 128: (2, 3), 192: (2, 2), 256: (2, 2)}
# Q tiles in flight: with two, the next unit's Q has landed when a unit ends, so the boundary
# turn (next unit's first S with the last P V, ``sm90_kernel``) never waits for it: 11% faster
# at head dim 64 and, for a V stage, 1-11% at 128 on the H200 (the shorter the request, the
# more; ``benchmarks/results/prefill_unit_boundary_h200.csv``); at 256 there is no room
Q_STAGES = {64: 2, 128: 2, 192: 1, 256: 1}
# the consumers take turns to issue their wgmmas (ping-pong): measured 2-3% faster at head
# dims 128 and 256 on the H200, 4% slower at 64 (where the softmax is as long as the GEMMs);
# neutral there since O's rescale runs under S (``benchmarks/results/prefill_rescale_order_h200.txt``)
PINGPONG = {64: False, 128: True, 192: True, 256: True}
# lazy rescale (``sm90_kernel``: O rescaled only when a row's maximum outgrows its reference by
# 2^8): measured 2.7% faster at head dim 256 (O is 128 registers a thread) and 1-4% slower at
# 64 and 128 on the H200 (``benchmarks/results/prefill_lazy_rescale_h200.txt``)
LAZY_RESCALE = {64: False, 128: False, 192: False, 256: True}
# every so many columns of a tile take their softmax exponentials on the FMA pipe
# (``cute/exp2_fma``), not the MUFU unit, except in a unit's first tile; 0: none. At head dim 64
# a tile's 2^x keep the MUFU unit as busy as its GEMMs keep the tensor cores: every 4th column
# measured +2-3% on the H200 at 4 x 4096 (causal and not) and 1 x 16384, -1% for requests of
# 256-1024 tokens; every 8th, 3rd or 2nd slower (``benchmarks/results/prefill_d64_exp2_fma_ab_h200_session30.json``).
# At 128 and 256 the GEMMs take twice as long or more and the MUFU unit is not the limit: at 128
# every 4th or 8th column measured 4-7% slower (same file)
EXP2_ON_FMA = {64: 4, 128: 0, 192: 0, 256: 0}


def stages(head_dim: int) -> tuple[int, int]:
    return RINGS[head_dim]


def smem_bytes(head_dim: int, page_size: int = 0, head_dim_vo: int | None = None) -> int:
    k_stages, v_stages = stages(head_dim)
    return (BARRIER_BYTES + Q_STAGES[head_dim] * q_bytes(head_dim) + k_stages * tile_bytes(head_dim, page_size)
            + v_stages * tile_bytes(head_dim, page_size, head_dim_vo))


def sm90_contract(dtype: str, head_dim: int, page_size: int = 0, head_dim_vo: int | None = None) -> LaunchContract:
    """``page_size`` 0: K and V are ``[kv_heads, tokens, head_dim]`` views (ragged); otherwise
    ``[pages, kv_heads, page_size, head_dim]`` views of a paged cache, read a page (and 64
    head-dim columns) a TMA box, through ``kv_indices``. ``head_dim_vo`` (MLA, ragged only):
    V's and the output's head dim, with ``head_dim`` q's and k's. ``out_scale`` multiplies the
    output (FlashInfer's v_scale)."""
    dims = (head_dim, head_dim_vo or head_dim)
    if dtype not in DTYPES or (page_size and page_size not in PAGE_SIZES) or not (
            (head_dim in HEAD_DIMS and dims[1] == head_dim) or (dims == MLA_HEAD_DIMS and not page_size)):
        raise ValueError(f"prefill sm90 builds are {DTYPES} x head_dim {HEAD_DIMS} x pages of {PAGE_SIZES} (or "
                         f"ragged), or (head_dim_qk, head_dim_vo) = {MLA_HEAD_DIMS} ragged; got {dtype}, {dims}, "
                         f"{page_size}")
    smem = smem_bytes(head_dim, page_size, dims[1])
    if smem > SMEM_LIMIT:
        raise ValueError(f"prefill d{head_dim}: {smem} bytes of shared memory exceed {SMEM_LIMIT}")
    q_recipe = TmaRecipe("q", dtype, box=(BOX_COLS, TILE_M, 1), placeholder=(4, PLACEHOLDER_TOKENS, head_dim),
                         swizzle="128B", l2_promotion="256B")
    if page_size:
        kv = tuple(TmaRecipe(name, dtype, box=(BOX_COLS, page_size, 1, 1), placeholder=(64, 4, page_size, head_dim),
                             swizzle="128B", l2_promotion="256B") for name in ("k", "v"))
    else:
        kv = tuple(TmaRecipe(name, dtype, box=(BOX_COLS, tile_n(head_dim), 1),
                             placeholder=(4, PLACEHOLDER_TOKENS, columns), swizzle="128B", l2_promotion="256B")
                   for name, columns in zip(("k", "v"), dims))
    tma = (q_recipe, *kv)
    paged = (Param("kv_indices", "ptr", "i32", 4),) if page_size else ()
    return LaunchContract(
        params=(Param("q", "tma"), Param("k", "tma"), Param("v", "tma"), Param("out", "ptr", dtype, 4),
                Param("lse", "ptr", "fp32", 4), Param("work", "ptr", "i32", 4),
                Param("counter", "ptr", "i32", 4), *paged, Param("sinks", "ptr", "fp32", 4),
                *scalars("i32", "units", "heads", "group", "causal", "window_left", "write_lse", "ctas", "has_sinks"),
                *scalars("f32", "q_mult", "cap_scale", "out_scale"), *scalars("i64", *OUT_STRIDES)),
        block=(THREADS, 1, 1),
        grid=lambda p: (p["ctas"], 1, 1),
        sample={"units": 1024, "heads": 32, "group": 4, "causal": 1, "window_left": -1, "write_lse": 1,
                "ctas": 132, "has_sinks": 0, "q_mult": 0.1275, "cap_scale": 0.0, "out_scale": 1.0,
                **{name: 4096 for name in OUT_STRIDES}},
        smem_bytes=smem,
        tma=tma,
        entry=f"cutefi_prefill_sm90_{dtype}_d{head_dim}" + (f"_p{page_size}" if page_size else "")
        + (f"_vo{dims[1]}" if dims[1] != head_dim else ""),
        pdl=True,
    )


# ---- prefill.sm80: the mma.sync family (sm_80 ... sm_121a; ``sm80_kernel.py``) ----------------
SM80_WARPS = 8             # 16 q rows a warp: the 128-row tile of the plan
SM80_THREADS = 32 * SM80_WARPS
# KV tokens a tile: Q (128 rows), one K and one V tile in at most 96 KiB (sm_86/89/120 allow 99)
SM80_TILE_N = {64: 128, 128: 64, 192: 64, 256: 32}
SM80_STRIDES = ("q_stride_token", "q_stride_head", "kv_stride_page", "kv_stride_token", "kv_stride_head",
                "v_stride_token", "v_stride_head")


def sm80_smem_bytes(head_dim: int, head_dim_vo: int | None = None) -> int:
    tile = SM80_TILE_N[head_dim]
    return ((TILE_M + tile) * head_dim + tile * (head_dim_vo or head_dim)) * 2


KV_FP8 = ("fp8e4m3", "fp8e5m2")  # FP8 caches: the mma.sync kernel widens them in shared memory


def sm80_contract(dtype: str, head_dim: int, kv_dtype: str | None = None, software_fp8: bool = False,
                  head_dim_vo: int | None = None) -> LaunchContract:
    """One CTA a work unit. K/V rows are read through pointers and strides: ``page_size`` 0,
    rows ``kv_begin + t`` of ``[kv_heads, tokens]``-strided K/V (ragged); otherwise token ``t``
    of a request is entry ``t % page_size`` of page ``kv_indices[kv_begin + t // page_size]``
    (any page size; page ids outside ``[0, num_pages)`` read zeros). FP8 K/V (``kv_dtype``) are
    widened in shared memory; ``out_scale`` multiplies the output (FlashInfer's v_scale).
    ``head_dim_vo`` (MLA, ragged K/V only): V's and the output's rows, V's own strides.
    ``has_rope``: Llama RoPE on q (position ``r + kv_len - qo_len``) and k (position ``t``) in
    shared memory (``cute/rope_angle.py``; FlashInfer's ``pos_encoding_mode="ROPE_LLAMA"``).
    ``has_mask``: a custom mask, request by request from byte ``mask_begin`` (the work array's last row) of ``mask``:
    the request's [qo_len, kv_len] booleans row-major, 8 a byte, the first in the lowest bit."""
    kv_dtype = kv_dtype or dtype
    dims = (head_dim, head_dim_vo or head_dim)
    if dtype not in DTYPES or kv_dtype not in (dtype, *KV_FP8) or not (
            (head_dim in HEAD_DIMS and dims[1] == head_dim) or (dims == MLA_HEAD_DIMS and kv_dtype == dtype)):
        raise ValueError(f"prefill sm80 builds are {DTYPES} x head_dim {HEAD_DIMS} x KV in q's dtype or {KV_FP8}, "
                         f"or (head_dim_qk, head_dim_vo) = {MLA_HEAD_DIMS} (16-bit); got {dtype}, {dims}, {kv_dtype}")
    return LaunchContract(
        params=(Param("q", "ptr", dtype, 16), Param("k", "ptr", kv_dtype, 16), Param("v", "ptr", kv_dtype, 16),
                Param("out", "ptr", dtype, 4), Param("lse", "ptr", "fp32", 4), Param("work", "ptr", "i32", 4),
                Param("kv_indices", "ptr", "i32", 4), Param("mask", "ptr", "u8", 1), Param("sinks", "ptr", "fp32", 4),
                *scalars("i32", "units", "heads", "group", "causal", "window_left", "write_lse", "page_size",
                         "num_pages", "has_mask", "has_sinks", "has_rope"),
                *scalars("f32", "q_mult", "cap_scale", "out_scale", "rope_rcp_scale", "rope_log2_step"),
                *scalars("i64", *SM80_STRIDES, *OUT_STRIDES)),
        block=(SM80_THREADS, 1, 1),
        grid=lambda p: (p["units"], 1, 1),
        sample={"units": 1024, "heads": 32, "group": 4, "causal": 1, "window_left": -1, "write_lse": 1,
                "page_size": 0, "num_pages": 0, "has_mask": 0, "has_sinks": 0, "has_rope": 0, "q_mult": 0.1275,
                "cap_scale": 0.0, "out_scale": 1.0, "rope_rcp_scale": 1.0, "rope_log2_step": -0.2,
                **{name: 4096 for name in (*SM80_STRIDES, *OUT_STRIDES)}},
        smem_bytes=sm80_smem_bytes(*dims),
        entry=f"cutefi_prefill_sm80_{dtype}_d{head_dim}" + (f"_{kv_dtype}" if kv_dtype != dtype else "")
        + ("_sw" if software_fp8 else "") + (f"_vo{dims[1]}" if dims[1] != head_dim else ""),
        pdl=True,
    )


def _sm80_spec(**options) -> KernelSpec:
    return KernelSpec.make("prefill.sm80", "cute", "cutefi.prefill.sm80_kernel:PrefillSm80",
                           "cutefi.prefill.launch:sm80_contract", Family.MMA_SYNC, **options)


def _sm90_spec(**options) -> KernelSpec:
    return KernelSpec.make("prefill.sm90", "cute", "cutefi.prefill.sm90_kernel:PrefillSm90",
                           "cutefi.prefill.launch:sm90_contract", Family.WGMMA, **options)


SM80_SPECS = {(dtype, head_dim): _sm80_spec(dtype=dtype, head_dim=head_dim)
              for dtype in DTYPES for head_dim in HEAD_DIMS}
SM80_FP8_SPECS = {(dtype, head_dim, kv_dtype): _sm80_spec(dtype=dtype, head_dim=head_dim, kv_dtype=kv_dtype)
                  for dtype in DTYPES for head_dim in HEAD_DIMS for kv_dtype in KV_FP8}
SM90_SPECS = {(dtype, head_dim): _sm90_spec(dtype=dtype, head_dim=head_dim)
              for dtype in DTYPES for head_dim in HEAD_DIMS}
PAGED_SPECS = {(dtype, head_dim, page_size): _sm90_spec(dtype=dtype, head_dim=head_dim, page_size=page_size)
               for dtype in DTYPES for head_dim in HEAD_DIMS for page_size in PAGE_SIZES}
SM80_MLA_SPECS = {dtype: _sm80_spec(dtype=dtype, head_dim=MLA_HEAD_DIMS[0], head_dim_vo=MLA_HEAD_DIMS[1])
                  for dtype in DTYPES}
SM90_MLA_SPECS = {dtype: _sm90_spec(dtype=dtype, head_dim=MLA_HEAD_DIMS[0], head_dim_vo=MLA_HEAD_DIMS[1])
                  for dtype in DTYPES}
# ---- prefill.widen_kv: FP8 K/V widened for the Hopper kernel (``widen_kernel.py``) ----------------
WIDEN_THREADS = 256
WIDEN_STRIDES = tuple(f"{which}_{name}_stride" for which in "kv" for name in ("outer", "a", "b"))


def widen_contract(dtype: str, kv_dtype: str) -> LaunchContract:
    """K and V (grid y 0 and 1) widened from ``kv_dtype`` codes to ``dtype``: ``rows`` dense
    output rows of ``head_dim`` (a multiple of 16) from source rows at byte strides (multiples
    of 16) over (outer, a, b); ``paged``: outer ``o`` is page ``ids[o]`` (clamped to the
    ``sources`` pages of the cache)."""
    if dtype not in DTYPES or kv_dtype not in KV_FP8:
        raise ValueError(f"prefill.widen_kv builds are {DTYPES} x {KV_FP8}; got {dtype}, {kv_dtype}")
    return LaunchContract(
        params=(Param("k_src", "ptr", "i32", 16), Param("v_src", "ptr", "i32", 16), Param("k_dst", "ptr", "i32", 16),
                Param("v_dst", "ptr", "i32", 16), Param("ids", "ptr", "i32", 4),
                *scalars("i32", "rows", "head_dim", "inner_a", "inner_b", "paged", "sources"),
                *scalars("i64", *WIDEN_STRIDES)),
        block=(WIDEN_THREADS, 1, 1),
        grid=lambda p: ((p["rows"] * (p["head_dim"] // 16) + WIDEN_THREADS - 1) // WIDEN_THREADS, 2, 1),
        sample={"rows": 4096 * 8, "head_dim": 128, "inner_a": 8, "inner_b": 1, "paged": 0, "sources": 4096,
                **{name: 1024 for name in WIDEN_STRIDES}},
        entry=f"cutefi_prefill_widen_{kv_dtype}_to_{dtype}",
        pdl=True,
    )


WIDEN_SPECS = {
    (dtype, kv_dtype): KernelSpec.make("prefill.widen_kv", "cute", "cutefi.prefill.widen_kernel:WidenKv",
                                       "cutefi.prefill.launch:widen_contract", Family.WGMMA, dtype=dtype,
                                       kv_dtype=kv_dtype)
    for dtype in DTYPES for kv_dtype in KV_FP8
}
# a test build: sm_80/86's integer e4m3 widening, run where the hardware converts (the H200's tests)
SM80_SOFTWARE_FP8_SPEC = _sm80_spec(dtype="bf16", head_dim=128, kv_dtype="fp8e4m3", software_fp8=True)
register(*SM90_SPECS.values(), *PAGED_SPECS.values(), *SM80_SPECS.values(), *SM80_FP8_SPECS.values(),
         *SM80_MLA_SPECS.values(), *SM90_MLA_SPECS.values(), *WIDEN_SPECS.values(), SM80_SOFTWARE_FP8_SPEC)
