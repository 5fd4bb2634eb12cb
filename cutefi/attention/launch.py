"""Launch contracts of the attention family's kernels (pure Python, no cutlass import).

Merge kernel (``merge_kernel.py``): merges attention states (a partial output ``v`` of a head
and its base-2 log-sum-exp ``s``) over ``states`` index sets, FlashInfer's ``merge_state``,
``merge_state_in_place`` and ``merge_states`` in one kernel:

    m = max_i s_i,  w_i = 2^(s_i - m),  v = sum_i w_i v_i / sum_i w_i,  s = m + log2(sum_i w_i)

computed online over the states. A row is one (position, head): ``rows = seq_len * heads``.
A group of ``lanes`` threads (a power of two, at most a warp) owns a row, each thread
``chunks`` 8-element (128-bit) pieces of it, so ``head_dim <= 8 * lanes * chunks``; every lane
reads the row's ``s`` values (a broadcast), and the group's first lane writes ``s_out`` after a
warp barrier (so ``s_out`` may alias state 0's ``s``: in place).

Parameters (the contract below is the only list): ``v`` and ``s`` with strides (elements) per
position, state and head; ``v_out``/``s_out`` with strides per position and head (``v_out``
may alias state 0's ``v``); ``mask`` (u8 per position; rows of a position whose mask is 0 are
left untouched) with ``has_mask``; ``write_lse`` (0: ``s_out`` is not written). Two separate
state tensors (``merge_state``) are one ``v`` whose state stride is the distance between them.
(The split-KV decode merges its parts itself: ``decode_mma_kernel._merge_parts``.)

Launch: grid = (seq_len, ceil(heads / rows_per_cta)), block = 128, no shared memory: a CTA
holds ``rows_per_cta`` heads of one position (no division to find a row's position and head).
"""

from __future__ import annotations

from ..jit import fastdiv
from ..jit.contract import LaunchContract, Param, ceil_div, pointers, scalars
from ..jit.policy import Family
from ..jit.registry import register
from ..jit.spec import KernelSpec

DTYPES = ("bf16", "fp16")
VEC = 8  # 16-bit elements per 128-bit access
MERGE_THREADS = 128
# states whose loads a thread issues before merging them (memory-level parallelism): 2 for a
# pair (merge_state, merge_state_in_place), 4 for a stack (merge_states with more states)
STATES_IN_FLIGHT = (2, 4)
# occupancy asked of the pair builds (``.minnctapersm``): 12 CTAs, 1536 threads/SM, 40 registers
# (a thread has few loads in flight, so the SM needs many warps); the 4-state builds need more
# registers and take what they use
MERGE_CTAS_PER_SM = {2: 12}
# (lanes a row, chunks a thread): head_dim up to 64, 128, 256 and 512
MERGE_SHAPES = ((8, 1), (16, 1), (32, 1), (32, 2))
MAX_HEAD_DIM = max(VEC * lanes * chunks for lanes, chunks in MERGE_SHAPES)

MERGE_STRIDES = ("v_stride_pos", "v_stride_state", "v_stride_head", "s_stride_pos", "s_stride_state",
                 "s_stride_head", "v_out_stride_pos", "v_out_stride_head", "s_out_stride_pos",
                 "s_out_stride_head")


def merge_shape(head_dim: int) -> tuple[int, int]:
    """The smallest (lanes, chunks) build whose row covers ``head_dim``."""
    for lanes, chunks in MERGE_SHAPES:
        if head_dim <= VEC * lanes * chunks:
            return lanes, chunks
    raise ValueError(f"head_dim {head_dim} exceeds the largest supported {MAX_HEAD_DIM}")


def states_in_flight(states: int) -> int:
    """The build for a merge of ``states`` states: the fewest loads in flight that cover a pair."""
    return STATES_IN_FLIGHT[0] if states <= STATES_IN_FLIGHT[0] else STATES_IN_FLIGHT[-1]


def merge_entry(dtype: str, lanes: int, chunks: int, in_flight: int) -> str:
    return f"cutefi_merge_states_{dtype}_l{lanes}x{chunks}_s{in_flight}"


