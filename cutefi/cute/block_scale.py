"""Block-scaled FP8 wgmma main loop pieces (DeepSeek-style scales, one per 128-element K block).

The wgmmas of one K block (a 128-element ring stage) sum into a scratch set of fp32
registers; once they are done, each element is added to the tile's accumulators times its
scales, ``scale_a[row, k block] * scale_b[col block, k block]``: the FP8 MMA's own (narrower)
accumulation then spans only 128 products, and the scales never touch the FP8 values. One
warpgroup's promotion runs while the other's MMAs do. (Two scratch sets a warpgroup, one
promoted while the other's wgmmas run, made the compiler serialise every wgmma; making the two
consumer warpgroups take turns to issue, by named barriers, measured 1-2% slower; so did two
scratch sets in the 128 x 128 tiles, whose registers allow them, against one set whose
scales' loads are not waited for between wgmmas: ``main_loop``.)

A consumer thread of the m64nNk32 wgmma holds, per 64-row warpgroup slice, rows ``r`` and
``r + 8`` (accumulator elements ``i`` with ``(i // 2) % 2`` 0 and 1) of the columns its
warpgroup's tile covers, 8 columns every 4 elements (element ``i``'s column group is ``i // 4``,
the same for every thread). A 256-wide tile is multiplied in two 128-column slices, each one
weight block (a scratch set of one slice keeps the registers within budget); the narrower
tiles in one slice. A 192-wide tile's slice spans two weight blocks: its first ``128 - first
column % 128`` columns take the first block's scale, the rest the next one's; the main loop is
built once per place a tile can start in its block (two: columns 0 and 64), so each element's
scale is known at build time.
"""

from __future__ import annotations

import cutlass
import cutlass.cute as cute
from cutlass import Float32, Int32, const_expr
from cutlass.cute.nvgpu import warpgroup

BLOCK = 128  # elements of K (and of weight columns) one scale covers
_FLAT = 1 << 30  # the extent the scale vectors are viewed with (indices stay below it)
GROUP = 8  # columns of an accumulator element group (4 elements a thread)


def slice_width(tile_n: int) -> int:
    """Columns a scratch set of sums covers: 128 in a 256-wide tile, else the whole tile."""
    return BLOCK if tile_n == 2 * BLOCK else tile_n


def weight_blocks(tile_n: int) -> int:
    """Weight blocks a tile spans (tiles start at multiples of ``tile_n``): one up to 128
    columns (which divide 128), else two (192: from column 0 or 64 of a block; 256: from 0)."""
    return 1 if tile_n <= BLOCK else 2


def first_block_columns(tile_n: int) -> tuple[int, ...]:
    """The columns of a tile in its first weight block, for each place it can start in the
    block (a one-slice tile spanning two blocks; tiles start at multiples of ``tile_n``)."""
    step = BLOCK
    while tile_n % step:
        step //= 2
    return tuple(BLOCK - start for start in range(0, BLOCK, step))


