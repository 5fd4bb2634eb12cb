"""Block scales staged in shared memory with the ring (the block-scaled FP8 builds
``Sm90Config.scale_slot`` gives a slot: the swapped ones and the 128 x 256 tiles).

At 64 tokens and fewer a K step's wgmmas take a fraction of a microsecond, less than the
latency of the global loads of its scales: the consumers that loaded them a step ahead still
waited for them before each step's wgmma issue (ncu, 64 x 4096 x 7168: 19% of the warps'
samples on those loads and their products). Here the producer warp copies each K step's scales
into a slot of the ring stage it fills, with ``cp.async`` (4 bytes a lane), and each lane's
``cp.async.mbarrier.arrive.noinc`` on the stage's full barrier arrives when its copies land: the
barrier expects those 32 arrivals besides the TMA's (``PRODUCER_ARRIVALS``), so a stage is full
only once its tiles *and* its scales are in; the consumers read them from shared memory. The
wide tiles of many tokens gain too: their consumers no longer compute each step's scale
addresses nor wait for the loads (ncu, 4096 x 7168 x 2048 on 128 x 256 tiles: 5% of samples).

A slot holds one scale per token of the tile (the swapped builds: its ``tile_n`` columns; the
others: its ``tile_m`` rows; position ``i`` for the tile's ``i``-th, tokens past the last
taking the last one's), then two weight-block scales: the blocks of the tile's first and last
rows (swapped: a 128-row tile moved back to end on the weight's last row straddles two) or of
its first column and the next (a 256-wide tile spans two; past N's last block, that one),
padded to 16 bytes (``gemm.launch.Sm90Config.scale_slot``).
The swapped build's A is the weight: its strides ``sa_*`` are the weight scales', ``sb_*`` the
tokens' (``scale_rows`` tokens share one: 1 or 128).
"""

from __future__ import annotations

import cutlass
import cutlass.cute as cute
from cutlass import Int32, const_expr
from cutlass.cute.nvgpu import warpgroup

from . import block_scale
from .cp_async import cp_async_4

PRODUCER_ARRIVALS = 1 + 32  # a full barrier's arrivals: the TMA's expect-tx, each producer lane's copies