def merge_contract(dtype: str, lanes: int, chunks: int, in_flight: int) -> LaunchContract:
    rows_per_cta = MERGE_THREADS // lanes
    return LaunchContract(
        params=(
            *pointers("v", "v_out", dtype=dtype),
            *pointers("s", "s_out", dtype="fp32", align=4),
            Param("mask", "ptr", "u8", 1),
            *scalars("i32", "seq_len", "states", "heads", "head_dim", "has_mask", "write_lse"),
            *scalars("i64", *MERGE_STRIDES),
        ),
        block=(MERGE_THREADS, 1, 1),
        grid=lambda p: (p["seq_len"], ceil_div(p["heads"], rows_per_cta), 1),
        sample={"seq_len": 1000, "states": 2, "heads": 32, "head_dim": VEC * lanes * chunks, "has_mask": 0,
                "write_lse": 1, **{name: 1 for name in MERGE_STRIDES}},
        min_ctas_per_sm=MERGE_CTAS_PER_SM.get(in_flight, 0),
        entry=merge_entry(dtype, lanes, chunks, in_flight),
        pdl=True,
    )


MERGE_SPECS = {
    (dtype, lanes, chunks, in_flight): KernelSpec.make(
        "attention.merge_states", "cute", "cutefi.attention.merge_kernel:MergeStatesKernel",
        "cutefi.attention.launch:merge_contract", Family.SIMT, dtype=dtype, lanes=lanes, chunks=chunks,
        in_flight=in_flight,
    )
    for dtype in DTYPES for lanes, chunks in MERGE_SHAPES for in_flight in STATES_IN_FLIGHT
}
register(*MERGE_SPECS.values())


# ---- append_paged_kv_cache / append_paged_mla_kv_cache -----------------------------------------
# Writes appended K and V rows into their pages: token t of request b = batch_indices[t] at
# position p = positions[t] goes to page kv_indices[kv_indptr[b] + p // page_size], entry
# p % page_size (cute/paged.py). Rows move as bytes, 16 at a time (any element type, FP8 caches
# included), so one build serves every dtype; a token whose page slot or page id is out of
# range writes nothing. The two row sets (K and V; MLA: the compressed kv and its rope part,
# one head) have their own widths (``*_row_chunks``, 16-byte pieces) and strides, in bytes
# (multiples of 16, the API checks): appended (token, head), cache (page, entry, head) for
# either layout (NHD or HND is only which stride is which).
# Launch: two builds of one kernel (APPEND_SPECS), CTAs of 128 threads, 16 bytes a thread:
# - by rows (small appends): a CTA per (token, 128 pieces of a row set, K or V): grid = (nnz,
#   ceil(row_pieces / 128), 2), row_pieces = heads x the wider set's row chunks; each thread
#   looks up its token's page;
# - by pieces (large ones): the appended pieces form one run, token by token: a token's K pieces,
#   then its V pieces (``token_pieces`` = heads x (k_row_chunks + v_row_chunks)). A CTA takes
#   ``pieces_per_cta`` consecutive pieces (a multiple of 128, at most APPEND_ITEMS: APPEND_UNROLL
#   loads a thread before its stores; ``append_pieces_per_cta``) and looks up each of their
#   tokens' pages once; grid = ceil(nnz x token_pieces / pieces_per_cta). Rows of any width
#   keep every thread busy (MLA's 1024- and 128-byte rows left most of a by-rows CTA idle).
# ``append_by_rows`` picks the build: by rows while its grid fits APPEND_CTAS_PER_SM CTAs an SM
# (its shorter path is ~0.2 us faster there, measured on the H100, session 48).
APPEND_THREADS = 128
APPEND_UNROLL = 4
APPEND_ITEMS = APPEND_THREADS * APPEND_UNROLL  # the most pieces a CTA takes
APPEND_TOKENS_MAX = APPEND_ITEMS // 2 + 1  # tokens a CTA's pieces touch (a token has >= 2 pieces)
# CTAs an SM before a CTA takes more pieces (measured on the H100, session 48: 128 pieces a CTA
# is fastest up to ~75K pieces, 256 at 150K-520K, 384-512 from 300K-1M on)
APPEND_CTAS_PER_SM = 8
CHUNK_BYTES = 16
APPEND_STRIDES = tuple(f"{name}_stride_{d}" for name, dims in (("key", ("token", "head")), ("value", ("token", "head")),
                                                               ("k_cache", ("page", "entry", "head")),
                                                               ("v_cache", ("page", "entry", "head")))
                       for d in dims)


APPEND_DIVISORS = ("token_pieces", "k_row_chunks", "v_row_chunks")


