"""CPU tier: decode's work partition (``cutefi/attention/decode_plan.py``): every request's
attended range covered exactly once, in chunks of the chosen size, with its partial-state rows
and its sink counted on one item; checked against a plain per-request loop."""

from __future__ import annotations

import numpy as np
import pytest

from cutefi.attention import decode_plan


def tables(lengths, page_size):
    pages = [-(-n // page_size) for n in lengths]
    indptr = np.array([0, *np.cumsum(pages)], dtype=np.int32)
    last = np.array([(n - 1) % page_size + 1 if n else 1 for n in lengths], dtype=np.int32)
    return indptr, last


@pytest.mark.parametrize("page_size", [1, 5, 16])
def test_kv_lengths_round_trip(page_size):
    lengths = [0, 1, 15, 16, 17, 1000, 0, 33]
    indptr, last = tables(lengths, page_size)
    assert decode_plan.kv_lengths(indptr, last, page_size).tolist() == lengths


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("window_left", [-1, 300])
@pytest.mark.parametrize("one_wave", [None, 0])
def test_partition_covers_each_range_once(seed, window_left, one_wave):
    rng = np.random.default_rng(seed)
    batch = int(rng.integers(1, 40))
    lengths = rng.integers(0, 20000, batch).astype(np.int64)
    lengths[rng.integers(0, batch)] = 0  # an empty request is one empty item
    starts = np.maximum(lengths - 1 - window_left, 0) if window_left >= 0 else np.zeros_like(lengths)
    chunk = decode_plan.choose_chunk(np.maximum(lengths - starts, 0), 8, 264, 64, False, None)
    assert chunk == 0 or (chunk % 64 == 0 and chunk >= decode_plan.MIN_CHUNK)
    first_pages = np.concatenate(([0], np.cumsum(rng.integers(0, 1000, batch)))).astype(np.int32)  # an indptr
    part = decode_plan.partition(lengths, starts, first_pages, chunk, one_wave)
    work = part.work
    if one_wave is not None:  # more items than a wave: longest first
        assert (np.diff(work[2] - work[1]) <= 0).all()
    assert work.dtype == np.int32 and work.shape == (decode_plan.WORK_ROWS, part.items)
    for b in range(batch):
        mine = work[:, work[0] == b]
        assert mine.shape[1] >= 1
        # contiguous chunks from start to length, in order
        assert mine[1, 0] == starts[b] and mine[2, -1] == max(lengths[b], starts[b])
        assert (mine[1, 1:] == mine[2, :-1]).all()
        if chunk:
            assert (mine[2] - mine[1] <= chunk).all()
        assert mine[4].sum() == 1 and mine[4, 0] == 1  # the sink on the first item only
        assert (mine[5] == lengths[b]).all() and (mine[6] == first_pages[b]).all()
        rows = part.state_indptr[b + 1] - part.state_indptr[b]
        if mine.shape[1] == 1:
            assert rows == 0 and mine[3, 0] == -1
        else:
            assert rows == mine.shape[1]
            assert mine[3].tolist() == list(range(part.state_indptr[b], part.state_indptr[b + 1]))
    assert part.partial_rows == part.state_indptr[-1]


def test_choose_chunk_rules():
    ranges = np.array([100_000, 10], dtype=np.int64)
    assert decode_plan.choose_chunk(ranges, 8, 264, 64, True, None) == 0  # disable_split_kv
    assert decode_plan.choose_chunk(np.full(64, 4096), 8, 264, 64, False, None) == 0  # the batch fills the GPU
    assert decode_plan.choose_chunk(ranges, 8, 264, 64, False, 100) == 128  # fixed: rounded up to the tile
    chunk = decode_plan.choose_chunk(ranges, 8, 264, 64, False, None)
    items = sum(-(-int(r) // chunk) for r in ranges)
    assert 264 // 8 <= items <= 264 // 8 + 2  # about one wave of CTAs
    # a batch that nearly fills the GPU is not split into a chunk and a sliver (twice the waves)
    assert decode_plan.choose_chunk(np.full(64, 4096), 8, 528, 64, False, None) == 0
    # one that fills a fraction of it is: 8 x 8192 over 264 CTAs, one wave of 2048-token chunks
    assert decode_plan.choose_chunk(np.full(8, 8192), 8, 264, 64, False, None) == 2048
    assert decode_plan.choose_chunk(np.full(1, 131072), 8, 264, 64, False, None) == 4032
    # a ragged batch that nearly fills the GPU still is: its longest request would run alone
    ragged = np.random.default_rng(0).integers(512, 32769, 64)
    assert 0 < decode_plan.choose_chunk(ragged, 8, 528, 64, False, None) < ragged.max()


@pytest.mark.parametrize("chunk", [0, 256])
@pytest.mark.parametrize("one_wave", [None, 3])
def test_partition_without_starts_matches_zero_starts(chunk, one_wave):
    """``starts=None`` (no sliding window: plan's fast path) is the same partition as zeros."""
    lengths = np.array([5, 0, 700, 256, 1, 3000, 700], dtype=np.int64)
    first_pages = np.arange(lengths.shape[0] + 1, dtype=np.int32) * 7
    fast = decode_plan.partition(lengths, None, first_pages, chunk, one_wave)
    full = decode_plan.partition(lengths, np.zeros_like(lengths), first_pages, chunk, one_wave)
    assert (fast.work == full.work).all() and (fast.state_indptr == full.state_indptr).all()
    assert (fast.items, fast.partial_rows, fast.chunk) == (full.items, full.partial_rows, full.chunk)


@pytest.mark.parametrize("length, start", [(1, 0), (255, 0), (256, 0), (257, 0), (5000, 0), (131072, 0),
                                           (5000, 4000), (300, 299), (0, 0)])
@pytest.mark.parametrize("chunk", [256, 4032])
@pytest.mark.parametrize("one_wave", [None, 0])
def test_one_request_matches_the_general_partition(length, start, chunk, one_wave):
    """A batch of one (its own fast path) is partitioned as the same request inside a batch."""
    starts = np.array([start], dtype=np.int64)
    one = decode_plan.partition(np.array([length], dtype=np.int64), starts, np.array([7, 9], dtype=np.int32), chunk,
                                one_wave)
    two = decode_plan.partition(np.array([length, 0], dtype=np.int64), np.array([start, 0], dtype=np.int64),
                                np.array([7, 9, 9], dtype=np.int32), chunk, one_wave)
    assert one.work.dtype == np.int32
    assert one.work.tolist() == two.work[:, two.work[0] == 0].tolist()
    assert one.state_indptr.tolist() == two.state_indptr[:2].tolist()
    assert (one.items, one.partial_rows, one.chunk) == (int((two.work[0] == 0).sum()), two.partial_rows, chunk)


def test_kv_lengths_of_int32_tables_do_not_overflow():
    """A request longer than 2^31 tokens' worth of pages * page_size still gets its int64 length."""
    indptr = np.array([0, 1 << 27], dtype=np.int32)
    last = np.array([64], dtype=np.int32)
    assert decode_plan.kv_lengths(indptr, last, 64).tolist() == [(1 << 27) * 64]


def test_narrow_builds_take_groups_up_to_8_without_rope(monkeypatch):
    """The plan's choice of the narrow decode builds (heads as the MMAs' N): groups 1-8 without
    RoPE; larger groups (two 8-head CTAs would read the KV twice) and RoPE stay wide."""
    from cutefi.attention import decode

    assert all(decode.narrow_build(group, rope=False) for group in range(1, 9))
    assert not decode.narrow_build(9, rope=False) and not decode.narrow_build(16, rope=False)
    assert not decode.narrow_build(4, rope=True)
    monkeypatch.setattr(decode, "NARROW", False)
    assert not decode.narrow_build(4, rope=False)


@pytest.mark.parametrize("arch", ["8.0", "9.0a", "12.0a"])
@pytest.mark.parametrize("kv_dtype", ["bf16", "fp8e4m3", "fp8e5m2"])
def test_narrow_decode_sass(arch, kv_dtype):
    """A narrow build's main loop: half the HMMAs of the wide build of the same ring (group 4
    pads 8 MMA columns, not 16 rows), P^T by MOVM (movmatrix.trans), and no local memory."""
    import re

    from cutefi.attention import launch
    from cutefi.jit.compile import build
    from cutefi.jit.sass import DisassemblerNotFoundError, disassemble
    from cutefi.jit.targets import Target
    from conftest import dsl_available

    if not dsl_available():
        pytest.skip("CuTe DSL not installed")
    stages = launch.mma_decode_stage_options(kv_dtype, 128)[0]
    narrow = launch.MMA_DECODE_NARROW_SPECS[("bf16", kv_dtype, 128, stages)]
    wide = launch.MMA_DECODE_SPECS[("bf16", kv_dtype, 128, stages, False)]
    try:
        narrow_sass, wide_sass = (disassemble(build(spec, Target.parse(arch)).cubin) for spec in (narrow, wide))
    except DisassemblerNotFoundError as error:
        pytest.skip(str(error))
    hmma = [len(re.findall(r"\bHMMA\.16816\.F32", sass)) for sass in (narrow_sass, wide_sass)]
    assert hmma[0] > 0 and 2 * hmma[0] <= hmma[1] + 8, hmma  # (+8: the wide build's one-time Q loads aside)
    assert re.search(r"\bMOVM\b", narrow_sass)
    assert not re.search(r"\b(LDL|STL)\b", narrow_sass)


@pytest.mark.parametrize("group, kv_heads, kv_dtype, head_dim, shift", [
    (4, 8, "bf16", 128, 1), (1, 8, "fp8e4m3", 128, 3), (2, 8, "fp8e5m2", 128, 2), (3, 8, "bf16", 128, 1),
    (2, 6, "bf16", 128, 1), (4, 1, "bf16", 128, 0), (8, 8, "fp8e4m3", 128, 0), (4, 8, "fp8e4m3", 64, 0),
    (4, 8, "bf16", 256, 1), (5, 8, "bf16", 128, 0),
])
def test_pack_shift(group, kv_heads, kv_dtype, head_dim, shift):
    """kv heads a narrow CTA may pack: the most (a power of two) whose q heads fit 8 columns and
    that divide the kv heads; none at head_dim 64 or on the wide builds."""
    from cutefi.attention import decode

    assert decode.pack_shift(group, kv_heads, True, kv_dtype, head_dim) == shift
    assert decode.pack_shift(group, kv_heads, False, kv_dtype, head_dim) == 0


def test_pack_shift_switch(monkeypatch):
    from cutefi.attention import decode

    monkeypatch.setitem(decode.PACK_KV, "fp8", False)
    assert decode.pack_shift(4, 8, True, "fp8e4m3") == 0
    assert decode.pack_shift(4, 8, True, "bf16") == 1
