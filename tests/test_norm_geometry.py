"""CPU tier: the norm builds' geometry (``cutefi/norm/launch.py``): the persistent LayerNorm
builds' ring fits static shared memory, ``row_iters`` with its grid covers every row exactly
with at most one wave of resident CTAs, and a shifted persistent build's thread takes rows
that share a lead (its gamma and beta are read once in that row frame)."""

from __future__ import annotations

import re

import pytest
import torch

from cutefi.norm import launch, packed, tuning

STATIC_SMEM = 48 * 1024  # the kernel's ring and reduction buffers are static shared memory


def _geometries():
    for kind, dtype, n_class, fused, gemma, aligned, out_dtype in launch._variants():
        yield (kind, dtype, n_class, fused, aligned, out_dtype), launch.geometry(kind, dtype, n_class, fused, aligned,
                                                                                   out_dtype)


def test_prefetch_on_layernorm_and_shifted_rmsnorm_and_its_shared_memory_fits():
    prefetching = {True: 0, False: 0}
    for (kind, _, n_class, fused, aligned, _), shape in _geometries():
        reductions = 8 * shape.rows_per_cta * shape.warps_per_row * 4
        if shape.prefetch:
            prefetching[aligned] += 1
            assert not fused and (kind == "layer" or not aligned), (kind, n_class)
            assert n_class >= 1024  # the 2^30-row bound of row_iters holds by memory size
        # the ring is static shared memory (gamma and beta are in registers, aligned or not)
        assert shape.ring_bytes + reductions <= STATIC_SMEM, (kind, n_class)
    assert prefetching[True] and prefetching[False]  # both tables are in use


@pytest.mark.parametrize("n_class, quant, aligned", [(*key, True) for key in sorted(tuning.LAYER_PREFETCH)]
                         + [(*key, False) for key in sorted(tuning.LAYER_SHIFTED_PREFETCH)])