def append_divisors(sizes: dict[str, int]) -> dict[str, int]:
    """The kernel's ``*_mul`` / ``*_shift`` of its divisors (``sizes``' values of APPEND_DIVISORS)."""
    out = {}
    for name in APPEND_DIVISORS:
        out[f"{name}_mul"], out[f"{name}_shift"] = fastdiv.magic(max(1, sizes[name]))  # (0: nothing to divide)
    return out


def append_contract(by_rows: bool = False) -> LaunchContract:
    return LaunchContract(
        params=(
            *pointers("key", "value", "k_cache", "v_cache", dtype="u8"),
            *pointers("batch_indices", "positions", "kv_indices", "kv_indptr", dtype="i32", align=4),
            *scalars("i32", "nnz", "heads", "k_row_chunks", "v_row_chunks", "token_pieces", "row_pieces",
                     "pieces_per_cta", "page_size", "batch", "num_indices", "num_pages"),
            *scalars("i64", *APPEND_STRIDES),
            # the three divisors as multiplies (jit/fastdiv.py: append_divisors)
            *scalars("i64", *(f"{name}_mul" for name in APPEND_DIVISORS)),
            *scalars("i32", *(f"{name}_shift" for name in APPEND_DIVISORS)),
        ),
        block=(APPEND_THREADS, 1, 1),
        grid=_rows_grid if by_rows else _pieces_grid,
        sample={"nnz": 64, "heads": 8, "k_row_chunks": 16, "v_row_chunks": 16, "token_pieces": 256, "row_pieces": 128,
                "pieces_per_cta": 512, "page_size": 16, "batch": 4,
                "num_indices": 100, "num_pages": 100, **{name: 16 for name in APPEND_STRIDES},
                **append_divisors({"token_pieces": 256, "k_row_chunks": 16, "v_row_chunks": 16})},
        entry="cutefi_append_paged_kv_cache",
        pdl=True,
    )


def _rows_grid(p: dict) -> tuple[int, int, int]:
    return p["nnz"], ceil_div(p["row_pieces"], APPEND_THREADS), 2


def _pieces_grid(p: dict) -> tuple[int, int, int]:
    return ceil_div(p["nnz"] * p["token_pieces"], p["pieces_per_cta"]), 1, 1


def append_by_rows(sizes: dict[str, int], sms: int) -> bool:
    """The by-rows build for an append whose by-rows grid has at most APPEND_CTAS_PER_SM CTAs an SM."""
    rows_grid = _rows_grid(sizes)
    return rows_grid[0] * rows_grid[1] * rows_grid[2] <= APPEND_CTAS_PER_SM * sms


def append_pieces_per_cta(pieces: int, sms: int) -> int:
    """Pieces a CTA takes, of ``pieces`` in all: one a thread (128) while the grid gives each SM
    at most APPEND_CTAS_PER_SM CTAs, then as many a thread (up to APPEND_UNROLL) as keep it
    there: small appends get many CTAs, large ones several loads of each thread in flight."""
    per_thread = ceil_div(pieces, APPEND_CTAS_PER_SM * sms * APPEND_THREADS)
    return APPEND_THREADS * max(1, min(APPEND_UNROLL, per_thread))


APPEND_SPECS = {by_rows: KernelSpec.make("attention.append_paged_kv_cache", "cute",
                                         "cutefi.attention.append_kernel:AppendPagedKvKernel",
                                         "cutefi.attention.launch:append_contract", Family.SIMT, by_rows=by_rows)
                for by_rows in (True, False)}
register(*APPEND_SPECS.values())


# ---- decode attention ------------------------------------------------------------------------
DECODE_HEAD_DIMS = (64, 128, 256)
DECODE_WORK_ROWS = 7  # rows of a decode plan's work array (``decode_plan.py``)
DECODE_STRIDES = ("q_stride_batch", "q_stride_head", "cache_stride_page", "cache_stride_entry",
                  "cache_stride_head", "out_stride_batch", "out_stride_head", "lse_stride_batch")