@cute.jit
def stage(args, slots: cute.Tensor, slot: Int32, full_barrier, first_row: Int32, first_col: Int32,
          tile_mn: cutlass.Constexpr[tuple], k_block: Int32, lane: Int32, swap: cutlass.Constexpr[bool],
          weight_offset: Int32 = 0):
    """(The producer warp, its ring slot acquired.) K block ``k_block``'s scales of the tile at
    (``first_row``, ``first_col``) into ``slots[:, slot]``, each lane's arrival on the slot's
    full barrier made when its copies land. ``weight_offset``: elements to the weight's block
    scales (a grouped build's weight)."""
    tile_m, tile_n = tile_mn
    base = slot * cute.size(slots, mode=[0])
    if const_expr(swap):  # (tokens: the tile's columns, B's rows; weight blocks: A's rows)
        tokens, first, last = tile_n, first_col, args.n - 1
        token_scales, token_stride, token_k = args.scale_b, args.sb_col, args.sb_k
        block_scales, block_stride, block_k = args.scale_a, args.sa_row, args.sa_k
        block = cutlass.min(first_row + lane * (tile_m - 1), args.m - 1) // block_scale.BLOCK
    else:  # (tokens: the tile's rows, A's; weight blocks: B's column blocks)
        tokens, first, last = tile_m, first_row, args.m - 1
        token_scales, token_stride, token_k = args.scale_a, args.sa_row, args.sa_k
        block_scales, block_stride, block_k = args.scale_b, args.sb_col, args.sb_k
        block = cutlass.min(first_col // block_scale.BLOCK + lane, (args.n - 1) // block_scale.BLOCK)
    for part in cutlass.range_constexpr(tokens // 32):
        token = cutlass.min(first + part * 32 + lane, last)  # (past the last: its scale, dropped)
        source = token_scales + ((token // args.scale_rows) * token_stride + k_block * token_k)
        cp_async_4(slots.iterator + (base + part * 32 + lane), source)
    if lane < 2:  # (the two weight blocks)
        cp_async_4(slots.iterator + (base + tokens + lane),
                   block_scales + (block * block_stride + k_block * block_k + weight_offset))
    cute.arch.cp_async_mbarrier_arrive_noinc(full_barrier)


def offsets(args, first_row: Int32, coord_c: cute.Tensor) -> tuple[tuple, tuple]:
    """(which of a slot's two weight scales each of this thread's two rows takes, the slot
    positions of its columns' token scales)."""
    last_row = args.m - 1
    first_block = first_row // block_scale.BLOCK
    rows = tuple(cutlass.min(first_row + coord_c[i][0], last_row) // block_scale.BLOCK - first_block for i in (0, 2))
    cols = tuple(coord_c[i][1] for j in range(0, cute.size(coord_c), 4) for i in (j, j + 1))
    return rows, cols


@cute.jit
def main_loop(ring, read, release, block: tuple, acc: cute.Tensor, slots: cute.Tensor, where: tuple,
              k_count: Int32, tile_n: cutlass.Constexpr[int]) -> tuple:
    """``block_scale.main_loop`` with the scales read from the ring's slots: a step's wgmmas
    issued first, its scales read and multiplied while they run."""
    mmas, frag_a, frag_bs, scratch = block
    acc.fill(0.0)
    for _ in cutlass.range(k_count, unroll=1):
        ring.consumer_wait(read)
        block_scale.issue(mmas, scratch, frag_a, frag_bs[0], read.index, cute.size(frag_a, mode=[2]))
        rows = tuple(slots[(tile_n + row, read.index)] for row in where[0])
        cols = tuple(slots[(col, read.index)] for col in where[1])
        warpgroup.wait_group(0)
        ring.consumer_release(read)
        block_scale.swapped_promote(acc, scratch, (rows, cols))
        read.advance()
        release.advance()
    return read, release



def row_slots(coord_c: cute.Tensor) -> tuple:
    """The slot positions of this thread's rows r and r + 8 (a non-swapped tile's)."""
    return coord_c[0][0], coord_c[2][0]


@cute.jit
def rows_main_loop(ring, read, release, block: tuple, acc: cute.Tensor, slots: cute.Tensor, rows: tuple,
                   k_count: Int32, first_col: Int32) -> tuple:
    """``block_scale.main_loop`` of a non-swapped tile with the scales read from the ring's
    slots (``rows``: ``row_slots``): each slice's wgmmas issued first, the step's scales read
    and multiplied under the first slice's."""
    acc.fill(0.0)
    return block_scale.per_tile_start(lambda read, release, first_groups: _rows_steps(
        ring, read, release, block, acc, slots, rows, k_count, first_groups), block, first_col, read, release)


@cute.jit
def _rows_steps(ring, read, release, block: tuple, acc: cute.Tensor, slots: cute.Tensor, rows: tuple,
                k_count: Int32, first_groups: cutlass.Constexpr[int]) -> tuple:
    """The K steps of ``rows_main_loop`` (``first_groups``: ``block_scale.per_tile_start``'s)."""
    mmas, frag_a, frag_bs, scratch = block
    parts = len(frag_bs)
    tokens = cute.size(slots, mode=[0]) - 4  # (the slot's weight-block scales follow its tokens')
    for _ in cutlass.range(k_count, unroll=1):
        ring.consumer_wait(read)
        products = None
        for part in cutlass.range_constexpr(parts):
            block_scale.issue(mmas, scratch, frag_a, frag_bs[part], read.index, cute.size(frag_a, mode=[2]))
            if const_expr(part == 0):
                products = block_scale.factors(slots[(rows[0], read.index)], slots[(rows[1], read.index)],
                                               slots[(tokens, read.index)], slots[(tokens + 1, read.index)])
            warpgroup.wait_group(0)
            if const_expr(part == parts - 1):
                ring.consumer_release(read)
            block_scale.promote_slice(acc, scratch, products, part, parts, first_groups)
        read.advance()
        release.advance()
    return read, release
