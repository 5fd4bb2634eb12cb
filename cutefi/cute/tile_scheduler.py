"""A static persistent tile scheduler with a grouped raster and split-K, for runtime sizes.

Persistent CTAs (or clusters) take output tiles ``start, start + stride, ...`` of a linear
order; :class:`GroupedRaster` maps a linear index to ``(m, n, l)`` so that consecutive indices
walk down ``group_m`` M tiles before moving to the next N tile: the CTAs running at one time
then share a few rows of A and columns of B in L2 instead of streaming all of B per row.
A work unit is one split of one tile: with ``splits`` > 1 unit ``u`` is split ``u % splits``
of tile ``u // splits`` and covers K tiles ``[k_begin, k_begin + k_count)`` (the splits of a
tile are consecutive units, so they run at the same time and their partial sums meet while
still in L2). Every count is a runtime ``Int32`` (the kernel reads M, N, K, L from its
arguments), so one build serves every shape. Plain traced arithmetic: call it from a kernel.
"""

from __future__ import annotations

import cutlass
from cutlass import Int32
from cutlass.cutlass_dsl import extract_mlir_values, new_from_mlir_values

_FIELDS = ("tiles_m", "tiles_n", "group_m", "per_batch", "total", "group_size", "splits", "k_tiles",
           "k_per_split", "units")


class GroupedRaster:
    """``tiles_m`` x ``tiles_n`` tiles per batch entry, ``batch`` entries, ``group_m`` M tiles
    per raster group (the last group may be shorter), each tile's ``k_tiles`` K tiles cut
    into ``splits`` work units."""

    def __init__(self, tiles_m: Int32, tiles_n: Int32, batch: Int32, group_m: Int32, splits: Int32 = 1,
                 k_tiles: Int32 = 1) -> None:
        self.tiles_m = tiles_m
        self.tiles_n = tiles_n
        self.group_m = group_m
        self.per_batch = tiles_m * tiles_n
        self.total = self.per_batch * batch
        self.group_size = group_m * tiles_n
        self.splits = splits
        self.k_tiles = k_tiles
        self.k_per_split = (k_tiles + splits - 1) // splits
        self.units = self.total * splits

    # a value a dynamic loop may carry (the DSL flattens it into its Int32 fields)
    def __extract_mlir_values__(self) -> list:
        return [v for name in _FIELDS for v in extract_mlir_values(Int32(getattr(self, name)))]

    def __new_from_mlir_values__(self, values: list) -> "GroupedRaster":
        rebuilt = object.__new__(GroupedRaster)
        for name, value in zip(_FIELDS, values):
            setattr(rebuilt, name, new_from_mlir_values(Int32(0), [value]))
        return rebuilt

    def coords(self, linear: Int32) -> tuple[Int32, Int32, Int32]:
        """(m tile, n tile, batch index) of linear tile ``linear`` (< ``total``)."""
        batch = linear // self.per_batch
        rest = linear - batch * self.per_batch
        group = rest // self.group_size
        first_m = group * self.group_m
        rows = cutlass.min(self.tiles_m - first_m, self.group_m)
        within = rest - group * self.group_size
        n_tile = within // rows
        m_tile = first_m + (within - n_tile * rows)
        return m_tile, n_tile, batch

    def unit(self, linear: Int32) -> tuple[Int32, Int32, Int32, Int32, Int32, Int32, Int32]:
        """(m tile, n tile, batch index, tile index, split, first K tile, K tiles) of work unit
        ``linear`` (< ``units``); a split past the end of K gets no K tiles."""
        tile = linear // self.splits
        split = linear - tile * self.splits
        m_tile, n_tile, batch = self.coords(tile)
        k_begin = split * self.k_per_split
        k_count = cutlass.max(cutlass.min(self.k_tiles - k_begin, self.k_per_split), 0)
        return m_tile, n_tile, batch, tile, split, k_begin, k_count