# One CTA: one work item, up to 16 q heads of one kv head as the M rows of m16n8k16 MMAs
# (S = Q·K^T with tokens as N, then O = P·V), so every group size costs the same per KV byte.
# Four warps each stream their own 16-token tiles (tile j of the item goes to warp j % 4)
# through a private ring of ``stages`` K/V buffers (cp.async, addressed through the page table,
# pieces of a row XOR-swizzled for ldmatrix: ``kv_swizzle``), with their own online softmax; the warps' states are merged
# through shared memory at the end. A split request's CTAs write partial states (``tmp_v``,
# ``tmp_s``: rows ``state_indptr[request] ..`` of the request) and count themselves in
# ``counters[request * kv_heads * row_blocks + the CTA's (kv head, row block)]`` (int32, zero
# between launches): the last to arrive merges the request's partial states for its q heads
# and writes the output (``decode_mma_kernel._merge_parts``), no merge kernel after it.
# Narrow builds may pack 2^pack_shift kv heads into a CTA (their q heads, up to 8, in one
# tile's N; tile row r is token r >> pack_shift of the CTA's kv head r % 2^pack_shift): a
# token's rows of those heads, adjacent in an NHD page, are read by one load (DRAM locality
# for 128-byte FP8 rows); ``kv_heads`` is then the CTAs an item takes.
# ``tile_pages``/``tile_rem``: a step of 4 tiles (64 >> pack_shift tokens)
# in pages and entries. Launch: grid = (items * kv_heads * row_blocks), block = 128, where
# row_blocks = ceil(group / 16): the CTAs of one item (its kv heads) are adjacent in launch
# order, so an NHD page's rows are read by CTAs running at the same time (DRAM locality).
MMA_DECODE_WARPS = 4
MMA_DECODE_ROWS = 16  # q heads a CTA holds (the MMA's M)
MMA_DECODE_TILE = 16  # tokens a warp takes at a time
# ``rope`` builds (pos_encoding_mode="ROPE_LLAMA"): q (at position length - 1, the work item's row 5)
# and each K row (at its token index) are rotated in fp32 inside the kernel, dims i and
# i + head_dim / 2 by the angle position * rope_rcp_scale * 2^(i * rope_log2_step), where
# rope_log2_step = -2 log2(rope_theta) / head_dim (FlashInfer's Llama RoPE).

# KV caches the kernel reads: q's own 16-bit type, or FP8 widened to f16 in registers after
# ldmatrix (``cute/fp8_widen.py``; each FP8 ldmatrix lane gets 4 codes that are whole MMA operand
# pairs once q's head dimensions are permuted to match, see the kernel), with f16 MMAs
KV_FP8 = ("fp8e4m3", "fp8e5m2")
# Rings a build may have: (stages, CTAs an SM asked of the register allocator via
# .minnctapersm). A warp's ring keeps stages - 1 tiles in flight while one is used. The plan
# takes the option with the most CTAs resident on the device (shared memory: 227 KB on
# sm_90/sm_100, 163 KB on sm_80, 99 KB on sm_86/89/120), then the deepest ring: on the H200,
# head_dim 64 ran 2-6% faster at 4 CTAs x 3 stages than at 3 x 4, and FP8 head_dim 128 up to
# 20% slower at 3 CTAs (165 registers) x 4 stages than at 2 x 5 (benchmarks/results/
# decode_rings_h200.txt). FP8 tiles are half the bytes: deeper rings for the same bytes in flight.
MMA_DECODE_RINGS = {
    (False, 64): ((4, 4), (3, 4)), (False, 128): ((3, 2), (2, 2)), (False, 256): ((2, 1), (1, 1)),
    (True, 64): ((6, 4),), (True, 128): ((5, 2), (4, 2)), (True, 256): ((3, 1), (2, 1)),
}
# Narrow builds (``decode_narrow_kernel.py``, GQA groups up to 8 without RoPE) swap the MMAs'
# roles: the tile's 16 tokens are M and up to 8 q heads N (S^T = K·Q^T, O^T = V^T·P^T). A group
# of 4 then pads 8 MMA columns instead of 16 rows: half the MMAs, softmax and O registers (FP8
# head_dim 128: 148 registers, not 210). Same rings: on the H200 they ran 0.3-2.4% faster than
# the wide builds over 22 shapes and 3 head dims; more CTAs an SM for every batch did not pay
# (FP8 head_dim 128 at 3 x 4 or 4 x 3 stages, FP8 head_dim 256 at 2 CTAs:
# decode_narrow_vs_wide_h200_session27.json, decode_narrow_rings_h200_session27.txt), except
# as below.
MMA_DECODE_NARROW_ROWS = 8  # q heads a narrow CTA holds (the MMA's N)
# Narrow rings with more CTAs an SM for batches whose CTAs fill them (``decode.plan``): FP8
# head_dim 128 at 4 CTAs x 3 stages (one tile a step: 108 registers). On the H200 it ran
# 1.4% faster at 64 x 4096, 3% at 100 x 4096, 6.6% at 128 x 1024, and 2.5-4% slower than 2 x 5
# where the batch fills fewer slots and the plan splits (8 x 8192, 32 x 4096, 1 x 131072)
# (decode_full_batch_ring_h200_session27.json)
MMA_DECODE_FULL_BATCH_RINGS = {(True, 128): (3, 4)}


