"""CPU tier: the prefill family without a GPU: the work partition (every (request, q tile)
once, most KV tiles first, the KV tile range against a brute-force mask), the argument checks
that run before any device is touched, and the Hopper builds' SASS (both GEMMs on HGMMA, Q/K/V
by TMA, no local memory)."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch

import cutefi
from cutefi.prefill import launch, plan

from conftest import requires_dsl


def _sass(spec, arch: str) -> str:
    """The SASS of ``spec`` built for ``arch`` (skips where no disassembler is installed)."""
    from cutefi.jit.compile import build
    from cutefi.jit.sass import DisassemblerNotFoundError, disassemble
    from cutefi.jit.targets import Target

    try:
        return disassemble(build(spec, Target.parse(arch)).cubin)
    except DisassemblerNotFoundError as error:
        pytest.skip(str(error))


def _visible_tiles(qo_len, kv_len, m_block, causal, window_left, tile_n):
    """The KV tiles holding a key some row of the q tile sees, by brute force."""
    rows = np.arange(m_block * launch.TILE_M, min((m_block + 1) * launch.TILE_M, qo_len)) + kv_len - qo_len
    cols = np.arange(kv_len)
    visible = np.ones((rows.size, kv_len), dtype=bool)
    if causal:
        visible &= cols[None, :] <= rows[:, None]
    if window_left >= 0:
        visible &= cols[None, :] >= rows[:, None] - window_left
    return {c // tile_n for c in cols[visible.any(axis=0)]}


@pytest.mark.parametrize("head_dim", launch.HEAD_DIMS)
def test_kv_tile_range_covers_exactly_the_visible_tiles(head_dim):
    rng = np.random.default_rng(head_dim)
    tile_n = launch.tile_n(head_dim)
    for _ in range(300):
        qo_len, kv_len = int(rng.integers(1, 700)), int(rng.integers(0, 900))
        causal, window_left = bool(rng.integers(2)), int(rng.choice([-1, 0, 5, 130, 600]))
        for m_block in range(-(-qo_len // launch.TILE_M)):
            first, end = plan.kv_tile_range(np.array(qo_len), np.array(kv_len), np.array(m_block), causal,
                                            window_left, tile_n)
            seen = _visible_tiles(qo_len, kv_len, m_block, causal, window_left, tile_n)
            # the range holds every visible tile; a gap-free range may hold masked ones between them
            assert seen <= set(range(int(first), int(end)))
            if seen:
                assert int(first) == min(seen) and int(end) == max(seen) + 1


def test_partition_orders_pairs_by_cost():
    qo = np.array([0, 1, 300, 1300, 1300 + 4096])
    kv = np.array([0, 1, 400, 1400, 1400 + 4096])
    part = plan.partition(qo, kv, True, -1, 128)
    q_begin, qo_len, kv_begin, kv_len, m_block, mask_begin = part.work
    assert part.work.dtype == np.int32 and part.pairs == 1 + 3 + 8 + 32 and not mask_begin.any()
    pairs = set(zip(q_begin.tolist(), m_block.tolist()))
    assert len(pairs) == part.pairs  # every (request, q tile) once
    first, end = plan.kv_tile_range(qo_len, kv_len, m_block, True, -1, launch.tile_n(128))
    cost = end - first
    assert (cost[:-1] >= cost[1:]).all() and part.tiles == cost.sum()


def test_checks_before_the_device():
    bf16 = torch.bfloat16
    q, k = torch.randn(8, 4, 64).to(bf16), torch.randn(8, 2, 64).to(bf16)
    with pytest.raises(ValueError, match="custom_mask must be bool"):
        cutefi.single_prefill_with_kv_cache(q, k, k, custom_mask=torch.ones(8, 7, dtype=torch.bool))
    with pytest.raises(ValueError, match="packed_custom_mask holds 7 bytes"):
        cutefi.single_prefill_with_kv_cache(q, k, k, packed_custom_mask=torch.ones(7, dtype=torch.uint8))
    with pytest.raises(NotImplementedError, match="pos_encoding_mode"):
        cutefi.single_prefill_with_kv_cache(q, k, k, pos_encoding_mode="ALIBI")
    with pytest.raises(ValueError, match="rope_scale and rope_theta must be > 0"):
        cutefi.single_prefill_with_kv_cache(q, k, k, pos_encoding_mode="ROPE_LLAMA", rope_theta=-1.0)
    with pytest.raises(ValueError, match="head_dim must be one of"):
        cutefi.single_prefill_with_kv_cache(q[..., :32], k[..., :32], k[..., :32])
    with pytest.raises(ValueError, match="multiple of num_kv_heads"):
        cutefi.single_prefill_with_kv_cache(q[:, :3], k, k)
    with pytest.raises(TypeError, match="k and v must both have q.s dtype"):
        cutefi.single_prefill_with_kv_cache(q, k.half(), k.half())
    with pytest.raises(ValueError, match="kv_layout"):
        cutefi.single_prefill_with_kv_cache(q, k, k, kv_layout="NDH")
    with pytest.raises(ValueError, match="sm_scale must be > 0"):
        cutefi.single_prefill_with_kv_cache(q, k, k, sm_scale=0.0)
    with pytest.raises(ValueError, match="backend"):
        cutefi.single_prefill_with_kv_cache(q, k, k, backend="cudnn")
    assert cutefi.single_prefill_with_kv_cache.is_compute_capability_supported(90)
    assert cutefi.single_prefill_with_kv_cache.is_compute_capability_supported(80)  # (the mma.sync kernel)
    assert cutefi.single_prefill_with_kv_cache.is_compute_capability_supported(120)
    assert not cutefi.single_prefill_with_kv_cache.is_compute_capability_supported(75)


@requires_dsl
@pytest.mark.parametrize("head_dim,head_dim_vo", [(d, d) for d in launch.HEAD_DIMS] + [launch.MLA_HEAD_DIMS])
def test_sm90_sass(head_dim, head_dim_vo):
    """Ragged builds (and MLA's, head_dim_qk 192 with head_dim_vo 128): both GEMMs on HGMMA,
    Q/K/V by TMA, no local memory."""
    spec = launch.SM90_SPECS[("bf16", head_dim)] if head_dim == head_dim_vo else launch.SM90_MLA_SPECS["bf16"]
    sass = _sass(spec, "9.0a")
    tile_n = launch.tile_n(head_dim)
    qk = re.findall(r"\bHGMMA\.64x%dx16\.F32\.BF16 R\d+, gdesc" % tile_n, sass)  # S = Q K^T: smem operands
    pv = re.findall(r"\bHGMMA\.64x%dx16\.F32\.BF16 R\d+, R\d+" % head_dim_vo, sass)  # O += P V: P from registers
    # (S = Q K^T issued for the first unit's first KV tile, in the loop, and at a unit boundary
    # with the last tile's O += P V; O += P V in the loop and there: K blocks 3 and 2 times)
    assert len(qk) == 3 * head_dim // 16 and len(pv) == 2 * tile_n // 16, (len(qk), len(pv))
    _assert_wgmma_groups_kept(sass)
    # Q (a unit's, and the end marker's) and K: head_dim / 64 boxes each; V head_dim_vo / 64
    assert len(re.findall(r"\bUTMALDG\b", sass)) == (3 * head_dim + head_dim_vo) // launch.BOX_COLS
    assert not re.search(r"\b(LDL|STL)\b", sass), "the prefill kernel spills"
    # the softmax's 2^x: a unit's first tile all on MUFU.EX2, the loop's tiles but every
    # EXP2_ON_FMA-th column (two rows of tile_n / 4 columns a thread), and the rescale factors
    every = launch.EXP2_ON_FMA.get(head_dim, 0)
    columns = 2 * tile_n // 4
    exps = len(re.findall(r"\bMUFU\.EX2\b", sass))
    assert 4 <= exps - 2 * columns + (columns // every if every else 0) <= 12, exps  # (+ the rescales)


def test_exp2_fma_model():
    """``cute/exp2_fma``'s float32 steps, replayed in numpy: within 1.2e-4 of 2^x where the
    softmax needs it, exactly 0 for -inf and x <= -127 (fully masked rows stay empty), and
    never above 2^-125 up to -125."""
    from cutefi.cute import exp2_fma

    f32 = np.float32

    def model(x):
        x = np.maximum(x.astype(f32), f32(exp2_fma._FLOOR))
        rounded = x + f32(exp2_fma._ROUND)
        f = x - (rounded - f32(exp2_fma._ROUND))
        p = (f32(exp2_fma._C3) * f + f32(exp2_fma._C2)) * f + f32(exp2_fma._C1)
        p = p * f + f32(1.0)
        bits = p.view(np.int32).astype(np.int64) + (rounded.view(np.int32).astype(np.int64) << 23)
        return (bits & 0xFFFFFFFF).astype(np.uint32).view(f32)

    x = np.concatenate([np.linspace(-120, 8, 400001), -np.random.default_rng(0).exponential(3, 100000)]).astype(f32)
    x = x[x > -120]
    rel = np.abs(model(x).astype(np.float64) / np.exp2(x.astype(np.float64)) - 1)
    assert rel.max() < 1.2e-4, rel.max()
    assert np.all(model(np.array([-np.inf, -127, -200, -1e30], dtype=f32)) == 0)
    low = model(np.linspace(-127, -125, 20001).astype(f32))
    assert np.all((low >= 0) & (low <= 2.0 ** -125))


def _assert_wgmma_groups_kept(sass: str) -> None:
    """The kernel's wgmma groups stay asynchronous: six commits (S three times, P V twice, the
    boundary's empty group) and one WARPGROUP.DEPBAR a wait_group the kernel writes (five).
    Where ptxas serialises the wgmmas (C7515: a group that may stay in flight along a path it
    cannot rule out), every HGMMA commits and is waited for: dozens of each."""
    commits = re.findall(r"\bHGMMA\.[^\n]*\bgsb0\b", sass)
    waits = re.findall(r"\bWARPGROUP\.DEPBAR\b", sass)
    assert len(commits) <= 6 and len(waits) <= 5, f"wgmmas serialised: {len(commits)} commits, {len(waits)} waits"


@requires_dsl
@pytest.mark.parametrize("head_dim,page_size", [(128, 16), (64, 32), (256, 16), (256, 64)])
def test_paged_sm90_sass(head_dim, page_size):
    """Paged builds: a TMA box per page and 64 head-dim columns (4-D: the cache's pages, kv
    heads, page rows, head dim), the same wgmmas, no local memory."""
    sass = _sass(launch.PAGED_SPECS[("bf16", head_dim, page_size)], "9.0a")
    tile_n = launch.tile_n(head_dim, page_size)
    assert tile_n % page_size == 0
    assert len(re.findall(r"\bHGMMA\.64x%dx16\.F32\.BF16 R\d+, gdesc" % tile_n, sass)) == 3 * head_dim // 16  # (as test_sm90_sass)
    _assert_wgmma_groups_kept(sass)
    # one page loop (not unrolled) a tile of K and one of V: a box per 64 columns each
    assert len(re.findall(r"\bUTMALDG\.4D\b", sass)) == 2 * head_dim // launch.BOX_COLS
    assert not re.search(r"\b(LDL|STL)\b", sass), "the paged prefill kernel spills"


def test_paged_plan_checks_before_the_device():
    with pytest.raises(ValueError, match="float_workspace_buffer must be on a CUDA device"):
        cutefi.BatchPrefillWithPagedKVCacheWrapper(torch.empty(16, dtype=torch.uint8))
    with pytest.raises(ValueError, match="kv_layout"):
        cutefi.BatchPrefillWithPagedKVCacheWrapper(torch.empty(16, dtype=torch.uint8), "NDH")


@requires_dsl
@pytest.mark.parametrize("arch", ["8.0", "8.6", "8.9", "10.0a", "12.0a"])
@pytest.mark.parametrize("head_dim", launch.HEAD_DIMS)
def test_sm80_sass(arch, head_dim):
    """The mma.sync kernel builds for the family's targets (Blackwell included: compiled here,
    never run): per KV tile, S = Q K^T and O += P V on HMMA.16816 (tile_n / 8 x head_dim / 16
    MMAs each a warp), K/V and Q by cp.async (LDGSTS), fragments by ldmatrix, no local memory."""
    sass = _sass(launch.SM80_SPECS[("bf16", head_dim)], arch)
    tile_n = launch.SM80_TILE_N[head_dim]
    assert len(re.findall(r"\bHMMA\.16816\.F32\.BF16\b", sass)) == 2 * (tile_n // 8) * (head_dim // 16)
    passes = lambda rows: rows * head_dim // 8 // launch.SM80_THREADS
    # Q, the first K tile, and per tile one V and one K
    assert len(re.findall(r"\bLDGSTS\b", sass)) == passes(launch.TILE_M) + 3 * passes(tile_n)
    assert re.search(r"\bLDSM\.16\.MT88\.4\b", sass) and re.search(r"\bLDSM\.16\.M88\.4\b", sass)
    assert not re.search(r"\b(LDL|STL)\b", sass), "the mma.sync prefill kernel spills"


def test_masks_pack_like_segment_packbits():
    """Each request's [qo_len, kv_len] mask, row-major, 8 a byte with the first in the lowest
    bit, on a byte of its own (numpy's packbits per segment is the reference)."""
    from cutefi.prefill import masks

    rng = np.random.default_rng(5)
    qo_len, kv_len = np.array([1, 3, 0, 7, 2]), np.array([1, 5, 4, 9, 0])
    flat = rng.random(int((qo_len * kv_len).sum())) < 0.6
    packed, starts = masks.packed_mask(torch.from_numpy(flat), None, qo_len, kv_len, torch.device("cpu"))
    expected, first, offsets = [], 0, []
    for n in (qo_len * kv_len).tolist():
        offsets.append(sum(len(e) for e in expected))
        expected.append(np.packbits(flat[first:first + n], bitorder="little"))
        first += n
    assert starts.tolist() == offsets
    assert packed.numpy().tolist() == np.concatenate(expected).tolist()
    single = masks.single_mask(torch.from_numpy(flat[1:16].reshape(3, 5)), None, 3, 5, torch.device("cpu"))
    assert single.numpy().tolist() == np.packbits(flat[1:16], bitorder="little").tolist()
    with pytest.raises(ValueError, match="sum\\(qo_len \\* kv_len\\)"):
        masks.packed_mask(torch.from_numpy(flat[1:]), None, qo_len, kv_len, torch.device("cpu"))


@requires_dsl
@pytest.mark.parametrize("arch", ["8.0", "8.9", "12.0a"])
@pytest.mark.parametrize("kv_dtype", launch.KV_FP8)
def test_sm80_fp8_kv_sass(arch, kv_dtype):
    """FP8 K/V builds: the same HMMAs on f16/bf16 operands widened in shared memory (sm_89+
    e4m3 by F2FP.F16.E4M3, sm_80 by integer ops), no local memory."""
    sass = _sass(launch.SM80_FP8_SPECS[("bf16", 128, kv_dtype)], arch)
    assert len(re.findall(r"\bHMMA\.16816\.F32\.BF16\b", sass)) == 2 * (64 // 8) * (128 // 16)
    hardware = re.findall(r"\bF2FP\.F16\.E4M3\.UNPACK_B\b", sass)
    assert bool(hardware) == (kv_dtype == "fp8e4m3" and arch != "8.0"), len(hardware)
    assert not re.search(r"\b(LDL|STL)\b", sass), "the FP8 prefill kernel spills"


@requires_dsl
@pytest.mark.parametrize("arch", ["8.0", "9.0", "12.0a"])
def test_sm80_mla_sass(arch):
    """MLA builds (head_dim_qk 192, head_dim_vo 128): S over 12 K blocks, P V over 16 n-tiles
    of V, Q and K rows of 24 pieces spread over the threads, no local memory."""
    sass = _sass(launch.SM80_MLA_SPECS["bf16"], arch)
    tile_n = launch.SM80_TILE_N[192]
    mmas = (tile_n // 8) * (192 // 16) + (128 // 8) * (tile_n // 16)
    assert len(re.findall(r"\bHMMA\.16816\.F32\.BF16\b", sass)) == mmas
    pieces = lambda rows, cols: rows * cols // 8 // launch.SM80_THREADS
    assert len(re.findall(r"\bLDGSTS\b", sass)) == pieces(128, 192) + 2 * pieces(tile_n, 192) + pieces(tile_n, 128)
    assert not re.search(r"\b(LDL|STL)\b", sass), "the MLA prefill kernel spills"


def test_fp8_widen_decision():
    """FP8 K/V are widened for Hopper's kernel only where a KV token serves FP8_WIDEN_ROWS q
    rows (qo tokens x group, the batch's mean)."""
    from cutefi.prefill import ops

    e4m3, bf16, rows = torch.float8_e4m3fn, torch.bfloat16, ops.FP8_WIDEN_ROWS
    assert ops.fp8_widen(bf16, bf16, 10 * rows, 1) == 0  # (16-bit K/V: nothing to widen)
    assert ops.fp8_widen(e4m3, bf16, 2 * rows - 1, 2) == 0
    assert ops.fp8_widen(e4m3, bf16, 2 * rows, 2) == 1


@requires_dsl
@pytest.mark.parametrize("dtype,kv_dtype", [("bf16", "fp8e4m3"), ("fp16", "fp8e5m2")])
def test_widen_kv_sass(dtype, kv_dtype):
    """The FP8 widening kernel: one 128-bit load and two 128-bit stores a thread, e4m3 through
    the hardware conversion, no local memory."""
    sass = _sass(launch.WIDEN_SPECS[(dtype, kv_dtype)], "9.0a")
    assert len(re.findall(r"\bLDG\.E\.128\b", sass)) == 1 and len(re.findall(r"\bSTG\.E\.128\b", sass)) == 2
    assert len(re.findall(r"\bF2FP\.F16\.E4M3\.UNPACK_B\b", sass)) == (8 if kv_dtype == "fp8e4m3" else 0)
    assert not re.search(r"\b(LDL|STL)\b", sass)
