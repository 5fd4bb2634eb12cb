"""What a GEMM build is called, and how an experiment forces one: the configurations' names
(``parse_config``), ``override`` (a config, raster group, split count, or a swapped build's
weight L2 policy and K rotation, inside a ``with`` block) and ``CUTEFI_GEMM_CONFIG``. The plan
(``plan.py``) reads what is forced through ``forced_config`` and ``_OVERRIDE``."""

from __future__ import annotations

import contextlib
import os
import re
from dataclasses import dataclass
from typing import Iterator

from .gemv_launch import GEMV_TOKENS
from .launch import (
    BLOCK_SCALED_CONFIGS, CONFIGS, SKINNY_CONFIGS, SM80_BLOCK_SCALED_CONFIGS, SM80_CONFIGS, SM80_FP8_CONFIGS,
    SkinnyConfig, Sm80Config, Sm90Config,
)

MAX_SPLITS = 16
_OVERRIDE: dict[str, object] = {}
GENERATION = [0]  # bumped on every override change: part of the API's plan-cache key


@dataclass(frozen=True)
class GemvConfig:
    """A GEMV build (``gemv_kernel.py``): it multiplies up to ``tokens`` token rows."""

    tokens: int = 1

    def __post_init__(self) -> None:
        if self.tokens not in GEMV_TOKENS:
            raise ValueError(f"GEMV builds take {', '.join(map(str, GEMV_TOKENS))} tokens; got {self.tokens}")

    @property
    def name(self) -> str:
        return f"v{self.tokens}"


Config = Sm90Config | SkinnyConfig | Sm80Config | GemvConfig


def parse_config(text: str) -> Config:
    """``"128x256c2"`` -> Sm90Config(128, 256, 2); ``"t2r2w8u4g1"`` -> SkinnyConfig(2, 2, 8, 4, 1); ``"v1"`` ->
    GemvConfig(1);
    ``"128x128x32s4"`` -> the mma.sync build of that tile, K tile and stage count."""
    if text.lower().startswith("t"):
        return _parse_skinny(text)
    if text.lower().startswith("v") and text[1:].isdigit():
        return GemvConfig(int(text[1:]))
    if text.lower().count("x") == 2:
        built = SM80_CONFIGS + SM80_FP8_CONFIGS + SM80_BLOCK_SCALED_CONFIGS
        found = [c for c in built if c.name == text.lower()]
        if not found:
            raise ValueError(f"mma.sync GEMM config {text!r} is not built; built: "
                             f"{', '.join(c.name for c in built)}")
        return found[0]
    try:
        swap = text.lower().endswith("t")
        tile, cluster = text.lower().rstrip("t").split("c")
        cluster, _, cluster_n = cluster.partition("n")
        cluster_m, _, cluster_k = cluster.partition("k")
        tile_m, tile_n = (int(v) for v in tile.split("x"))
        config = Sm90Config(tile_m, tile_n, int(cluster_m), swap, int(cluster_k or 1), int(cluster_n or 1))
    except ValueError as exc:
        raise ValueError(f"a GEMM config reads like 128x256c2 (tile_m x tile_n, cluster along M; k2 or k4: "
                         f"K split over a cluster of 2 or 4; n2: the weight multicast to two token tiles; a "
                         f"final t: the weight-as-A build for a few tokens, e.g. 128x64c1k4t); got {text!r}: "
                         f"{exc}") from None
    built = CONFIGS + tuple(c for c in BLOCK_SCALED_CONFIGS if c not in CONFIGS)
    if config not in built:
        raise ValueError(f"GEMM config {text!r} is not built; built: {', '.join(c.name for c in built)}")
    return config


def _parse_skinny(text: str) -> SkinnyConfig:
    found = re.fullmatch(r"t(\d+)r(\d+)w(\d+)u(\d+)g(\d+)", text.lower())
    try:
        if not found:
            raise ValueError("not of the form t<token tiles>r<row tiles>w<warps>u<unroll>g<row groups>")
        config = SkinnyConfig(*(int(v) for v in found.groups()))
    except ValueError as exc:
        raise ValueError(f"a decode-sized GEMM config reads like t2r2w8u4g1; got {text!r}: {exc}") from None
    if config not in SKINNY_CONFIGS:
        raise ValueError(f"GEMM config {text!r} is not built; built: {', '.join(c.name for c in SKINNY_CONFIGS)}")
    return config


@contextlib.contextmanager
def override(config: Config | str | None = None, group_m: int | None = None,
             splits: int | None = None, weight_policy: int | None = None,
             k_rotation: int | None = None) -> Iterator[None]:
    """Use ``config`` / ``group_m`` / ``splits`` (and for swapped builds the weight's L2
    ``weight_policy`` and ``k_rotation``) instead of the heuristic inside the block."""
    saved = dict(_OVERRIDE)
    GENERATION[0] += 1
    if weight_policy is not None:
        _OVERRIDE["weight_policy"] = weight_policy
    if k_rotation is not None:
        _OVERRIDE["k_rotation"] = k_rotation
    if config is not None:
        _OVERRIDE["config"] = parse_config(config) if isinstance(config, str) else config
    if group_m is not None:
        if group_m < 1:
            raise ValueError(f"group_m must be >= 1, got {group_m}")
        _OVERRIDE["group_m"] = group_m
    if splits is not None:
        if not 1 <= splits <= MAX_SPLITS:
            raise ValueError(f"splits must be in [1, {MAX_SPLITS}], got {splits}")
        _OVERRIDE["splits"] = splits
    try:
        yield
    finally:
        _OVERRIDE.clear()
        _OVERRIDE.update(saved)
        GENERATION[0] += 1


def forced_config() -> Config | None:
    """The configuration ``override(config=...)`` or ``CUTEFI_GEMM_CONFIG`` forces (None: the plan's)."""
    return _OVERRIDE.get("config") or _env_config()  # type: ignore[return-value]


def _env_config() -> Config | None:
    text = os.environ.get("CUTEFI_GEMM_CONFIG")
    return parse_config(text) if text else None