def kv_bytes(kv_dtype: str) -> int:
    return 1 if kv_dtype in KV_FP8 else 2


def mma_decode_rings(kv_dtype: str, head_dim: int, narrow: bool = False) -> tuple[tuple[int, int], ...]:
    """A build's (stages, CTAs an SM) options (``MMA_DECODE_RINGS``; narrow builds also the
    full-batch ring, ``MMA_DECODE_FULL_BATCH_RINGS``)."""
    rings = MMA_DECODE_RINGS[kv_dtype in KV_FP8, head_dim]
    full = MMA_DECODE_FULL_BATCH_RINGS.get((kv_dtype in KV_FP8, head_dim))
    return rings + (full,) if narrow and full else rings


def mma_decode_stage_options(kv_dtype: str, head_dim: int, narrow: bool = False) -> tuple[int, ...]:
    return tuple(stages for stages, _ in mma_decode_rings(kv_dtype, head_dim, narrow))


def mma_decode_min_ctas(kv_dtype: str, head_dim: int, stages: int, narrow: bool = False) -> int:
    """The CTAs an SM a build's registers are capped for (``.minnctapersm``)."""
    return dict(mma_decode_rings(kv_dtype, head_dim, narrow))[stages]


def mma_decode_rows(narrow: bool) -> int:
    """q heads a CTA holds: a kv head's group takes ceil(group / rows) CTAs."""
    return MMA_DECODE_NARROW_ROWS if narrow else MMA_DECODE_ROWS


def mma_decode_step() -> int:
    """Tokens the four warps advance by, together, per pipeline step."""
    return MMA_DECODE_WARPS * MMA_DECODE_TILE


def kv_swizzle(chunks: int) -> tuple[int, int]:
    """(bits, shift) of the XOR swizzle of a K/V tile whose rows hold ``chunks`` 16-byte pieces:
    piece ``c`` of row ``r`` is stored at piece ``c ^ (r % 8)`` (rows of 8+ pieces) or ``c ^ (r //
    2 % 4)`` (4 pieces: two rows a 128-byte line), so ldmatrix's 8 rows at one column hit 8
    distinct bank groups and a global 32-byte sector lands in one aligned 32 bytes of smem."""
    log_chunks = chunks.bit_length() - 1
    if chunks < 4 or 1 << log_chunks != chunks:
        raise ValueError(f"K/V rows of {chunks} 16-byte pieces are not supported (a power of two >= 4)")
    return min(3, log_chunks), max(3, log_chunks)


def mma_decode_smem_bytes(head_dim: int, stages: int, kv_dtype: str = "bf16") -> int:
    kv_row = head_dim * kv_bytes(kv_dtype)  # dense rows, swizzled pieces (kv_swizzle)
    ring = MMA_DECODE_WARPS * stages * 2 * MMA_DECODE_TILE * kv_row
    return ring + MMA_DECODE_ROWS * (head_dim * 2 + 16)  # + the Q tile


def mma_decode_pair_tiles(kv_dtype: str, stages: int) -> bool:
    """Whether a build's warps take two tiles a step (independent S chains, one softmax round
    for 32 tokens; stages - 2 tiles in flight during a wait): FP8 rings of 4+ stages, where
    a tile is half the bytes of a 16-bit one for the same instructions. On the H200 that was
    1-4% faster for FP8 head_dim 128 and no faster for bf16 (decode_pair_tiles_h200.txt)."""
    return kv_dtype in KV_FP8 and stages >= 4


def mma_decode_entry(dtype: str, kv_dtype: str, head_dim: int, stages: int, rope: bool, software_fp8: bool,
                     narrow: bool = False) -> str:
    kv = "" if kv_dtype == dtype else f"_kv{kv_dtype[3:]}"
    return (f"cutefi_batch_decode_mma{'_narrow' if narrow else ''}_{dtype}{kv}_d{head_dim}_s{stages}"
            f"{'_rope' if rope else ''}{'_sw' if software_fp8 else ''}")


