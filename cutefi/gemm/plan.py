"""Choosing a dense GEMM build and its launch for a problem: the written-down heuristic.

``choose_config(m, n, batch, sms)`` (measured on Hopper, benchmarks/results/gemm_*):
  - up to ``SWAP_MAX_M`` tokens (one matrix, K-major B) the swapped build: the weight is A
    (128 of its rows a tile; 64 for 17-64 tokens on up to about 4096 weight rows, so that twice
    the CTAs stream it), 16, 32 or 64 tokens B, so the weight is read once (decode sizes on up
    to 4096 weight rows take the mma.sync decode kernel instead, below);
  - from 0.8 of a wave of 128 x 256 tiles, those, unless 128 x 224 tiles (16-bit, K-major B, N a
    multiple of 224) or 128 x 128 tiles finish first, counting whole waves and a tile's cost
    (``_first_done``: 1024 x 14336 x 4096 is 3.4 waves of wide tiles, 3.9 of 224-wide ones, 6.8
    of narrow ones: 157 against 176 and 162 µs; narrow tiles run about 5% slower a tile); no cluster: B
    multicast in clusters of two (``128x256c2``, built, for experiments) measured 0-13% slower
    at M = 1024-16384 on 12 of 14 Llama shapes (benchmarks/results/gemm_cluster_h200.json);
  - else, for 129-256 tokens (one matrix, K-major B) whose 128 x 64 tiles fill half to one
    wave, those, unsplit (H200: 256 x 4096 x 4096 15.1-15.8 µs against 16.8-17.2 for the
    swapped build with the weight multicast to 64-token tile pairs, ``128x64c1n2t``, which the
    H100 preferred to 128 x 128 tiles: 18.1 against 20.2 µs; 256 x 4096 x 14336 46.4 against
    47.2 for 128 x 128 tiles in K pairs; FP8 keeps that build up to K 8192, not measured
    against 128 x 64 tiles);
  - else, from 129 rows, or 65-128 from 8192 columns on, 128 x 128 tiles (with split-K below
    a wave: 256 x 8192 x 8192, one wave of them, 55 against 66 µs for 128 x 256 tiles and two
    splits; 128 x 8192 x 8192, two splits in clusters, 51 against 66 for wide tiles and four);
  - else, up to 64 rows (a B that cannot be swapped) from 8192 columns on, 128 x 256 tiles
    (split-K fills the machine; the weight streams and wide tiles re-read the tokens least);
  - else 128 x 128 tiles when they give at least an eighth of a wave;
  - else 128 x 64 tiles (decode-sized problems with few columns: the most CTAs on B).
``launch_plan`` then cuts K (split-K) when the tiles fill less than half the SMs, into up to
``sms // tiles`` splits of at least ``MIN_SPLIT_K_TILES`` K tiles each (the partial sums cost
a few KB per unit, the idle SMs cost the whole machine), and sizes the persistent grid: one
CTA per SM (the ring takes all of shared memory) or fewer when there are fewer work units,
rounded to whole clusters, and the raster group.

Splits meet in pairs inside clusters of two wherever that build exists (``cluster_k`` 2: each
CTA sums and stores half the tile, the partials crossing through distributed shared memory;
an odd count drops one split; with more than two splits the pairs' halves then meet through
the workspace): 3-7% faster than the workspace meeting for two splits, 1-3% for four
(benchmarks/results/gemm_cluster_split_h200.json, gemm_cluster_groups_h200.json).
Clusters of four are not built: an H200 GPC holds fewer than 32 of them, so 128 CTAs took two
waves (1.5-3x slower).

FP8 (``k_tile`` 128) plans the same Hopper builds, never the 16-bit decode or mma.sync kernels;
other GPUs from sm_89 on take the FP8 mma.sync builds (``SM80_FP8_CONFIGS``, ``sm80_plan``'s
choice; where ptxas emulates the FP8 MMA (sm_100a/103a, and a Hopper forced onto them) the
64 x 64 one, the one that does not spill there).

One or two tokens on Hopper (one matrix, B K-major) take the GEMV builds (``gemv_kernel.py``:
the weight streamed through a cp.async ring in shared memory) where ``gemv_pays``: one token
on every weight but the L2-held one the decode-sized kernel fills the SMs with, two where K
is 8192 or more or the weight 16 MB or less (``GemvPlan``: ``v1``/``v2``/``v4`` builds).

Decode-sized problems (one matrix, M <= 16, B K-major: the nn.Linear weight; on Hopper up
to ``SKINNY_MAX_N_HOPPER`` weight rows, and K up to ``SKINNY_MAX_K_HOPPER`` below 9 tokens, or
for 9-16 tokens where 64-row weight tiles would not fill the SMs, ``_long_k_in_64row_wave``)
take the mma.sync weight-streaming kernel instead (``skinny_plan``): ``t1`` (M <= 8) or
``t2`` token tiles, ``SKINNY_DEFAULT`` rows, unroll and row groups, and K cut into about
``sms / row blocks`` splits (none from half a wave of row blocks on: measured, more splits
than that only add partial sums), each warp keeping at least ``MIN_SKINNY_STEPS`` K steps.

GPUs other than Hopper take the mma.sync multistage kernel for everything else
(``sm80_plan``): 128 x 256 tiles from two waves of 128 x 128 tiles on, 128 x 128 from half a
wave, else 64 x 64; no split-K yet.

``override(config=..., group_m=..., splits=...)`` replaces the heuristic for experiments
(``cutefi-bench`` sweeps it); ``CUTEFI_GEMM_CONFIG=128x256c2`` (a Hopper build) or
``CUTEFI_GEMM_CONFIG=t2r2w8u4g1`` (a decode-sized one) or ``v2`` (a GEMV one, any GPU) or ``128x128x32s4`` (an mma.sync one,
which Hopper runs too) does the same from the environment.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from . import configs
from .configs import _OVERRIDE, MAX_SPLITS, GemvConfig, forced_config
from .launch import (
    BLOCK_SCALED_CONFIGS, CONFIGS, EPI_TILE_N, EVICT_FIRST, EVICT_NORMAL, FP8_CONFIGS, SKINNY_MAX_M,
    SM80_BLOCK_SCALED_CONFIGS, SM80_CONFIGS, SM80_FP8_CONFIGS, SkinnyConfig, Sm80Config, Sm90Config, tiles,
)
from .gemv_launch import GEMV_ROWS, GEMV_TOKENS

# (the builds' names and the experiments' overrides live in configs.py; the API, benchmarks
# and tests reach them here)
Config = configs.Config
GENERATION = configs.GENERATION
override = configs.override
parse_config = configs.parse_config

SKINNY_MAX_N_HOPPER = 4096
SKINNY_MAX_K_HOPPER = 8192
SWAP_MAX_M = 64  # tokens up to which Hopper multiplies the weight by the tokens (one read of it)
LONG_K_64ROW_FILL = 0.9  # SMs' share 64-row tile pairs fill for 9-16 tokens on a long K (_long_k_in_64row_wave)
NARROW_TILE_COST = 1.05  # 128 x 256 tiles' rate over 128 x 128 ones' at equal wave use (4-6% measured)
MID_TILE_COST = 1.01  # ... over 128 x 224 ones' (0.8-1.4% measured at 2048-16384 x 14336 x 4096)
GROUP_M = 8  # M tiles per raster group: 8 x 128 rows of A stay hot in L2 while B streams
MIN_SPLIT_K_TILES = 8  # K tiles (of 64) a split keeps, so its pipeline fills
# swapped builds on a weight larger than the L2: K steps a weight tile starts after the one
# before (``stream_weight``); 13 is odd, so the starts cover every step of a power-of-two count
K_ROTATION = 13
SKINNY_DEFAULT = (2, 4, 1)  # (row_tiles, unroll, row_groups) of the decode-sized build
SKINNY_CTAS_PER_SM = 1  # (the builds take over 128 registers a thread: one CTA of 256 an SM)
MIN_SKINNY_STEPS = 2  # K steps each warp keeps at the least
GEMV = True  # (experiments and tests: False leaves M <= GEMV_MAX_M to the other kernels)
GEMV_MAX_M = 2  # tokens up to which Hopper takes the GEMV builds (gemv_pays)
GEMV_SMALL_WEIGHT = 16 << 20  # bytes of weight up to which two tokens take them at any K
SKINNY_FILL = 0.9  # share of the SMs the decode-sized kernel's row blocks fill where it keeps a weight the L2 holds


@dataclass(frozen=True)
class LaunchPlan:
    config: Sm90Config
    ctas: int
    group_m: int
    splits: int = 1
    units: int = 0  # work units: tiles x splits
    # swapped builds that stream the weight (``launch.streams_weight``): the L2 cache policy of
    # its loads and the K rotation of its tiles
    weight_policy: int = EVICT_NORMAL
    k_rotation: int = 0

    @property
    def workspace_elems(self) -> int:
        """fp32 partials the split-K units need: a tile a unit; in clusters, a share a unit when
        several clusters split a tile (0 without split-K or with one cluster a tile)."""
        if self.splits == self.config.cluster_k:
            return 0
        return self.units * self.config.tile_m * self.config.tile_n // self.config.cluster_k

    @property
    def counter_elems(self) -> int:
        """Meetings through the workspace: one a tile (in clusters: one a tile's share)."""
        if self.splits == self.config.cluster_k:
            return 0
        return self.units // self.splits * self.config.cluster_k


@dataclass(frozen=True)
class SkinnyPlan:
    """A decode-sized launch: ``blocks`` CTAs of ``config.rows`` weight rows, times ``splits``."""

    config: SkinnyConfig
    blocks: int
    splits: int = 1

    @property
    def workspace_elems(self) -> int:
        return 0 if self.splits == 1 else self.blocks * self.splits * self.config.partial_elems

    @property
    def counter_elems(self) -> int:
        return 0 if self.splits == 1 else self.blocks


@dataclass(frozen=True)
class GemvPlan:
    """A GEMV launch: ``blocks`` CTAs of ``GEMV_ROWS`` weight rows."""

    config: GemvConfig
    blocks: int
    splits = 1
    workspace_elems = 0
    counter_elems = 0


@dataclass(frozen=True)
class Sm80Plan:
    """An mma.sync launch: one CTA a tile (``tiles`` of them, batch included)."""

    config: Sm80Config
    tiles: int
    group_m: int
    splits: int = 1

    workspace_elems = 0
    counter_elems = 0


def choose_config(m: int, n: int, batch: int, sms: int, b_k_major: bool, k: int = 4096,
                  fp8: bool = False) -> Sm90Config:
    forced = forced_config()
    if not isinstance(forced, Sm90Config):
        forced = None  # (another kernel's override does not apply here)
    if forced is not None:
        if forced.cluster_m > 1 and not b_k_major:
            raise ValueError(f"GEMM config {forced.name} multicasts B, which needs a K-major B")
        if forced.tile_n % 64 and not forced.swap and not b_k_major:
            raise ValueError(f"GEMM config {forced.name} is built for a K-major B only (an N-major B tile is "
                             f"whole 64-column swizzle atoms)")
        return forced  # type: ignore[return-value]
    if batch == 1 and b_k_major and m <= SWAP_MAX_M:
        if (m > 16 or _long_k_in_64row_wave(m, n, k, sms)) and sms // 2 < 2 * -(-n // 64) <= sms \
                and k >= 2 * MIN_SPLIT_K_TILES * 64 and "splits" not in _OVERRIDE:
            # (17-64 tokens on up to about 4096 weight rows: 64-row weight tiles and K in two in a
            # cluster put twice the CTAs on the weight, each reading its rows once: 64 x 4096 x
            # 4096 10.1 against 12.2 µs for 128-row tiles and four splits, FP8 6.9 against 8.5
            # (H100, gemm_64row_tiles_h100_session22.json); 32 x 4096 x 4096 8.5 against 9.6 (H200,
            # gemm_64row_tiles_h200_session22.json)
            return Sm90Config(64, 32 if m <= 32 else 64, 1, True, 2)
        return Sm90Config(128, 16 if m <= 16 else 32 if m <= 32 else 64, 1, True)
    wide, narrow = Sm90Config(128, 256, 1), Sm90Config(128, 128, 1)
    waves_wide = _tile_count(m, n, wide) * batch / sms
    waves_narrow = _tile_count(m, n, narrow) * batch / sms
    if waves_wide >= 0.8:
        # (a persistent grid idles in its last wave: narrower tiles pay when they fill it better)
        return _first_done(m, n, batch, sms, b_k_major and not fp8 and n % 224 == 0)
    shared = Sm90Config(128, 64, 1, True, 1, 2)
    if batch == 1 and b_k_major and 128 < m <= 256 \
            and sms // 2 < _tile_count(n, m, shared) <= sms and "splits" not in _OVERRIDE:
        columns = Sm90Config(128, 64, 1)
        if not fp8 and sms // 2 < _tile_count(m, n, columns) <= sms:
            # (16 bits: two 128-row token tiles times 64-column weight tiles, one wave, no
            # split. H200, weights warm or rotated past L2: 160/192/256 x 4096 x 4096 14.9-15.8
            # µs against 16.5-17.2 for the multicast build below and 15.0-16.6 for 128 x 128
            # tiles with K in two in clusters; x 8192 K 27.7-28.3 against 29.1-29.5,
            # gemm_129_256_tokens_h200_session34.json; 256 x 4096 x 14336 46.4 against 47.2,
            # gemm_129_256_tokens_h200_session38.json. FP8 was not measured against them)
            return columns
        if k <= 8192:
            # (129-256 tokens on about 4096 weight rows, K up to 8192: the weight as A in 64-token
            # tiles, multicast to each pair of them, no split: 256 x 4096 x 4096 18.1 against
            # 20.2 µs for 128 x 128 tiles and K in two in clusters, gemm_cluster_n_h100_session22.json)
            return shared
    if m > 128:
        return narrow  # (from 0.8 of a wave of them without split-K, else K split in cluster pairs)
    if n >= 8192:  # (up to 64 tokens, a B that cannot be swapped: wide tiles, the weight streams)
        return narrow if m > SWAP_MAX_M else wide
    return narrow if 8 * waves_narrow >= 1 else Sm90Config(128, 64, 1)


def _long_k_in_64row_wave(m: int, n: int, k: int, sms: int) -> bool:
    """9-16 tokens, K past ``SKINNY_MAX_K_HOPPER`` and 64-row weight tiles in cluster pairs
    that fill ``LONG_K_64ROW_FILL`` of the SMs: the 64 x 32 swapped build, not the decode-sized
    kernel. H200, in-process (session 35, ``gemm_decode_9_16_tokens_h200_session35.json``):
    9/16 x 4096 x 10240-28672 1-6% faster (16 x 4096 x 14336 30.9 against 32.3 µs), 3840 rows
    1-5%; from 3584 rows down (112 CTAs and fewer) the decode-sized kernel is as fast or faster
    (3328 rows: 0-4%). ``sms`` 0 (unknown): no."""
    return 8 < m <= 16 and k > SKINNY_MAX_K_HOPPER and 0 < sms and 2 * -(-n // 64) >= LONG_K_64ROW_FILL * sms


def _first_done(m: int, n: int, batch: int, sms: int, mid: bool) -> Sm90Config:
    """Of 128 x 256, 128 x 224 (``mid``: 16-bit, K-major B, N a multiple of 224, as measured)
    and 128 x 128 tiles, those whose persistent grid ends first: its whole waves times a tile's
    time (its width, times its cost against a 256-wide tile's). H200, in-process (gemm_mid_tiles_h200_session38.json): 128 x 224
    tiles against 128 x 256 / 128 x 128 at 256 x 14336 x 4096 41.5 against 44.6 / 46.0 µs, 256 x
    28672 x 8192 165 / 180 / 190, 512 x 14336 x 4096 79.8 / 90.2 / 95.1, 1024 x 14336 x 4096 157 /
    176 / 162; from 2048 tokens on, both fill their last wave and 224 is 0.8-1.4% slower."""
    candidates = [(Sm90Config(128, 256, 1), 1.0), (Sm90Config(128, 224, 1), MID_TILE_COST),
                  (Sm90Config(128, 128, 1), NARROW_TILE_COST)]
    if not mid:
        del candidates[1]

    def finish(config: Sm90Config, cost: float) -> float:
        return -(-_tile_count(m, n, config) * batch // sms) * config.tile_n / 256 * cost

    return min(candidates, key=lambda candidate: finish(*candidate))[0]  # (ties: the wider)


def choose_splits(tile_count: int, k: int, sms: int, config: Sm90Config, k_tile: int = 64,
                  min_split_tiles: int = MIN_SPLIT_K_TILES) -> int:
    forced = _OVERRIDE.get("splits")
    k_tiles = -(-k // k_tile)
    if forced is not None:
        splits = int(forced)  # type: ignore[arg-type]
    elif config.cluster_m > 1 or config.cluster_n > 1 or 2 * tile_count > sms:
        return 1
    else:
        splits = min(sms // tile_count, k_tiles // min_split_tiles, MAX_SPLITS)
    splits = max(1, min(splits, k_tiles))
    per_split = -(-k_tiles // splits)
    return -(-k_tiles // per_split)  # no split left without K tiles


def takes_gemv(m: int, n: int, k: int, batch: int, b_k_major: bool, wgmma: bool, sms: int = 0,
               l2_bytes: int = 0) -> bool:
    """Whether the GEMV builds take the problem: one matrix, a K-major weight, at most
    ``GEMV_MAX_M`` tokens, on Hopper (measured there; elsewhere the decode-sized kernel
    keeps them), where ``gemv_pays`` (or ``override(config="v1")`` forces it)."""
    forced = forced_config()
    fits = batch == 1 and b_k_major
    if isinstance(forced, GemvConfig):
        if not fits or m > forced.tokens:
            raise ValueError(f"GEMM config {forced.name} takes one matrix with M <= {forced.tokens} and a K-major b "
                             f"(an nn.Linear weight's w.t()); got M={m}, batch={batch}, "
                             f"b {'K' if b_k_major else 'N'}-major")
        return True
    return forced is None and GEMV and fits and wgmma and m <= GEMV_MAX_M and gemv_pays(m, n, k, sms, l2_bytes)


def gemv_pays(m: int, n: int, k: int, sms: int, l2_bytes: int) -> bool:
    """Where the GEMV builds ran faster than the kernels that took these shapes before them
    (H200, warm L2, in one process: benchmarks/results/gemm_gemv_ab_h200_session36.json):
    one token on every weight but those the decode-sized kernel's 32-row blocks fill the SMs
    with and the L2 holds (1 x 4096 x 4096: 6.8 against 7.8 µs); two tokens where K is 8192 or
    more, or the weight is small (16 MB or less; 1.02-1.32x there, 0.98-1.0x at 6144 and 14336
    x 4096). Three or four tokens were slower (0.65-1.03x)."""
    fills = -(-n // (16 * SKINNY_DEFAULT[0] * SKINNY_DEFAULT[2])) >= SKINNY_FILL * sms
    held = n * k * 2 <= l2_bytes if l2_bytes else True  # (an unknown L2: as before the GEMV builds)
    if n <= SKINNY_MAX_N_HOPPER and k <= SKINNY_MAX_K_HOPPER and fills and held:
        return False
    return m == 1 or k >= 8192 or n * k * 2 <= GEMV_SMALL_WEIGHT


def gemv_plan(m: int, n: int) -> GemvPlan:
    forced = forced_config()
    config = forced if isinstance(forced, GemvConfig) else GemvConfig(next(t for t in GEMV_TOKENS if t >= m))
    return GemvPlan(config, -(-n // GEMV_ROWS))


def takes_skinny(m: int, n: int, batch: int, b_k_major: bool, wgmma: bool, k: int = 4096, sms: int = 0) -> bool:
    """Whether the decode-sized kernel can take the problem, and the heuristic or override picks
    it (on Hopper only up to ``SKINNY_MAX_N_HOPPER`` rows of weight, and for up to 8 tokens only
    up to ``SKINNY_MAX_K_HOPPER`` of K: measured on the H200, it streams a weight of up to 4096
    rows faster than the swapped wgmma build (1 x 4096 x 4096 7.3 against 9.1 µs, 1 x 1024 x
    8192 6.0 against 9.6) and a longer K at 8 tokens or fewer slower (1 x 4096 x 14336 35.3
    against 33.0), gemm_decode_h200_session22.json; for 9-16 tokens a longer K on weights whose
    64-row tiles fill the SMs (``_long_k_in_64row_wave``) is slower too)."""
    forced = forced_config()
    fits = batch == 1 and b_k_major and m <= SKINNY_MAX_M
    if isinstance(forced, (Sm90Config, Sm80Config)):
        return False
    if isinstance(forced, SkinnyConfig):
        if not fits or m > 8 * forced.token_tiles:
            raise ValueError(f"GEMM config {forced.name} takes one matrix with M <= {8 * forced.token_tiles} and a "
                             f"K-major b (an nn.Linear weight's w.t()); got M={m}, batch={batch}, "
                             f"b {'K' if b_k_major else 'N'}-major")
        return True
    return fits and (not wgmma or (n <= SKINNY_MAX_N_HOPPER and (k <= SKINNY_MAX_K_HOPPER or m > 8)
                                   and not _long_k_in_64row_wave(m, n, k, sms)))


def skinny_plan(m: int, n: int, k: int, sms: int) -> SkinnyPlan:
    forced = forced_config()
    if isinstance(forced, SkinnyConfig):
        config = forced
    else:
        config = SkinnyConfig(1 if m <= 8 else 2, *_skinny_shape())
    blocks = -(-n // config.rows)
    steps = -(-k // config.step_k)
    forced_splits = _OVERRIDE.get("splits")
    if forced_splits is not None:
        splits = int(forced_splits)  # type: ignore[arg-type]
    else:
        # (measured: a second split only pays when the row blocks fill under half the SMs)
        splits = min(max(1, round(sms * SKINNY_CTAS_PER_SM / blocks)), steps // (MIN_SKINNY_STEPS * config.k_groups),
                     MAX_SPLITS)
    return SkinnyPlan(config, blocks, max(1, min(splits, steps)))


def _skinny_shape() -> tuple[int, int, int, int]:
    row_tiles, unroll, row_groups = SKINNY_DEFAULT
    return row_tiles, 8, unroll, row_groups


def sm80_plan(m: int, n: int, batch: int, sms: int, configs: tuple[Sm80Config, ...] = SM80_CONFIGS,
              small_only: bool = False) -> Sm80Plan:
    """mma.sync builds of ``configs`` (16-bit or FP8; the same tiles): 128 x 256 tiles from two
    waves of 128 x 128 ones on, 128 x 128 from half a wave, else 64 x 64 (the most CTAs for
    small problems; always with ``small_only``)."""
    forced = forced_config()
    if isinstance(forced, Sm80Config):
        if forced not in configs:
            raise ValueError(f"GEMM config {forced.name} is not built for these inputs; built: "
                             f"{', '.join(c.name for c in configs)}")
        config = forced
    else:
        tiles_128 = -(-m // 128) * -(-n // 128) * batch
        config = configs[2] if small_only else configs[1] if tiles_128 >= 2 * sms and n >= 256 else \
            configs[0] if 2 * tiles_128 >= sms else configs[2]
    tile_count = -(-m // config.tile_m) * -(-n // config.tile_n) * batch
    return Sm80Plan(config, tile_count, int(_OVERRIDE.get("group_m", GROUP_M)))  # type: ignore[arg-type]


def launch_plan(m: int, n: int, k: int, batch: int, sms: int, b_k_major: bool,
                wgmma: bool = True, k_tile: int = 64, native_fp8: bool = True,
                l2_bytes: int = 0) -> LaunchPlan | SkinnyPlan | Sm80Plan:
    """The plan of one problem; ``wgmma``: the device is a Hopper (else the mma.sync kernels);
    ``k_tile``: K of a ring stage (128 for FP8: the Hopper builds, or the FP8 mma.sync ones
    elsewhere, where ``native_fp8`` says whether the chip has FP8 mma.sync or ptxas emulates it);
    ``l2_bytes``: the device's L2 (0: unknown), against which a swapped build's weight is
    weighed (``stream_weight``)."""
    fp8 = k_tile != 64
    if fp8:
        forced = forced_config()
        if isinstance(forced, (SkinnyConfig, GemvConfig)) or (isinstance(forced, Sm80Config)
                                                             and forced not in SM80_FP8_CONFIGS):
            raise ValueError(f"GEMM config {forced.name} takes 16-bit inputs; FP8 runs on the Hopper builds or "
                             f"the FP8 mma.sync ones ({', '.join(c.name for c in SM80_FP8_CONFIGS)})")
        if isinstance(forced, Sm80Config) or not wgmma:
            return sm80_plan(m, n, batch, sms, SM80_FP8_CONFIGS, small_only=not native_fp8)
    if not fp8 and takes_gemv(m, n, k, batch, b_k_major, wgmma, sms, l2_bytes):
        return gemv_plan(m, n)
    if not fp8 and takes_skinny(m, n, batch, b_k_major, wgmma, k, sms):
        return skinny_plan(m, n, k, sms)
    forced = forced_config()
    if not fp8 and (isinstance(forced, Sm80Config) or (not wgmma and not isinstance(forced, Sm90Config))):
        return sm80_plan(m, n, batch, sms)
    configs = FP8_CONFIGS if fp8 else CONFIGS
    if isinstance(forced, Sm90Config) and forced not in configs:
        raise ValueError(f"GEMM config {forced.name} has no {'FP8' if fp8 else '16-bit'} build; built: "
                         f"{', '.join(c.name for c in configs)}")
    config = choose_config(m, n, batch, sms, b_k_major, k, fp8)
    if config.swap and (batch != 1 or not b_k_major):
        raise ValueError(f"GEMM config {config.name} takes one matrix and a K-major b (an nn.Linear weight's "
                         f"w.t()); got batch={batch}, b {'K' if b_k_major else 'N'}-major")
    # (swap: the weight's rows are the tile rows, the tokens its columns)
    tiles_m, tiles_n = tiles(n, m, config) if config.swap else tiles(m, n, config)
    plan = _split_plan(config, tiles_m * tiles_n * batch, k, sms, k_tile, CONFIGS)
    return stream_weight(plan, n * k * (1 if fp8 else 2), l2_bytes) if config.swap else plan


def stream_weight(plan: LaunchPlan, weight_bytes: int, l2_bytes: int) -> LaunchPlan:
    """A swapped plan's weight L2 policy and K rotation: a weight larger than the L2 is read
    once, so its loads are evict-first, and where the tiles take one wave each weight tile's K
    steps start ``K_ROTATION`` steps after the one before's (in lockstep, the CTAs' loads fall
    on addresses a multiple of 128 weight rows apart, 1 MiB at K = 4096: the same DRAM
    channels). H200, in-process A/B against the defaults (session 35,
    ``gemm_weight_stream_ab_h200_session35.json``): 16-bit 1 x 14336 x 4096 +3.7%, 64 x 8192 x
    8192 +3.3%, 64 x 28672 x 8192 +7.6%, 1 x 4096 x 14336 +1.8%, the other M <= 64 shapes 0-1.7%;
    FP8 64 x 28672 x 8192 +5%, within 0.4% elsewhere. Rotated past one wave: 1 x 28672 x 8192 1%
    slower. A weight that fits the L2 keeps the defaults: warm, the CTAs then share the
    tokens' lines as they load them (rotated: 64 x 4096 x 4096 14% slower; evict-first: 2-3%)."""
    streamed = l2_bytes > 0 and weight_bytes > l2_bytes
    policy = EVICT_FIRST if streamed else EVICT_NORMAL
    rotation = K_ROTATION if streamed and plan.units <= plan.ctas else 0
    policy = int(_OVERRIDE.get("weight_policy", policy))  # type: ignore[arg-type]
    rotation = int(_OVERRIDE.get("k_rotation", rotation))  # type: ignore[arg-type]
    return dataclasses.replace(plan, weight_policy=policy, k_rotation=rotation)


# Block-scaled problems of up to 64 tokens take the swapped builds (the weight's rows as the
# tile's, the tokens its columns: a 128-row tile of a few tokens is mostly padding), whose ring
# stages carry their scales (cute/staged_scales.py): 32-token tiles, two a weight tile from 33
# tokens where those fill at most the SMs' half (split-K fills the rest), else 64-token tiles.
# H200, session 31 (gemm_fp8_groupwise_sweep_staged_h200_session31.json, every build and split
# count): 64 x 4096 x 7168 12.1 us (128 x 128 tiles: 15.4), 64 x 2112 x 7168 10.4, 64 x 7168 x
# 18432 39.3 for 64-token tiles against 46.4 for 32-token ones and 50.9 for 128 x 128, 64 x 7168 x
# 2048 8.0 against 8.8.
BLOCK_SCALED_SWAP_TOKENS = (32, 64)  # (tokens of the 32-token tiles alone, of any swapped build)
# an odd split count drops one to meet in cluster pairs only from this many splits (a dropped
# split of three cost 10%: 64 x 2112 x 7168 13.5 against 12.5 us; 7 -> 6 paired gained 5-8%)
BLOCK_SCALED_ODD_PAIRS = 5
# the block-scaled tiles' rates in full waves, relative to 128 x 256's in clusters of two (B
# multicast to both, 1-2.5% faster than alone), H200, session 32 (M = 4096-8192 and K >= 7168:
# 128 x 256 1170-1220 TFLOP/s alone, 128 x 192 1090-1130, 128 x 128 1040-1080;
# gemm_fp8_groupwise_tiles_h200_session32.json, _staged_wide_ab_, _multicast_ab_): a problem takes
# the tile whose rounds over the SMs cost least at these rates (4096 x 2112 x 7168: 11 columns of
# 192 in 2.7 rounds ran 1003 TFLOP/s, 17 of 128 in 4.1 rounds 838, 9 of 256 in 2.2 rounds 794;
# the rates pick the fastest build at each of 44 measured shapes)
BLOCK_SCALED_TILE_RATES = {Sm90Config(128, 256, 2): 1.0, Sm90Config(128, 256, 1): 0.985,
                           Sm90Config(128, 192, 1): 0.94, Sm90Config(128, 128, 1): 0.87}


def block_scaled_plan(m: int, n: int, k: int, sms: int, wgmma: bool = True,
                      native_fp8: bool = True) -> LaunchPlan | Sm80Plan:
    """The plan of a block-scaled FP8 problem (one matrix, ``BLOCK_SCALED_CONFIGS``): from an
    eighth of a wave of 128 x 128 tiles, the 128 x 256 (B multicast in clusters of two), 128 x
    192 or 128 x 128 tiles whose rounds over the SMs cost least (``BLOCK_SCALED_TILE_RATES``;
    128 x 256 from 0.8 of a wave of them), else 128 x 64, and for a few tokens (``BLOCK_SCALED_SWAP_TOKENS``) the swapped
    128 x 32 / 128 x 64 builds; split-K as for the other builds (pairs in clusters of two, for
    odd counts from ``BLOCK_SCALED_ODD_PAIRS``). Off Hopper (``wgmma`` False, or an mma.sync build forced): the block-scaled
    mma.sync builds, 128 x 128 from half a wave of them where the chip has FP8 MMAs, else
    64 x 64 (and always where ptxas emulates them: the 128-wide build spills there)."""
    forced = forced_config()
    if isinstance(forced, Sm80Config) or not wgmma:
        if forced is not None and forced not in SM80_BLOCK_SCALED_CONFIGS:
            raise ValueError(f"GEMM config {forced.name} has no block-scaled mma.sync build; built: "
                             f"{', '.join(c.name for c in SM80_BLOCK_SCALED_CONFIGS)}")
        wide, small = SM80_BLOCK_SCALED_CONFIGS
        config = forced or (wide if native_fp8 and 2 * -(-m // 128) * -(-n // 128) >= sms else small)
        return Sm80Plan(config, -(-m // config.tile_m) * -(-n // config.tile_n),  # type: ignore[arg-type]
                        int(_OVERRIDE.get("group_m", GROUP_M)))  # type: ignore[arg-type]
    if forced is not None:
        if forced not in BLOCK_SCALED_CONFIGS:
            raise ValueError(f"GEMM config {forced.name} has no block-scaled build; built: "
                             f"{', '.join(c.name for c in BLOCK_SCALED_CONFIGS)}")
        config = forced
    elif m <= BLOCK_SCALED_SWAP_TOKENS[1]:
        narrow = Sm90Config(128, 32, 1, True)
        config = narrow if m <= BLOCK_SCALED_SWAP_TOKENS[0] or 2 * _tile_count(n, m, narrow) <= sms \
            else Sm90Config(128, 64, 1, True)
    elif 8 * _tile_count(m, n, Sm90Config(128, 128, 1)) >= sms:
        config = _block_scaled_tile(m, n, sms)
    else:
        config = Sm90Config(128, 64, 1)
    tiles_m, tiles_n = tiles(n, m, config) if config.swap else tiles(m, n, config)
    return _split_plan(config, tiles_m * tiles_n, k, sms, 128, BLOCK_SCALED_CONFIGS,  # type: ignore[arg-type]
                       odd_pairs=BLOCK_SCALED_ODD_PAIRS)


def _block_scaled_tile(m: int, n: int, sms: int) -> Sm90Config:
    """The 128-row block-scaled tile whose rounds cost least (a round: one tile an SM, taking
    its width over its rate); 128 x 256 only from 0.8 of a wave of them (as for 16 bits: below,
    the narrower tiles, with split-K, fill more SMs), in clusters of two from two M tiles."""
    costs = {}
    for config, rate in BLOCK_SCALED_TILE_RATES.items():
        if config.tile_n == 256 and (5 * _tile_count(m, n, config) < 4 * sms
                                     or (config.cluster_m > 1 and m <= config.tile_m)):
            continue
        costs[config] = _waves(m, n, config, sms) * config.tile_n / rate
    return min(costs, key=costs.__getitem__)  # (ties: the first listed)


def _waves(m: int, n: int, config: Sm90Config, sms: int) -> int:
    """Rounds of the persistent grid over the output tiles (one tile an SM a round)."""
    return -(-_tile_count(m, n, config) // sms)


def _tile_count(m: int, n: int, config: Sm90Config) -> int:
    tiles_m, tiles_n = tiles(m, n, config)
    return tiles_m * tiles_n


def _split_plan(config: Sm90Config, total: int, k: int, sms: int, k_tile: int,
                built: tuple[Sm90Config, ...], min_split_tiles: int = MIN_SPLIT_K_TILES,
                odd_pairs: int = 3) -> LaunchPlan:
    """Split-K and the persistent grid of ``total`` output tiles of a Hopper build; an odd
    split count from ``odd_pairs`` on drops one to meet in cluster pairs (below, in the workspace)."""
    if config.cluster_k > 1:
        forced = int(_OVERRIDE.get("splits", config.cluster_k))  # type: ignore[arg-type]
        if forced % config.cluster_k:
            raise ValueError(f"GEMM config {config.name} splits K in multiples of {config.cluster_k}, not {forced}")
        return launch_plan_in_cluster(config, total, forced)
    splits = choose_splits(total, k, sms, config, k_tile, min_split_tiles)
    # (a 224-wide tile has no cluster_k build: its seven epilogue pieces do not halve)
    paired = Sm90Config(config.tile_m, config.tile_n, 1, config.swap, 2) \
        if config.swap or config.tile_n // EPI_TILE_N % 2 == 0 else None
    if splits >= 2 and (splits % 2 == 0 or splits >= odd_pairs) and config.cluster_m == 1 and paired in built \
            and forced_config() is None and "splits" not in _OVERRIDE:
        # (splits meet faster in pairs in a cluster: 3-7% measured for two; an odd count
        # drops one split)
        return launch_plan_in_cluster(paired, total, splits - splits % 2)
    multicast = config.cluster_m * config.cluster_n
    if splits > 1 and multicast > 1:
        raise ValueError(f"split-K needs a config without a cluster, not {config.name}")
    units = total * splits
    ctas = min(units, sms // multicast * multicast)
    group_m = int(_OVERRIDE.get("group_m", GROUP_M))  # type: ignore[arg-type]
    return LaunchPlan(config, ctas, max(1, group_m // config.cluster_m), splits, units)


def launch_plan_in_cluster(config: Sm90Config, tiles_total: int, splits: int) -> LaunchPlan:
    """Split-K in clusters: ``splits`` (a multiple of ``cluster_k``) splits a tile, one work
    unit a CTA."""
    units = tiles_total * splits
    group_m = int(_OVERRIDE.get("group_m", GROUP_M))  # type: ignore[arg-type]
    return LaunchPlan(config, units, group_m, splits, units)