def tile_offsets(args, first_row: Int32, first_col: Int32, coord_c: cute.Tensor,
                 weight: Int32 | None = None) -> tuple[Int32, Int32, Int32, Int32]:
    """Where one consumer thread's scales of an output tile start: its two rows' activation
    scales and the tile's two weight blocks (K block 0; the second clamped to the last block
    of N: a tile past N's end reads it, and its sums there are dropped).

    ``args`` carries ``scale_a``/``scale_b`` (fp32 pointers), ``scale_rows`` (rows one activation
    scale covers: 1 or 128), and the element strides ``sa_row``, ``sa_k`` (between activation
    scale rows and K blocks) and ``sb_col``, ``sb_k`` (between weight column blocks and K blocks).
    """
    last_row = args.m - 1  # (rows past M read the last row's scale; their sums are dropped)
    rows = [cutlass.min(first_row + coord_c[i][0], last_row) for i in (0, 2)]
    col_block = first_col // BLOCK
    b_offsets = [col_block * args.sb_col, cutlass.min(col_block + 1, (args.n - 1) // BLOCK) * args.sb_col]
    if weight is not None:  # (grouped: the weight's scales, ``sb_batch`` apart)
        b_offsets = [offset + weight * args.sb_batch for offset in b_offsets]
    return ((rows[0] // args.scale_rows) * args.sa_row, (rows[1] // args.scale_rows) * args.sa_row, *b_offsets)


@cute.jit
def load(args, offsets: tuple, k_block: Int32, blocks: cutlass.Constexpr[int]) -> tuple:
    """The scales of K block ``k_block``: rows r and r + 8, then each of the tile's ``blocks``
    weight blocks."""
    scale_a = cute.make_tensor(args.scale_a, cute.make_layout(_FLAT))
    scale_b = cute.make_tensor(args.scale_b, cute.make_layout(_FLAT))
    scales = [scale_a[offsets[0] + k_block * args.sa_k], scale_a[offsets[1] + k_block * args.sa_k]]
    for blk in cutlass.range_constexpr(blocks):
        scales.append(scale_b[offsets[2 + blk] + k_block * args.sb_k])
    return tuple(scales)


@cute.jit
def issue(mmas, scratch: cute.Tensor, frag_a, frag_b, slot: Int32, k_blocks: cutlass.Constexpr[int]):
    """Start ``scratch = A @ B`` over ring slot ``slot``: its ``k_blocks`` wgmmas, the first with
    ``mmas[0]`` (which overwrites: ``ACCUMULATE`` False), the rest with ``mmas[1]`` (adding), one
    commit group."""
    warpgroup.fence()
    for k_block in cutlass.range_constexpr(k_blocks):
        where = (None, None, k_block, slot)
        cute.gemm(mmas[0] if k_block == 0 else mmas[1], scratch, frag_a[where], frag_b[where], scratch)
    warpgroup.commit_group()


@cute.jit
def promote(acc: cute.Tensor, scratch: cute.Tensor, factors: tuple, first: cutlass.Constexpr[int],
            first_groups: cutlass.Constexpr[int]):
    """``acc[first + i] += scratch[i] * factor`` (one FFMA an element): ``factors`` are the
    products of the element's row (r, r + 8) with its weight block, ``(r, r + 8)`` of the first
    block, then of the second for column groups from ``first_groups`` on; a slice's sums are a
    run of the tile's accumulators."""
    for i in cutlass.range_constexpr(cute.size(scratch)):
        second = 2 if i // 4 >= first_groups else 0
        acc[first + i] = acc[first + i] + scratch[i] * factors[second + (i // 2) % 2]


@cute.jit
def main_loop(args, ring, read, release, block: tuple, acc: cute.Tensor, offsets: tuple, k_begin: Int32,
              k_count: Int32, paired: cutlass.Constexpr[bool], first_col: Int32) -> tuple:
    """``acc`` = the tile's block-scaled sums over K steps ``k_begin`` .. ``k_begin + k_count - 1``
    (ring slots from ``read``; ``release`` kept level with it), each step's scales loaded from
    global memory (the builds without a ring slot for them: 192/128/64-wide and grouped tiles;
    the others read them from the ring, ``staged_scales``);
    ``block``: (the two MMAs, A's fragment, B's fragments of the tile's slices, the scratch set);
    ``first_col``: the tile's (where in its weight block it starts). Returns (read, release),
    advanced past the steps."""
    acc.fill(0.0)
    return per_tile_start(lambda read, release, first_groups: _steps(
        args, ring, read, release, block, acc, offsets, k_begin, k_count, paired, first_groups), block, first_col,
        read, release)


@cute.jit
def per_tile_start(steps, block: tuple, first_col: Int32, read, release) -> tuple:
    """``steps(read, release, first_groups)``, ``first_groups`` (the column groups of the slice
    in the tile's first weight block) known at build time: a one-slice tile over two weight
    blocks takes a copy of the loop per place it can start in its block."""
    mmas, frag_a, frag_bs, scratch = block
    tile_n = len(frag_bs) * _slice_columns(scratch)
    if const_expr(len(frag_bs) == 1 and weight_blocks(tile_n) == 2):
        starts = first_block_columns(tile_n)
        for which in cutlass.range_constexpr(len(starts)):
            if first_col % BLOCK == BLOCK - starts[which]:
                read, release = steps(read, release, starts[which] // GROUP)
    else:
        read, release = steps(read, release, _slice_columns(scratch) // GROUP)
    return read, release


def factors(scale_r: Float32, scale_r8: Float32, scale_b0: Float32, scale_b1: Float32) -> tuple:
    """``promote``'s factors: rows r and r + 8 times the first weight block, then the second."""
    return scale_r * scale_b0, scale_r8 * scale_b0, scale_r * scale_b1, scale_r8 * scale_b1


def _slice_columns(scratch: cute.Tensor) -> int:
    """Columns of a scratch set: its elements a thread over the 4 a column group takes."""
    return cute.size(scratch) * 2  # (64 rows x columns over 128 threads)


@cute.jit
def _steps(args, ring, read, release, block: tuple, acc: cute.Tensor, offsets: tuple, k_begin: Int32,
           k_count: Int32, paired: cutlass.Constexpr[bool], first_groups: cutlass.Constexpr[int]) -> tuple:
    """The K steps of ``main_loop``; ``first_groups``: the slice's column groups in the first
    weight block. Each step's scales are loaded a step ahead, their L2 latency under a step's
    MMAs; ``paired``: two steps an iteration (a one-slice tile)."""
    mmas, frag_a, frag_bs, scratch = block
    blocks = weight_blocks(len(frag_bs) * _slice_columns(scratch))
    last = k_begin + k_count - 1
    if const_expr(not paired):
        # (a 256-wide tile, whose two slices wait for each other: the scales' products are
        # taken at the load, under the first slice's MMAs)
        upcoming = _step_scales(args, offsets, k_begin, blocks, True)
        for k_step in cutlass.range(k_count, unroll=1):
            scales = upcoming
            upcoming = _step_scales(args, offsets, cutlass.min(k_begin + k_step + 1, last), blocks, True)
            _step(ring, read, block, acc, scales, first_groups)
            read.advance()
            release.advance()
    else:
        # two steps an iteration, so each step's loads land in registers of their own, first
        # used where that step promotes: with one, the copy of the loads into the next step's
        # registers is their first use, and ptxas placed it between two wgmma issues, where
        # the warp waited for the loads (128 x 128 tiles: 3-10% slower on the H200)
        scales = _step_scales(args, offsets, k_begin, blocks, False)
        for pair in cutlass.range(k_count // 2, unroll=1):
            for half in cutlass.range_constexpr(2):
                upcoming = _step_scales(args, offsets, cutlass.min(k_begin + 2 * pair + half + 1, last), blocks,
                                        False)
                _step(ring, read, block, acc, scales, first_groups)
                read.advance()
                release.advance()
                scales = upcoming
        if k_count % 2 == 1:
            _step(ring, read, block, acc, scales, first_groups)
            read.advance()
            release.advance()
    return read, release


@cute.jit
def _step(ring, read, block: tuple, acc: cute.Tensor, scales: tuple, first_groups: cutlass.Constexpr[int]):
    """One K step (ring slot ``read``, released here): each slice's sums into the scratch set,
    then promoted into ``acc``."""
    mmas, frag_a, frag_bs, scratch = block
    ring.consumer_wait(read)
    for part in cutlass.range_constexpr(len(frag_bs)):
        issue(mmas, scratch, frag_a, frag_bs[part], read.index, cute.size(frag_a, mode=[2]))
        warpgroup.wait_group(0)
        if const_expr(part == len(frag_bs) - 1):
            ring.consumer_release(read)
        _promote_step(acc, scratch, scales, part, len(frag_bs), first_groups)


@cute.jit
def _step_scales(args, offsets: tuple, k_block: Int32, blocks: cutlass.Constexpr[int],
                 products: cutlass.Constexpr[bool]) -> tuple:
    """K block ``k_block``'s scales: (row r, row r + 8) times each weight block (``products``),
    or the raw values (``load``'s)."""
    scales = load(args, offsets, k_block, blocks)
    if const_expr(products):
        return tuple(scales[i % 2] * scales[2 + i // 2] for i in range(2 * blocks))
    return scales


@cute.jit
def _promote_step(acc: cute.Tensor, scratch: cute.Tensor, scales: tuple, part: cutlass.Constexpr[int],
                  parts: cutlass.Constexpr[int], first_groups: cutlass.Constexpr[int]):
    """Slice ``part``'s sums into ``acc``: ``_step_scales``' products (two slices), or the raw
    scales of a one-slice tile (their products taken here)."""
    if const_expr(parts == 1):
        scales = tuple(scales[i % 2] * scales[2 + i // 2] for i in range(2 * (len(scales) - 2)))
    promote_slice(acc, scratch, scales, part, parts, first_groups)


@cute.jit
def promote_slice(acc: cute.Tensor, scratch: cute.Tensor, products: tuple, part: cutlass.Constexpr[int],
                  parts: cutlass.Constexpr[int], first_groups: cutlass.Constexpr[int]):
    """Slice ``part`` of ``parts`` into ``acc``; ``products``: rows r and r + 8 times the first
    weight block, then the second (``factors``): each 128-column slice of a two-slice tile takes
    its block's pair, a one-slice tile the first pair up to column group ``first_groups``."""
    if const_expr(parts > 1):
        promote(acc, scratch, products[2 * part:2 * part + 2], part * cute.size(scratch), cute.size(scratch))
    else:
        promote(acc, scratch, products, 0, first_groups)


# ---- swapped builds (a few tokens): the tile's rows are the weight's, its columns the tokens ---
# A thread's two rows take their weight blocks' scales, and each of its columns (two a group of
# four accumulator elements, elements 4j and 4j + 1) its token's scale; the scales reach the
# consumers through shared memory (``staged_scales``).


@cute.jit
def swapped_promote(acc: cute.Tensor, scratch: cute.Tensor, scales: tuple):
    """``acc[i] += scratch[i] * weight scale of i's row * token scale of i's column``."""
    rows, cols = scales
    for i in cutlass.range_constexpr(cute.size(scratch)):
        acc[i] = acc[i] + scratch[i] * (rows[(i // 2) % 2] * cols[(i // 4) * 2 + i % 2])


# ---- the mma.sync kernel's promotion (sm_89 / sm_120a: gemm/sm80_kernel.py) ------------------
# A thread of an m16n8 MMA holds rows r and r + 8 (mode 0's second index h) of each of its MMA
# tiles along M (mode 1), two columns of each along N (mode 0's first index, mode 2); a CTA tile
# lies inside one weight block (tile_n divides 128), so one weight scale serves the whole tile.


def mma_sync_offsets(args, thr_mma, tile_shape: tuple[int, int], first_row: Int32, first_col: Int32,
                     last_row: Int32, weight_offset) -> tuple:
    """(activation-scale offsets of this thread's rows, one per (M tile, h), and the weight
    block's offset, ``weight_offset`` on: a grouped build's weight), at K block 0; rows past
    ``last_row`` (M's, or a segment's) read its scale, rows before 0 row 0's (their sums are
    dropped)."""
    coords = thr_mma.partition_C(cute.make_identity_tensor(tile_shape))
    rows = []
    for mm in range(cute.size(coords, mode=[1])):  # (trace-time Python: no DSL loop)
        for h in range(2):
            row = cutlass.max(cutlass.min(first_row + coords[(0, h), mm, 0][0], last_row), 0)
            rows.append((row // args.scale_rows) * args.sa_row)
    return tuple(rows), (first_col // BLOCK) * args.sb_col + weight_offset


@cute.jit
def mma_sync_load(args, offsets: tuple, k_block: Int32) -> tuple:
    """The scale products of K block ``k_block``, one per (M tile, h) of this thread."""
    scale_a = cute.make_tensor(args.scale_a, cute.make_layout(_FLAT))
    scale_b = cute.make_tensor(args.scale_b, cute.make_layout(_FLAT))
    weight = scale_b[offsets[1] + k_block * args.sb_k]
    return tuple(scale_a[row + k_block * args.sa_k] * weight for row in offsets[0])


@cute.jit
def mma_sync_promote(acc: cute.Tensor, sums: cute.Tensor, factors: tuple):
    """``acc += sums * factor`` of each element's row (one FFMA an element), then ``sums = 0``
    for the next K block."""
    for mm in cutlass.range_constexpr(cute.size(acc, mode=[1])):
        for h in cutlass.range_constexpr(2):
            factor = factors[2 * mm + h]
            for nn in cutlass.range_constexpr(cute.size(acc, mode=[2])):
                for c in cutlass.range_constexpr(2):
                    acc[(c, h), mm, nn] = acc[(c, h), mm, nn] + sums[(c, h), mm, nn] * factor
    sums.fill(0.0)