def mma_decode_contract(dtype: str, kv_dtype: str, head_dim: int, stages: int, rope: bool = False,
                        software_fp8: bool = False, narrow: bool = False) -> LaunchContract:
    return LaunchContract(
        params=(
            *pointers("q", "out", "tmp_v", dtype=dtype),
            *pointers("k_cache", "v_cache", dtype=kv_dtype),
            *pointers("lse", "tmp_s", "sinks", dtype="fp32", align=4),
            *pointers("work", "kv_indices", "state_indptr", "counters", dtype="i32", align=4),
            *scalars("i32", "items", "kv_heads", "group", "row_blocks", "num_qo_heads", "page_size", "tile_pages",
                     "tile_rem", "num_pages", "write_lse", "has_sinks", "pack_shift"),
            *scalars("f32", "q_scale", "cap_scale", "out_scale", "rope_rcp_scale", "rope_log2_step"),
            *scalars("i64", *DECODE_STRIDES),
        ),
        block=(MMA_DECODE_WARPS * 32, 1, 1),
        grid=lambda p: (p["items"] * p["kv_heads"] * p["row_blocks"], 1, 1),
        sample={"items": 64, "kv_heads": 8, "group": 4, "row_blocks": 1, "num_qo_heads": 32, "page_size": 16,
                "tile_pages": 4, "tile_rem": 0, "num_pages": 1000, "write_lse": 1, "has_sinks": 0, "pack_shift": 0,
                "q_scale": 0.1, "cap_scale": 0.0, "out_scale": 1.0, "rope_rcp_scale": 1.0, "rope_log2_step": -0.2, **{name: 16 for name in DECODE_STRIDES}},
        smem_bytes=mma_decode_smem_bytes(head_dim, stages, kv_dtype),
        min_ctas_per_sm=mma_decode_min_ctas(kv_dtype, head_dim, stages, narrow),
        entry=mma_decode_entry(dtype, kv_dtype, head_dim, stages, rope, software_fp8, narrow),
        pdl=True,
    )


MMA_DECODE_SPECS = {
    (dtype, kv_dtype, head_dim, stages, rope): KernelSpec.make(
        "attention.batch_decode_mma", "cute", "cutefi.attention.decode_mma_kernel:BatchDecodeMmaKernel",
        "cutefi.attention.launch:mma_decode_contract", Family.MMA_SYNC, dtype=dtype, kv_dtype=kv_dtype,
        head_dim=head_dim, stages=stages, rope=rope,
    )
    for dtype in DTYPES for kv_dtype in (dtype, *KV_FP8) for head_dim in DECODE_HEAD_DIMS
    for stages in mma_decode_stage_options(kv_dtype, head_dim) for rope in (False, True)
}
# a test build: sm_80/86's integer FP8 widening, run where the hardware converts (the H200's tests)
MMA_DECODE_SOFTWARE_FP8_SPEC = KernelSpec.make(
    "attention.batch_decode_mma", "cute", "cutefi.attention.decode_mma_kernel:BatchDecodeMmaKernel",
    "cutefi.attention.launch:mma_decode_contract", Family.MMA_SYNC, dtype="bf16", kv_dtype="fp8e4m3", head_dim=128,
    stages=4, rope=False, software_fp8=True,
)


def mma_decode_narrow_contract(dtype: str, kv_dtype: str, head_dim: int, stages: int) -> LaunchContract:
    return mma_decode_contract(dtype, kv_dtype, head_dim, stages, narrow=True)


MMA_DECODE_NARROW_SPECS = {
    (dtype, kv_dtype, head_dim, stages): KernelSpec.make(
        "attention.batch_decode_mma_narrow", "cute", "cutefi.attention.decode_narrow_kernel:BatchDecodeNarrowKernel",
        "cutefi.attention.launch:mma_decode_narrow_contract", Family.MMA_SYNC, dtype=dtype, kv_dtype=kv_dtype,
        head_dim=head_dim, stages=stages,
    )
    for dtype in DTYPES for kv_dtype in (dtype, *KV_FP8) for head_dim in DECODE_HEAD_DIMS
    for stages in mma_decode_stage_options(kv_dtype, head_dim, narrow=True)
}
register(*MMA_DECODE_SPECS.values(), MMA_DECODE_SOFTWARE_FP8_SPEC, *MMA_DECODE_NARROW_SPECS.values())
