"""Contracts, configurations and specs of the dense GEMM family (pure Python; kernels:
``sm90_kernel.py`` and ``skinny_kernel.py``).

``C[l] = A[l] @ B[l] (+ bias)`` with A ``[L, M, K]`` row-major, B either K-major (the
transposed view of an ``[N, K]`` nn.Linear weight, passed to the loader as that ``[L, N, K]``
row-major tensor) or N-major (a row-major ``[L, K, N]``), C ``[L, M, N]`` row-major.

``gemm.sm90`` (Hopper, wgmma): one producer warpgroup (a single warp issues TMA loads into a
``stages``-deep ring) and two consumer warpgroups that split a ``tile_m`` x ``tile_n`` tile
by rows; persistent CTAs walk the output tiles in a grouped raster (``group_m`` M tiles per
group); the epilogue converts the fp32 accumulators to the output dtype, adds the bias and
stores through shared memory with TMA. Split-K (``splits`` > 1, for problems of less than a
wave of tiles, e.g. decode-sized M): each tile's K range is cut into ``splits`` work units;
each unit writes its fp32 partial tile to ``workspace`` and counts itself in the tile's
``counters`` entry, and the last to arrive sums the partials, stores the tile and resets the
counter to zero; or, in the ``cluster_k`` builds, the two CTAs of a cluster take the two
splits of a tile and each sums and stores half of it, the partials crossing through
distributed shared memory (:mod:`cutefi.cute.cluster_split_k`). All sizes are runtime
arguments: the loader encodes
the descriptors from the real tensors and the kernel reads M, N, K, L from scalars, so one
build serves every shape.

``gemm.skinny`` (every mma.sync target, decode-sized M <= 16 with a K-major B): the weight
streams from DRAM straight into mma.sync A fragments (its rows are the MMA's M, the tokens its
N: "swap AB"); a CTA of ``warps`` warps owns ``16 * row_tiles * row_groups`` weight rows; the
warps of a row group (and ``splits`` CTAs, summed like the Hopper split-K) take interleaved K
steps of ``32 * unroll``.
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import dtypes
from ..jit.contract import LaunchContract, Param, TmaRecipe, ceil_div, pointers, scalars
from ..jit.policy import Family
from ..jit.registry import register
from ..jit.spec import KernelSpec

DTYPES = ("bf16", "fp16")
FP8_DTYPES = ("fp8e4m3", "fp8e5m2")  # K-major operands, per-tensor scales (Hopper; mma.sync from sm_89)
OUT_DTYPES = ("bf16", "fp16")
# the 16-bit dense builds also write fp32 (FlashInfer's mm_bf16 / bmm_bf16 out_dtype=torch.float32:
# the fp32 sums stored as they are); FP8, block-scaled and grouped builds write 16 bits only
DENSE_OUT_DTYPES = (*OUT_DTYPES, "fp32")
B_MAJORS = ("k", "n")  # k: the transposed view of an [N, K] weight; n: a row-major [K, N]
TILE_K = 64           # 128 bytes of a 16-bit row: one 128-byte swizzle atom (FP8: 128 elements)
EPI_ROW_BYTES = 64    # bytes of an output row the epilogue stores per TMA store (64-byte swizzle rows)
EPI_TILE_N = 32       # its columns at 16 bits (epi_tile_n)
EPI_STAGES = 4
WARPGROUP = 128
SM90_THREADS = 3 * WARPGROUP  # producer + two consumers
SMEM_LIMIT = 227 * 1024       # Hopper's opt-in limit per CTA
BARRIER_BYTES = 1024          # the tiles start on a 1 KiB boundary (128-byte swizzle)
HEAD_FLAG_BYTES = 64          # the kernel's mbarriers and flags besides the ring's, with alignment pads
# the static shape each TMA tensor is compiled against ([L, rows, cols]): at least two tiles
# per mode so no tile index folds away; the kernel only reads the descriptors and scalars
PLACEHOLDER = (2, 4096, 4096)
ALIGN_ELEMS = 8  # TMA: every row stride (and base) a multiple of 16 bytes (16 FP8 elements)


def epi_tile_n(out_dtype: str) -> int:
    """Columns of an epilogue piece: 64 bytes of a row at any output type, so an fp32 output's
    store ring takes a 16-bit one's shared memory and the main loop keeps its stages (pieces of
    32 fp32 columns cost the 224- and 256-wide tiles a stage: 256 x 14336 x 4096 ran 24% slower
    than with bf16 out, H200)."""
    return EPI_ROW_BYTES * 8 // dtypes.bits(out_dtype)


def tile_k(dtype: str) -> int:
    """K of a ring stage: 128 bytes of a row (64 16-bit or 128 FP8 elements)."""
    return 1024 // dtypes.bits(dtype)


def align_elems(dtype: str) -> int:
    return 128 // dtypes.bits(dtype)


@dataclass(frozen=True)
class Sm90Config:
    """A Hopper build: CTA tile, cluster along M (B multicast to ``cluster_m`` CTAs).

    ``swap``: the build multiplies the weight by the tokens ("swap AB", for a few tokens): its
    A is the [N, K] weight (tile_m of its rows), its B the tokens (``tile_n`` of them, 16 to
    256), and the epilogue stores the transposed tile straight from registers into ``out``.

    ``cluster_k``: split-K inside a cluster: the ``cluster_k`` CTAs of a cluster take the K
    splits of one tile and sum their partials through distributed shared memory (each CTA
    sums and stores 1/cluster_k of the tile), with no workspace, counters or global round
    trips. One work unit a CTA (the plan launches ``tiles * cluster_k`` CTAs).

    ``cluster_n`` (swap builds): the ``cluster_n`` CTAs of a cluster hold neighbouring token
    tiles of one weight tile, and A (the weight) is multicast to them: each loads
    1/cluster_n of its rows, so the weight leaves L2 once however many token tiles read it
    (cuBLAS's plan for a few hundred tokens on Hopper).
    """

    tile_m: int = 128
    tile_n: int = 256
    cluster_m: int = 1
    swap: bool = False
    cluster_k: int = 1
    cluster_n: int = 1

    def __post_init__(self) -> None:
        if self.tile_m not in (64, 128) or (self.tile_m == 64 and not self.swap):
            raise ValueError(f"tile_m must be 128 (two consumer warpgroups of 64 rows) or, in a swap build, 64 "
                             f"(the warpgroups take half the tokens each), got {self.tile_m}")
        # (192: the block-scaled one-slice tile, two weight blocks wide; 224: 16-bit, K-major B,
        # for weights of 7 * 2^k rows, e.g. 14336 and 28672, that 256-row tiles fill badly)
        widths = ((32, 64, 128) if self.tile_m == 64 else (16, 32, 64, 128, 256)) if self.swap \
            else (64, 128, 192, 224, 256)
        if self.tile_n not in widths:
            raise ValueError(f"tile_n must be one of {widths}, got {self.tile_n}")
        if self.cluster_m not in (1, 2) or (self.swap and self.cluster_m != 1):
            raise ValueError(f"cluster_m must be 1 or 2 (1 with swap), got {self.cluster_m}")
        if self.cluster_k not in (1, 2, 4) or (self.cluster_k > 1 and self.cluster_m != 1):
            raise ValueError(f"cluster_k must be 1, 2 or 4 (with cluster_m 1), got {self.cluster_k}")
        if self.cluster_n not in (1, 2) or (self.cluster_n > 1 and (not self.swap or self.cluster_k > 1)):
            raise ValueError(f"cluster_n must be 1 or 2 (2: a swap build without cluster_k), got {self.cluster_n}")
        # (a CTA stores whole epilogue pieces of its share of the tile)
        if self.cluster_k > 1 and not self.swap and self.tile_n // EPI_TILE_N % self.cluster_k:
            raise ValueError(f"cluster_k={self.cluster_k} needs tile_n a multiple of {EPI_TILE_N * self.cluster_k}")

    @property
    def name(self) -> str:
        return (f"{self.tile_m}x{self.tile_n}c{self.cluster_m}" + (f"k{self.cluster_k}" if self.cluster_k > 1 else "")
                + (f"n{self.cluster_n}" if self.cluster_n > 1 else "")
                + ("t" if self.swap else ""))

    @property
    def exchange_elems(self) -> int:
        """fp32 a CTA receives in a cluster_k meeting: the other CTAs' partials of its share."""
        return self.tile_m * self.tile_n * (self.cluster_k - 1) // self.cluster_k

    def scale_slot(self, block_scaled: bool, grouped: bool = False, out_dtype: str = "bf16") -> int:
        """fp32 a ring stage holds for its scales (the producer stages them with the tiles,
        ``cute/staged_scales.py``): a scale per token of the tile (swapped: its columns, else its
        rows) and two weight-block scales, padded to 16 bytes; the swapped builds and the
        128 x 256 tiles (their ring keeps its four stages: 1-3% faster than loading them in
        the consumers on the H200, session 32). 0 for the others (the 192-wide tiles ran 2-6%
        slower with them; the 128 x 128 ones lose a stage; the grouped row form), whose
        consumers load each step's scales a step ahead (``cute/block_scale.py``). The grouped
        swapped builds stage them, as the dense swapped ones."""
        if not block_scaled or (grouped and not self.swap) or not (self.swap or self.tile_n == 256):
            return 0
        return (self.tile_n if self.swap else self.tile_m) + 4

    def tile_bytes(self) -> int:
        """A ring stage's A and B tiles: a 128-byte row of K per tile row."""
        return (self.tile_m + self.tile_n) * 128

    def epi_bytes(self, out_dtype: str, grouped: bool = False) -> int:
        if self.swap:  # (stored from registers)
            return 0
        return self.tile_m * EPI_ROW_BYTES * EPI_STAGES

    def head_bytes(self, stages: int, grouped: bool, slot: int) -> int:
        """Shared memory before the tiles (which start on a 1 KiB boundary): the ring's and the
        kernel's barriers and flags, a grouped build's segment prefix, the cluster exchange,
        ``stages`` scale slots of ``slot`` fp32."""
        prefix = 4 * (MAX_GROUPS + 1) if grouped else 4
        head = HEAD_FLAG_BYTES + 16 * stages + prefix + 4 * max(self.exchange_elems, 4) + 4 * max(1, stages * slot)
        return -(-head // BARRIER_BYTES) * BARRIER_BYTES

    def k_tiles_a_stage(self, dtype: str, block_scaled: bool = False, grouped: bool = False) -> int:
        """K tiles (128-byte rows) a ring stage holds: two for the 16-bit dense swapped 64-row
        tiles (half the ring's barrier waits, releases and bookkeeping a byte; H200, alternated
        processes, gemm_paired_k_stages_h200_session38.json: 64 x 4096 x 4096 8.96 -> 8.64 µs,
        64x32c1n2t there 13.25 -> 10.5, 17 x 128 x 8200 22.4 -> 17.2), else one: the 128-row
        swapped tiles gained 0-1.5% where they take one wave but lost 8-12% on the 28672-row
        weights they cross in 1.7 waves (16 x 28672 x 8192 110.4 -> 119.4), and their multicast
        pair 13% (its ring falls to four stages). FP8 was not measured."""
        return 2 if (self.swap and self.tile_m == 64 and not block_scaled and not grouped and dtype in DTYPES) else 1

    def _bytes(self, stages: int, out_dtype: str, grouped: bool, slot: int, pair: int = 1) -> int:
        return self.head_bytes(stages, grouped, slot) + stages * pair * self.tile_bytes() \
            + self.epi_bytes(out_dtype, grouped)

    def _deepest(self, out_dtype: str, grouped: bool, slot: int, pair: int = 1) -> int:
        """The deepest ring (up to ``MAX_STAGES``) that fits ``SMEM_LIMIT``."""
        return next(s for s in range(MAX_STAGES, 0, -1)
                    if self._bytes(s, out_dtype, grouped, slot, pair) <= SMEM_LIMIT)

    def stages(self, dtype: str, out_dtype: str, grouped: bool = False, block_scaled: bool = False) -> int:
        return self._deepest(out_dtype, grouped, self.scale_slot(block_scaled, grouped, out_dtype),
                             self.k_tiles_a_stage(dtype, block_scaled, grouped))

    def smem_bytes(self, dtype: str, out_dtype: str, grouped: bool = False, block_scaled: bool = False) -> int:
        return self._bytes(self.stages(dtype, out_dtype, grouped, block_scaled), out_dtype, grouped,
                           self.scale_slot(block_scaled, grouped, out_dtype),
                           self.k_tiles_a_stage(dtype, block_scaled, grouped))


CONFIGS = (Sm90Config(128, 256, 1), Sm90Config(128, 256, 2), Sm90Config(128, 224, 1), Sm90Config(128, 128, 1),
           Sm90Config(128, 64, 1),
           *(Sm90Config(128, width, 1, True) for width in (16, 32, 64, 128, 256)),
           # split-K in clusters of two (clusters of four measured 1.5-3x slower at 128 CTAs: an
           # H200 GPC holds fewer than 32 of them, so the grid takes two waves)
           *(Sm90Config(128, width, 1, True, 2) for width in (16, 32, 64)), Sm90Config(128, 128, 1, False, 2),
           # the weight multicast to two neighbouring token tiles
           *(Sm90Config(128, width, 1, True, 1, 2) for width in (32, 64)),
           # 64 weight rows a tile (twice the CTAs on a weight): K in two in a cluster, or the
           # weight multicast to two token tiles
           Sm90Config(64, 64, 1, True, 2), Sm90Config(64, 32, 1, True, 2), Sm90Config(64, 32, 1, True, 1, 2))
MAX_STAGES = 12
MAX_GROUPS = 1024  # segments of a grouped launch (their tile prefix sits in shared memory)


def tiles(m: int, n: int, config: Sm90Config) -> tuple[int, int]:
    """Output tiles along M (rounded up to whole clusters) and N."""
    tiles_m = ceil_div(ceil_div(m, config.tile_m), config.cluster_m) * config.cluster_m
    return tiles_m, ceil_div(ceil_div(n, config.tile_n), config.cluster_n) * config.cluster_n


def _swizzle(row_bytes: int) -> str:
    if row_bytes not in (32, 64, 128):
        raise ValueError(f"a shared-memory row must be 32, 64 or 128 bytes, got {row_bytes}")
    return f"{row_bytes}B"


# L2 cache policies of TMA loads (CUTLASS's CacheHintSm90 values)
EVICT_NORMAL = 0x1000000000000000
EVICT_FIRST = 0x12F0000000000000


def streams_weight(config: Sm90Config, block_scaled: bool, grouped: bool) -> bool:
    """Whether a build streams one weight through its swapped tiles (a few tokens): it then
    takes the weight loads' L2 cache policy and a K rotation at launch (``sm90_kernel``)."""
    return config.swap and not block_scaled and not grouped


def sm90_contract(dtype: str, out_dtype: str, b_major: str, tile_m: int, tile_n: int,
                  cluster_m: int, swap: bool = False, cluster_k: int = 1, block_scaled: bool = False,
                  grouped: bool = False, cluster_n: int = 1, b_dtype: str | None = None) -> LaunchContract:
    config = Sm90Config(tile_m, tile_n, cluster_m, swap, cluster_k, cluster_n)
    if grouped and config not in GROUPED_CONFIGS + (GROUPED_SWAP_CONFIGS if block_scaled else ()):
        raise ValueError(f"grouped GEMM builds are {', '.join(c.name for c in GROUPED_CONFIGS)} (FP8 block-scaled "
                         f"also {', '.join(c.name for c in GROUPED_SWAP_CONFIGS)}); got {config.name}")
    if block_scaled and (dtype not in FP8_DTYPES or config not in BLOCK_SCALED_CONFIGS):
        raise ValueError(f"block-scaled GEMM builds are FP8 {', '.join(c.name for c in BLOCK_SCALED_CONFIGS)}; "
                         f"got {dtype} {config.name}")
    elem = dtypes.bits(dtype) // 8
    # B's box: a multicast CTA loads 1/cluster_m of the tile; an N-major tile is loaded in
    # 64-column pieces (one 128-byte swizzle atom wide)
    b_rows = tile_n // cluster_m
    k_box = tile_k(dtype)
    b_box = (k_box, b_rows, 1) if b_major == "k" else (128 // elem, k_box, 1)
    tma = (
        TmaRecipe("a", dtype, box=(k_box, tile_m // cluster_n, 1), placeholder=PLACEHOLDER,
                  swizzle=_swizzle(k_box * elem), l2_promotion="256B"),
        TmaRecipe("b", b_dtype or dtype, box=b_box, placeholder=PLACEHOLDER,
                  swizzle="128B", l2_promotion="256B"),
    )
    if swap:  # the output, transposed: stored from registers through a pointer
        c_params: tuple[Param, ...] = (Param("c", "ptr", out_dtype, dtypes.bits(out_dtype) // 8),)
    else:
        c_params = (Param("c", "tma"),)
        tma += (TmaRecipe("c", out_dtype, box=(epi_tile_n(out_dtype), tile_m, 1), placeholder=PLACEHOLDER,
                          swizzle=_swizzle(EPI_ROW_BYTES)),)
    # FP8: out = scale_a[0] * scale_b[0] * (A @ B), the per-tensor scales read on the device;
    # block_scaled: every 128-element K block of the sums promoted into fp32 registers with
    # scale_a[row // scale_rows, k block] * scale_b[col // 128, k block] (element strides below)
    scales = pointers("scale_a", "scale_b", dtype="fp32", align=4) if dtype in FP8_DTYPES else ()
    if block_scaled:
        scales += scalars("i32", "scale_rows", "sa_row", "sa_k", "sb_col", "sb_k")
    # grouped: segment s is rows [seg_indptr[s], seg_indptr[s + 1]) of A and out, times weight
    # (B's batch entry) weight_indices[s] (each CTA counts the segments' tiles itself);
    # c_rows: out again, for the tiles that cross a segment's end (stored row by row)
    segments = (Param("c_rows", "ptr", out_dtype, 4),
                *pointers("seg_indptr", "weight_indices", dtype="i32", align=4),
                *scalars("i32", "groups"), *(scalars("i32", "sb_batch") if block_scaled else ())) if grouped else ()
    return LaunchContract(
        params=(Param("a", "tma"), Param("b", "tma"), *c_params, *scales, Param("bias", "ptr", dtype, 2),
                Param("workspace", "ptr", "fp32", 16), Param("counters", "ptr", "i32", 4),
                *scalars("i32", "m", "n", "k", "batch", "group_m", "has_bias", "splits", "ctas"),
                *(scalars("i64", "ldc") if swap or grouped else ()), *segments,
                *(scalars("i64", "weight_policy") + scalars("i32", "k_rotation")
                  if streams_weight(config, block_scaled, grouped) else ())),
        block=(SM90_THREADS, 1, 1),
        grid=lambda p: (p["ctas"], 1, 1),
        sample={"m": 4096, "n": 4096, "k": 4096, "batch": 1, "group_m": 8, "has_bias": 0, "splits": 1,
                "ctas": 132, **({"ldc": 4096} if swap or grouped else {}),
                **({"scale_rows": 1, "sa_row": 32, "sa_k": 1, "sb_col": 32, "sb_k": 1} if block_scaled else {}),
                **({"groups": 8, **({"sb_batch": 1024} if block_scaled else {})} if grouped else {}),
                **({"weight_policy": EVICT_NORMAL, "k_rotation": 0} if streams_weight(config, block_scaled, grouped)
                   else {})},
        cluster=(cluster_m * cluster_k * cluster_n, 1, 1),
        smem_bytes=config.smem_bytes(dtype, out_dtype, grouped, block_scaled),
        tma=tma,
        entry=f"cutefi_gemm_sm90_{dtype}_{out_dtype}_{b_major}_{config.name}" + ("_bs" if block_scaled else "")
        + ("_grouped" if grouped else "") + (f"_b{b_dtype}" if b_dtype else ""),
        pdl=True,
    )


def _sm90_spec(dtype: str, out_dtype: str, b_major: str, config: Sm90Config, block_scaled: bool = False,
               grouped: bool = False, b_dtype: str | None = None) -> KernelSpec:
    return KernelSpec.make("gemm.sm90", "cute", "cutefi.gemm.sm90_kernel:GemmSm90",
                           "cutefi.gemm.launch:sm90_contract", Family.WGMMA,
                           dtype=dtype, out_dtype=out_dtype, b_major=b_major, tile_m=config.tile_m,
                           tile_n=config.tile_n, cluster_m=config.cluster_m, swap=config.swap,
                           **({"cluster_k": config.cluster_k} if config.cluster_k > 1 else {}),
                           **({"cluster_n": config.cluster_n} if config.cluster_n > 1 else {}),
                           **({"block_scaled": True} if block_scaled else {}), **({"grouped": True} if grouped else {}),
                           **({"b_dtype": b_dtype} if b_dtype else {}))


SM90_SPECS = {
    (dtype, out_dtype, b_major, config): _sm90_spec(dtype, out_dtype, b_major, config)
    for dtype in DTYPES for out_dtype in DENSE_OUT_DTYPES for b_major in B_MAJORS for config in CONFIGS
    # multicast splits B's box: K-major only; a swapped build's B is the tokens (K-major); an
    # N-major B tile is whole 64-column swizzle atoms (not 224)
    if b_major == "k" or (config.cluster_m == 1 and not config.swap and config.tile_n % 64 == 0)
}
# FP8 (wgmma takes 8-bit operands K-major only): the builds the plan picks without a cluster
# along M (B multicast measured slower at 16 bits)
FP8_CONFIGS = tuple(c for c in CONFIGS if c.cluster_m == 1 and not (c.swap and c.tile_n > 64) and c.tile_n != 224)
SM90_SPECS.update({
    (dtype, out_dtype, "k", config): _sm90_spec(dtype, out_dtype, "k", config)
    for dtype in FP8_DTYPES for out_dtype in OUT_DTYPES for config in FP8_CONFIGS
})
# mixed FP8 formats (e4m3 x e5m2 either way, as FlashInfer's bmm_fp8 takes): keyed by the
# kernel's (A, B) formats (a swapped build's A is the weight)
SM90_SPECS.update({
    ((dtype, b_dtype), out_dtype, "k", config): _sm90_spec(dtype, out_dtype, "k", config, b_dtype=b_dtype)
    for dtype in FP8_DTYPES for b_dtype in FP8_DTYPES if b_dtype != dtype
    for out_dtype in OUT_DTYPES for config in FP8_CONFIGS
})
# FP8 with block scales (DeepSeek-style 1x128 or 128x128 activation groups, 128x128 weight
# blocks): a second fp32 set of accumulators takes each K block's sums (a 256-wide tile in two
# 128-column slices, so the final sums and that set fit the registers; a 192-wide one in one
# slice that spans two weight blocks)
# (swapped builds for a few tokens: the weight's rows fill the tile, no MMA rows wasted)
BLOCK_SCALED_CONFIGS = (Sm90Config(128, 256, 1), Sm90Config(128, 192, 1), Sm90Config(128, 128, 1),
                        Sm90Config(128, 64, 1), Sm90Config(128, 256, 2),
                        Sm90Config(128, 128, 1, False, 2), Sm90Config(128, 32, 1, True), Sm90Config(128, 64, 1, True),
                        Sm90Config(128, 32, 1, True, 2), Sm90Config(128, 64, 1, True, 2))
BLOCK_SCALED_SPECS = {
    (dtype, out_dtype, config): _sm90_spec(dtype, out_dtype, "k", config, block_scaled=True)
    for dtype in FP8_DTYPES for out_dtype in OUT_DTYPES for config in BLOCK_SCALED_CONFIGS
}
# Grouped (segment) GEMM: many row segments of A, each times its own weight, one launch
# (SegmentGEMMWrapper: 16-bit; group_gemm_fp8_nt_groupwise: FP8 block-scaled); no split-K
GROUPED_CONFIGS = (Sm90Config(128, 256, 1), Sm90Config(128, 128, 1))
GROUPED_SPECS = {
    (dtype, out_dtype, b_major, config): _sm90_spec(dtype, out_dtype, b_major, config, grouped=True)
    for dtype in DTYPES for out_dtype in OUT_DTYPES for b_major in B_MAJORS for config in GROUPED_CONFIGS
}
# FP8 experts of a few tokens (decode MoE): the weight as A, an expert's tokens as B in 32- or
# 64-token tiles (cutefi.gemm.sm90_segments: no MMA rows and no 128-row token slab wasted)
GROUPED_SWAP_CONFIGS = (Sm90Config(128, 32, 1, True), Sm90Config(128, 64, 1, True))
GROUPED_SPECS.update({
    (dtype, out_dtype, "k", config): _sm90_spec(dtype, out_dtype, "k", config, block_scaled=True, grouped=True)
    for dtype in FP8_DTYPES for out_dtype in OUT_DTYPES for config in GROUPED_CONFIGS + GROUPED_SWAP_CONFIGS
})
register(*SM90_SPECS.values(), *BLOCK_SCALED_SPECS.values(), *GROUPED_SPECS.values())


# ---- gemm.skinny: decode-sized M on mma.sync ------------------------------------------------
SKINNY_CHUNK_K = 32  # K a lane's two 16-byte loads per row feed: two m16n8k16 MMAs
SKINNY_MAX_M = 16


@dataclass(frozen=True)
class SkinnyConfig:
    """A decode-sized build: ``token_tiles`` n8 tiles of tokens (M <= 8 * token_tiles),
    ``row_tiles`` m16 tiles of weight rows a warp multiplies, ``warps`` a CTA in
    ``row_groups`` groups of rows (the warps of a K step share its tokens through L1; the
    ``warps / row_groups`` of a row group take interleaved K steps), ``unroll`` K chunks of 32
    a warp loads a step (double-buffered: one step in flight while the last one multiplies)."""

    token_tiles: int = 2
    row_tiles: int = 2
    warps: int = 8
    unroll: int = 4
    row_groups: int = 1

    def __post_init__(self) -> None:
        if self.token_tiles not in (1, 2):
            raise ValueError(f"token_tiles must be 1 or 2 (M <= 8 or <= 16), got {self.token_tiles}")
        if self.row_tiles not in (1, 2, 4, 8):
            raise ValueError(f"row_tiles must be 1, 2, 4 or 8, got {self.row_tiles}")
        if self.warps not in (4, 8):
            raise ValueError(f"warps must be 4 or 8, got {self.warps}")
        if self.unroll not in (1, 2, 4, 8):
            raise ValueError(f"unroll must be 1, 2, 4 or 8, got {self.unroll}")
        if self.row_groups not in (1, 2, 4, 8) or self.warps % self.row_groups:
            raise ValueError(f"row_groups must be 1, 2, 4 or 8 and divide warps={self.warps}, got {self.row_groups}")

    @property
    def name(self) -> str:
        return f"t{self.token_tiles}r{self.row_tiles}w{self.warps}u{self.unroll}g{self.row_groups}"

    @property
    def k_groups(self) -> int:
        """Warps of a row group: they split its K steps."""
        return self.warps // self.row_groups

    @property
    def rows(self) -> int:
        """Weight rows (output columns) of a CTA."""
        return 16 * self.row_tiles * self.row_groups

    @property
    def step_k(self) -> int:
        return SKINNY_CHUNK_K * self.unroll

    @property
    def group_elems(self) -> int:
        """fp32 sums of a row group: (16 rows x 8 tokens) per row tile and token tile."""
        return 128 * self.row_tiles * self.token_tiles

    @property
    def partial_elems(self) -> int:
        """fp32 sums of a CTA."""
        return self.group_elems * self.row_groups

    def smem_bytes(self) -> int:
        return self.partial_elems * self.k_groups * 4 + 16


SKINNY_CONFIGS = tuple(SkinnyConfig(t, r, 8, u, g) for t in (1, 2)
                       for r, u, g in ((2, 4, 1), (2, 4, 2), (4, 2, 2), (4, 2, 4)))


def skinny_contract(dtype: str, out_dtype: str, token_tiles: int, row_tiles: int, warps: int,
                    unroll: int, row_groups: int = 1) -> LaunchContract:
    config = SkinnyConfig(token_tiles, row_tiles, warps, unroll, row_groups)
    return LaunchContract(
        params=(*pointers("a", "b", dtype=dtype), Param("c", "ptr", out_dtype, dtypes.bits(out_dtype) // 8),
                Param("bias", "ptr", dtype, 2),
                Param("workspace", "ptr", "fp32", 16), Param("counters", "ptr", "i32", 4),
                *scalars("i32", "m", "n", "k", "has_bias", "splits"), *scalars("i64", "lda", "ldb", "ldc")),
        block=(32 * warps, 1, 1),
        grid=lambda p: (ceil_div(p["n"], config.rows), p["splits"], 1),
        sample={"m": 16, "n": 4096, "k": 4096, "has_bias": 0, "splits": 1, "lda": 4096, "ldb": 4096, "ldc": 4096},
        smem_bytes=config.smem_bytes(),
        entry=f"cutefi_gemm_skinny_{dtype}_{out_dtype}_{config.name}",
        pdl=True,
    )


SKINNY_SPECS = {
    (dtype, out_dtype, config): KernelSpec.make(
        "gemm.skinny", "cute", "cutefi.gemm.skinny_kernel:GemmSkinny", "cutefi.gemm.launch:skinny_contract",
        Family.MMA_SYNC, dtype=dtype, out_dtype=out_dtype, token_tiles=config.token_tiles,
        row_tiles=config.row_tiles, warps=config.warps, unroll=config.unroll, row_groups=config.row_groups)
    for dtype in DTYPES for out_dtype in DENSE_OUT_DTYPES for config in SKINNY_CONFIGS
}
register(*SKINNY_SPECS.values())


# ---- gemm.sm80: the mma.sync family's multistage kernel ---------------------------------------
SM80_C_PAD = 8  # elements the staged output rows are padded by
@dataclass(frozen=True)
class Sm80Config:
    """An mma.sync build: CTA tile ``tile_m x tile_n``, K tiles of ``tile_k`` in a ``stages``-deep
    cp.async ring, warps ``warps_m x warps_n`` (each a ``tile_m / warps_m x tile_n / warps_n``
    piece of the tile)."""

    tile_m: int = 128
    tile_n: int = 128
    tile_k: int = 32
    stages: int = 4
    warps_m: int = 2
    warps_n: int = 2

    def __post_init__(self) -> None:
        if self.tile_m not in (64, 128) or self.tile_n not in (64, 128, 256):
            raise ValueError(f"tile must be 64 or 128 x 64, 128 or 256, got {self.tile_m}x{self.tile_n}")
        if self.tile_k not in (32, 64, 128) or not 2 <= self.stages <= 6:
            raise ValueError(f"tile_k must be 32, 64 or 128 (FP8) and stages 2..6, got {self.tile_k}, {self.stages}")
        if self.tile_m % (32 * self.warps_m) or self.tile_n % (32 * self.warps_n):
            raise ValueError(f"each warp needs at least 32 x 32 of the tile: {self.name}")

    @property
    def name(self) -> str:
        return f"{self.tile_m}x{self.tile_n}x{self.tile_k}s{self.stages}"

    @property
    def threads(self) -> int:
        return 32 * self.warps_m * self.warps_n

    def smem_bytes(self, dtype: str) -> int:
        ring = (self.tile_m + self.tile_n) * self.tile_k * self.stages * dtypes.bits(dtype) // 8
        staged_c = self.tile_m * (self.tile_n + SM80_C_PAD) * 2  # the epilogue reuses the ring
        return max(ring, staged_c) + 128


SM80_CONFIGS = (Sm80Config(128, 128, 32, 4, 2, 2), Sm80Config(128, 256, 32, 3, 2, 4), Sm80Config(64, 64, 32, 4, 2, 2))
# FP8 (sm_89 and newer): the same tiles and 64-byte K rows (64 FP8 elements, two m16n8k32 steps)
SM80_FP8_CONFIGS = tuple(Sm80Config(c.tile_m, c.tile_n, 2 * c.tile_k, c.stages, c.warps_m, c.warps_n)
                         for c in SM80_CONFIGS)
# FP8 with block scales: a K tile is one 128-element scale block, a tile inside one weight
# block; the warps hold a scratch set of sums beside the accumulators (8 warps of 64 x 32 in
# the 128 x 128 tile: 64 + 64 fp32 registers a thread)
SM80_BLOCK_SCALED_CONFIGS = (Sm80Config(128, 128, 128, 3, 2, 4), Sm80Config(64, 64, 128, 4, 2, 2))


def grouped_params(block_scaled: bool) -> tuple[Param, ...]:
    """A grouped mma.sync build's segments: segment s is rows [seg_indptr[s], seg_indptr[s + 1])
    of A and out times weight (B's batch entry) weight_indices[s]; tile_prefix[s]: the tiles
    before s; sb_batch: the element stride between weights' block scales."""
    return (*pointers("seg_indptr", "tile_prefix", "weight_indices", dtype="i32", align=4), *scalars("i32", "groups"),
            *(scalars("i32", "sb_batch") if block_scaled else ()))


def sm80_contract(dtype: str, out_dtype: str, b_major: str, tile_m: int, tile_n: int, tile_k: int, stages: int,
                  warps_m: int, warps_n: int, b_dtype: str | None = None, block_scaled: bool = False,
                  grouped: bool = False) -> LaunchContract:
    config = Sm80Config(tile_m, tile_n, tile_k, stages, warps_m, warps_n)
    # FP8: + the scales (FP8 takes no bias: has_bias is 0); per tensor (one element each) or,
    # block_scaled, scale_a[row // scale_rows, k block] and scale_b[col // 128, k block] at the
    # element strides below (as the Hopper block-scaled builds take them)
    fp8 = dtype in FP8_DTYPES
    return LaunchContract(
        params=(*pointers("a", dtype=dtype), *pointers("b", dtype=b_dtype or dtype), Param("c", "ptr", out_dtype, 16),
                Param("bias", "ptr", out_dtype if fp8 else dtype, 2),
                *(pointers("scale_a", "scale_b", dtype="fp32", align=4) if fp8 else ()),
                *scalars("i32", "m", "n", "k", "batch", "group_m", "has_bias"),
                *scalars("i64", "lda", "ldb", "ldc", "batch_a", "batch_b", "batch_c"),
                *(scalars("i32", "scale_rows", "sa_row", "sa_k", "sb_col", "sb_k") if block_scaled else ()),
                *(grouped_params(block_scaled) if grouped else ())),
        block=(config.threads, 1, 1),
        grid=lambda p: (ceil_div(p["m"], tile_m) * ceil_div(p["n"], tile_n) * p["batch"], 1, 1),
        sample={"m": 4096, "n": 4096, "k": 4096, "batch": 1, "group_m": 8, "has_bias": 0, "lda": 4096,
                "ldb": 4096, "ldc": 4096, "batch_a": 0, "batch_b": 0, "batch_c": 0,
                **({"scale_rows": 1, "sa_row": 32, "sa_k": 1, "sb_col": 32, "sb_k": 1} if block_scaled else {}),
                **({"groups": 8, **({"sb_batch": 1024} if block_scaled else {})} if grouped else {})},
        smem_bytes=config.smem_bytes(dtype),
        entry=f"cutefi_gemm_sm80_{dtype}_{out_dtype}_{b_major}_{config.name}" + (f"_b{b_dtype}" if b_dtype else "")
        + ("_bs" if block_scaled else "") + ("_grouped" if grouped else ""),
        pdl=True,
    )


def _sm80_spec(dtype: str, out_dtype: str, b_major: str, config: Sm80Config, **options: object) -> KernelSpec:
    """A ``gemm.sm80`` build; ``options``: ``b_dtype`` (mixed FP8), ``block_scaled``, ``grouped``
    (only when set, so the plain builds keep their keys). FP8 builds need FP8 mma.sync (sm_89+)."""
    family = Family.MMA_SYNC_FP8 if dtype in FP8_DTYPES else Family.MMA_SYNC
    return KernelSpec.make("gemm.sm80", "cute", "cutefi.gemm.sm80_kernel:GemmSm80", "cutefi.gemm.launch:sm80_contract",
                           family, dtype=dtype, out_dtype=out_dtype, b_major=b_major, tile_m=config.tile_m,
                           tile_n=config.tile_n, tile_k=config.tile_k, stages=config.stages, warps_m=config.warps_m,
                           warps_n=config.warps_n, **options)


SM80_SPECS = {
    (dtype, out_dtype, b_major, config): _sm80_spec(dtype, out_dtype, b_major, config)
    for dtype in DTYPES for out_dtype in DENSE_OUT_DTYPES for b_major in B_MAJORS for config in SM80_CONFIGS
}
SM80_SPECS.update({  # (mixed formats keyed by the (A, B) pair)
    (dtype if dtype == b_dtype else (dtype, b_dtype), out_dtype, "k", config):
        _sm80_spec(dtype, out_dtype, "k", config, **({"b_dtype": b_dtype} if b_dtype != dtype else {}))
    for dtype in FP8_DTYPES for b_dtype in FP8_DTYPES for out_dtype in OUT_DTYPES for config in SM80_FP8_CONFIGS
})
SM80_BLOCK_SCALED_SPECS = {
    (dtype, out_dtype, config): _sm80_spec(dtype, out_dtype, "k", config, block_scaled=True)
    for dtype in FP8_DTYPES for out_dtype in OUT_DTYPES for config in SM80_BLOCK_SCALED_CONFIGS
}
# grouped (segment GEMM; FP8 MoE experts with block scales): the small and the 128 x 128 tile
SM80_GROUPED_CONFIGS = (SM80_CONFIGS[2], SM80_CONFIGS[0])
SM80_GROUPED_SPECS = {
    (dtype, dtype, b_major, config): _sm80_spec(dtype, dtype, b_major, config, grouped=True)
    for dtype in DTYPES for b_major in B_MAJORS for config in SM80_GROUPED_CONFIGS
}
SM80_GROUPED_SPECS.update({
    (dtype, out_dtype, "k", config): _sm80_spec(dtype, out_dtype, "k", config, block_scaled=True, grouped=True)
    for dtype in FP8_DTYPES for out_dtype in OUT_DTYPES for config in SM80_BLOCK_SCALED_CONFIGS
})
register(*SM80_SPECS.values(), *SM80_BLOCK_SCALED_SPECS.values(), *SM80_GROUPED_SPECS.values())


# the GEMV builds' contract and specs live in their own module; importing it registers them
# with the family's (``cutefi aot`` and the tests import only this one)
from . import gemv_launch  # noqa: E402

GEMV_SPECS = gemv_launch.GEMV_SPECS