@pytest.mark.parametrize("rows", [1, 7, 127, 128, 1000, 4096, 16384, 65537, 1 << 22])
@pytest.mark.parametrize("sms", [1, 80, 132])
def test_row_iters_and_grid_cover_every_row_once(n_class, quant, aligned, rows, sms):
    shape = launch.geometry("layer", "bf16", n_class, False, aligned, "fp8e4m3" if quant else None)
    assert shape.prefetch
    contract = launch.contract("layer", "bf16", n_class, False, False, aligned, "fp8e4m3" if quant else None)
    iters = launch.row_iters(shape, rows, sms)
    grid = contract.grid({"M": rows, "row_iters": iters})[0]
    assert launch.persistent_grid(shape, rows, sms, 1) == (iters, grid)
    groups = -(-rows // shape.rows_per_cta)
    # CTA b's thread rows are b + i * grid (row groups), i < iters: together every group < grid * iters
    assert grid * iters >= groups and (grid - 1) * iters < groups
    assert grid <= max(1, sms * shape.min_ctas_per_sm) or iters == 1
    if rows > sms * shape.min_ctas_per_sm * shape.rows_per_cta:
        assert iters > 1


@pytest.mark.parametrize("kind, n_class, quant", [("layer", *key) for key in sorted(tuning.LAYER_SHIFTED_PREFETCH)]
                         + [("rms", *key) for key in sorted(tuning.RMS_SHIFTED_PREFETCH)])
@pytest.mark.parametrize("rows, n, heads, row_stride, head_stride", [
    (16384, 4095, 1, 4095, 0), (65537, 1023, 1, 1023, 0), (5000, 2000, 1, 2002, 0), (4096, 4095, 1, 4097, 0),
    (30000, 1000, 5, 8003, 1601), (20000, 2047, 3, 6 * 2047 + 1, 2048), (12000, 1023, 40, 40 * 1024 + 3, 1024),
    (100, 4095, 1, 4095, 0)])
@pytest.mark.parametrize("sms", [1, 7, 132])
def test_shifted_persistent_rows_of_a_thread_share_a_lead(kind, n_class, quant, rows, n, heads, row_stride,
                                                          head_stride, sms):
    """Every row a thread of a shifted persistent build takes starts where its first does in
    its 16-byte chunk (the leads checked row by row), every row is taken once."""
    from cutefi.norm.plan import RowLayout, lead_period
    shape = launch.geometry(kind, "bf16", n_class, False, False, "fp8e4m3" if quant else None)
    assert shape.prefetch
    layout = RowLayout(rows, n, heads, row_stride, head_stride)
    iters, grid = launch.persistent_grid(shape, rows, sms, lead_period(layout))
    step = grid * shape.rows_per_cta
    assert step * iters >= rows and grid <= -(-rows // shape.rows_per_cta)

    def lead(row: int) -> int:
        return ((row // heads) * row_stride + (row % heads) * head_stride + 3) % 8

    firsts = range(min(step, rows))
    for first in firsts:
        assert {lead(row) for row in range(first, rows, step)} == {lead(first)}, (first, step)
    if rows > sms * shape.min_ctas_per_sm * shape.rows_per_cta * 2:
        assert iters > 1  # (the test means something: threads take several rows)


def test_row_iters_without_prefetch_is_one_and_bounded_rows():
    plain = launch.geometry("rms", "bf16", 4096, False, True, None)
    assert launch.row_iters(plain, 1 << 25, 132) == 1
    with pytest.raises(ValueError, match="2\\^30"):
        launch.row_iters(launch.geometry("layer", "bf16", 2048, False, True, None), 1 << 30, 132)


def test_packed_chunk_row_is_exact():
    """The packed kernel's row of chunk c, int((8c + 0.5) * rcp(n)) in float32, is floor(8c / n)
    for every hidden size it takes, with rcp(n) off by an ulp either way (rcp.approx)."""
    for n in range(packed.MIN_N, max(packed.N_CLASSES) + 1):
        chunks = torch.arange(n, dtype=torch.int64)
        want = (8 * chunks) // n
        start = (8 * chunks).to(torch.float32) + 0.5
        inv = torch.tensor(1.0 / n, dtype=torch.float32)
        for rcp in (inv, torch.nextafter(inv, torch.tensor(0.0)), torch.nextafter(inv, torch.tensor(1.0))):
            assert torch.equal((start * rcp).to(torch.int64), want), n


@pytest.mark.parametrize("n_class", packed.N_CLASSES)
@pytest.mark.parametrize("rows", [64, 65, 1003, 16384, 1 << 22])
def test_packed_geometry_fits_and_covers_every_block(n_class, rows):
    shape = packed.geometry("bf16", n_class)
    assert shape.smem_bytes <= packed.MAX_DYNAMIC_SMEM
    assert shape.block_threads * packed.CHUNKS * 8 == 8 * n_class  # a block's n chunks, CHUNKS a thread
    iters = packed.blocks_per_cta(rows, n_class, 132)
    grid = packed.contract("bf16", n_class, False).grid({"M": rows, "row_iters": iters})[0]
    blocks = -(-rows // packed.ROWS_PER_BLOCK)
    assert grid * iters >= blocks > (grid - 1) * iters


def test_latency_builds_are_narrow_rows_of_their_classes():
    """Each latency build splits its row wider than its class's build, loads its parameters
    with x, and takes calls of its rows' alignment up to its row limit only."""
    from cutefi.norm.plan import takes_latency_build

    assert launch.LATENCY_SPECS
    shifted = 0
    for (kind, dtype, n_class, fused, gemma, aligned, out_dtype), spec in launch.LATENCY_SPECS.items():
        assert dict(spec.options)["latency"] is True
        quant = out_dtype is not None
        fast = launch.geometry(kind, dtype, n_class, fused, aligned, out_dtype, latency=True)
        own = launch.geometry(kind, dtype, n_class, fused, aligned, out_dtype)
        # (RMSNorm 8192: the same split, x held in registers where the class reads it twice)
        assert fast.threads_per_row > own.threads_per_row or (own.reread and not fast.reread)
        assert not fast.delay_weight_load and not fast.prefetch and fast.shifted == (not aligned)
        # (a shifted row's lead adds a chunk past n_class)
        assert fast.chunks * fast.vec * fast.threads_per_row >= n_class + (0 if aligned else fast.vec)
        most = launch.latency_rows(kind, fused, quant, n_class, aligned)
        width = n_class if aligned else n_class - 1
        assert takes_latency_build(kind, width, fused, quant, aligned, most)
        assert takes_latency_build(kind, width - 8, fused, quant, aligned, 1)
        assert not takes_latency_build(kind, width, fused, quant, aligned, most + 1)
        # each table serves its own rows only
        other = launch.latency_rows(kind, fused, quant, n_class, not aligned)
        assert takes_latency_build(kind, n_class - (1 if aligned else 0), fused, quant, not aligned, 1) == bool(other)
        assert launch.contract(kind, dtype, n_class, fused, gemma, aligned, out_dtype,
                               latency=True).entry.endswith("_lat")
        shifted += not aligned
    assert shifted  # (LayerNorm 4096's shifted latency builds)
    with pytest.raises(ValueError, match="no latency build"):
        launch.geometry("rms", "bf16", 16384, True, True, None, latency=True)


def test_every_build_covers_its_rows_wherever_they_start():
    """A row of up to n_class columns, starting ``lead`` (0-7 on shifted builds) into its first
    aligned chunk, lies in the columns a build's threads cover: their chunks (``tile_n``), plus
    on ``lead_chunk_alone`` builds the one chunk past them that the row's first thread takes;
    and that extra chunk is only ever the row's last (the split covers n_class exactly)."""
    for kind, dtype, n_class, fused, _, aligned, out_dtype in launch.NORM_SPECS:
        shape = launch.geometry(kind, dtype, n_class, fused, aligned, out_dtype)
        lead = 0 if aligned else shape.vec - 1
        covered = shape.tile_n + (shape.vec if shape.lead_chunk_alone else 0)
        assert covered >= n_class + lead, (kind, dtype, n_class, fused, aligned, out_dtype)
        if shape.lead_chunk_alone:
            assert shape.shifted and not fused and shape.tile_n == n_class
            assert kind == "rms" or shape.prefetch  # LayerNorm: the ring holds the chunk


REREAD_BUILDS = [(kind, fused, n) for (kind, fused, quant), classes in tuning.REREAD_ROWS.items() for n in classes]


@pytest.mark.parametrize("kind, fused, n_class", REREAD_BUILDS)
@pytest.mark.parametrize("sm", ["9.0a", "8.0", "12.0a"])
def test_reread_build_reads_x_twice_with_cache_priorities(kind, fused, n_class, sm):
    """The classes that read x (and the fused add's residual) twice (tuning.REREAD_ROWS): the
    first read is evict-last in L1 (and L2, through the policy's descriptor), the second
    evict-first, the weight loaded after the reduction; nothing spilled. Their latency builds
    hold the row instead."""
    from cutefi.jit.compile import build
    from cutefi.jit.sass import disassemble
    from cutefi.jit.targets import Target

    shape = launch.geometry(kind, "bf16", n_class, fused)
    assert shape.reread and shape.delay_weight_load and not shape.prefetch
    sass = disassemble(build(launch.norm_spec(kind, "bf16", n_class, fused), Target.parse(sm)).cubin)
    reads = shape.chunks * (2 if fused else 1)  # x (and the residual)
    bits = shape.vec * 16
    # LayerNorm's output loop is built twice: for a row that fills the build, and predicated
    paths = 2 if kind == "layer" else 1
    assert len(re.findall(rf"\bLDG\.E\.EL\.{bits}\b", sass)) == reads
    assert len(re.findall(rf"\bLDG\.E\.EF\.{bits}\b", sass)) == reads * paths
    # the weight (16-bit); fp32 gamma and beta, an access each per 4 elements
    per_chunk = 2 * (shape.vec // 4) if kind == "layer" else shape.vec * 16 // 128
    params = shape.chunks * per_chunk * paths
    wide = len(re.findall(r"\bLDG\.E\.ENL2\.256\b", sass))  # (sm_100+ joins two 128-bit loads)
    assert len(re.findall(r"\bLDG\.E\.128\b", sass)) + 2 * wide == params
    assert not re.search(r"\b(LDL|STL)\b", sass)
    if launch.latency_rows(kind, fused, False, n_class):
        assert not launch.geometry(kind, "bf16", n_class, fused, latency=True).reread
        latency = disassemble(build(launch.norm_spec(kind, "bf16", n_class, fused, latency=True),
                                    Target.parse(sm)).cubin)
        assert not re.search(r"\bLDG\.E\.E[LF]\b", latency)


@pytest.mark.parametrize("kind", ["rms", "layer"])
def test_persistent_shifted_builds_store_row_ends_in_pieces(kind):
    """The persistent shifted FP8 builds (4096 columns, sm_90a) store a row's partial end chunks
    as aligned pieces of 2 and 4 bytes (shifted.store_ends), not only byte by byte, and stage
    the lead chunk's parameters in shared memory (128-bit reads back); nothing spilled."""
    from cutefi.jit.compile import build
    from cutefi.jit.sass import disassemble
    from cutefi.jit.targets import Target

    shape = launch.geometry(kind, "bf16", 4096, aligned=False, out_dtype="fp8e4m3")
    assert shape.prefetch and shape.lead_chunk_alone
    spec = launch.norm_spec(kind, "bf16", 4096, aligned=False, out_dtype="fp8e4m3")
    sass = disassemble(build(spec, Target.parse("9.0a")).cubin)
    assert re.search(r"\bSTG\.E\.U16\b", sass) and re.search(r"\bSTG\.E\s", sass)
    assert re.search(r"\bLDS\.128\b", sass)
    assert not re.search(r"\b(LDL|STL)\b", sass)
