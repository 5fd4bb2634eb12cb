"""Block scales staged in shared memory with the ring (the swapped FP8 builds: a few tokens).

At 64 tokens and fewer a K step's wgmmas take a fraction of a microsecond, less than the
latency of the global loads of its scales: the consumers that loaded them a step ahead still
waited for them before each step's wgmma issue (ncu, 64 x 4096 x 7168: 19% of the warps'
samples on those loads and their products). Here the producer warp copies each K step's scales
into a slot of the ring stage it fills, with ``cp.async`` (4 bytes a lane), and each lane's
``cp.async.mbarrier.arrive.noinc`` on the stage's full barrier arrives when its copies land: the
barrier expects those 32 arrivals besides the TMA's (``PRODUCER_ARRIVALS``), so a stage is full
only once its tiles *and* its scales are in; the consumers read them from shared memory.

A slot holds the tile's ``tile_n`` token scales (column ``c`` at ``c``), then the weight-block
scales of the tile's first and last rows (a 128-row tile moved back to end on the weight's last
row straddles two 128-row blocks), padded to 16 bytes (``gemm.launch.Sm90Config.scale_slot``
sizes it; ``tile_n`` comes from the build).
The swapped build's A is the weight: its strides ``sa_*`` are the weight scales', ``sb_*`` the
tokens' (``scale_rows`` tokens share one: 1 or 128).
"""

from __future__ import annotations

import cutlass
import cutlass.cute as cute
from cutlass import Int32
from cutlass.cute.nvgpu import warpgroup

from . import block_scale
from .cp_async import cp_async_4

PRODUCER_ARRIVALS = 1 + 32  # a full barrier's arrivals: the TMA's expect-tx, each producer lane's copies


@cute.jit
def stage(args, slots: cute.Tensor, slot: Int32, full_barrier, first_row: Int32, first_col: Int32,
          tile_mn: cutlass.Constexpr[tuple], k_block: Int32, lane: Int32):
    """(The producer warp, its ring slot acquired.) K block ``k_block``'s scales of the tile at
    (``first_row``, ``first_col``) into ``slots[:, slot]``, each lane's arrival on the slot's
    full barrier made when its copies land."""
    tile_m, tile_n = tile_mn
    for part in cutlass.range_constexpr(tile_n // 32):
        token = cutlass.min(first_col + part * 32 + lane, args.n - 1)  # (past the last: its scale, dropped)
        source = args.scale_b + ((token // args.scale_rows) * args.sb_col + k_block * args.sb_k)
        cp_async_4(slots.iterator + (slot * cute.size(slots, mode=[0]) + part * 32 + lane), source)
    if lane < 2:  # (the first and the last row's weight block)
        row = cutlass.min(first_row + lane * (tile_m - 1), args.m - 1)
        source = args.scale_a + ((row // block_scale.BLOCK) * args.sa_row + k_block * args.sa_k)
        cp_async_4(slots.iterator + (slot * cute.size(slots, mode=[0]) + tile_n + lane), source)
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

