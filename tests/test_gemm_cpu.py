"""CPU tier: the dense GEMM family without a GPU: the tile raster, the written heuristic and
its override, the launch contract and argument checks (the builds' SASS: test_gemm_builds_cpu)."""

from __future__ import annotations


import pytest
import torch

import cutefi
from cutefi.cute.tile_scheduler import GroupedRaster
from cutefi.gemm import launch
from cutefi.gemm.plan import SkinnyPlan, choose_config, launch_plan, override, parse_config
from cutefi.gemm.launch import SkinnyConfig, Sm90Config

H200_SMS = 132


@pytest.mark.parametrize("tiles_m,tiles_n,batch,group_m", [(1, 1, 1, 8), (5, 3, 2, 2), (13, 7, 1, 8),
                                                           (8, 32, 3, 8), (3, 9, 1, 1), (33, 2, 1, 4)])
def test_raster_visits_every_tile_once_in_groups(tiles_m, tiles_n, batch, group_m):
    raster = GroupedRaster(tiles_m, tiles_n, batch, group_m)
    coords = [raster.coords(i) for i in range(raster.total)]
    assert sorted(coords) == sorted((m, n, b) for m in range(tiles_m) for n in range(tiles_n)
                                    for b in range(batch))
    for start in range(0, raster.total, tiles_m * tiles_n):  # each batch entry, in groups
        for i in range(start, start + tiles_m * tiles_n, group_m * tiles_n):
            rows = {m for m, _, _ in coords[i:min(i + group_m * tiles_n, start + tiles_m * tiles_n)]}
            assert len(rows) <= group_m


def test_heuristic():
    assert choose_config(8192, 8192, 1, H200_SMS, True) == Sm90Config(128, 256, 1)
    assert choose_config(8192, 8192, 1, H200_SMS, False) == Sm90Config(128, 256, 1)
    assert choose_config(1024, 4096, 1, H200_SMS, True) == Sm90Config(128, 256, 1)  # 128 tiles: 0.97 wave
    assert choose_config(512, 4096, 1, H200_SMS, True) == Sm90Config(128, 128, 1)
    assert choose_config(16, 4096, 1, H200_SMS, True) == Sm90Config(128, 16, 1, True)  # the weight as A
    assert choose_config(16, 2048, 1, H200_SMS, False) == Sm90Config(128, 64, 1)
    assert choose_config(16, 4096, 1, H200_SMS, False) == Sm90Config(128, 128, 1)  # 32 tiles: split-K fills
    assert choose_config(16, 8192, 1, H200_SMS, False) == Sm90Config(128, 256, 1)  # the weight streams
    assert choose_config(16, 28672, 1, H200_SMS, False) == Sm90Config(128, 256, 1)
    # 129-256 tokens on 4096 weight rows (any K, 16 bits): 128 x 64 tiles, one wave, no split
    for m, k in ((129, 4096), (200, 4096), (256, 8192), (200, 14336), (256, 28672)):
        plan = launch_plan(m, 4096, k, 1, H200_SMS, True)
        assert (plan.config, plan.splits, plan.ctas) == (Sm90Config(128, 64, 1), 1, 128)
    # (FP8 keeps the weight multicast to 64-token tile pairs: not measured against those tiles)
    plan = launch_plan(200, 4096, 4096, 1, H200_SMS, True, k_tile=128)
    assert (plan.config, plan.splits, plan.ctas) == (Sm90Config(128, 64, 1, True, 1, 2), 1, 128)
    # else from 65 rows under a wave of wide tiles: narrow ones (below a wave of them, two K
    # splits meeting in a cluster)
    for m, n, k, splits in ((128, 8192, 8192, 2), (128, 4096, 14336, 4)):
        plan = launch_plan(m, n, k, 1, H200_SMS, True)
        assert (plan.config, plan.splits) == (Sm90Config(128, 128, 1, False, 2), splits)
    plan = launch_plan(200, 4096, 14336, 1, H200_SMS, False)  # (an N-major B: no 128 x 64 rule)
    assert (plan.config, plan.splits) == (Sm90Config(128, 128, 1, False, 2), 2)
    plan = launch_plan(200, 4096, 4096, 2, H200_SMS, True)  # (a batch of two: no swapped build; one wave)
    assert (plan.config, plan.splits) == (Sm90Config(128, 128, 1), 1)
    plan = launch_plan(256, 8192, 8192, 1, H200_SMS, True)  # 128 narrow tiles: one wave, no split
    assert (plan.config, plan.splits) == (Sm90Config(128, 128, 1), 1)
    # whole waves times a tile's time: 1024 x 14336 is 3.4 waves of wide tiles (4 x 1.0), 3.9
    # of 224-wide ones (4 x 0.875 x 1.01), 6.8 of narrow ones (7 x 0.5 x 1.05)
    assert choose_config(1024, 14336, 1, H200_SMS, True) == Sm90Config(128, 224, 1)
    assert choose_config(1024, 14336, 1, H200_SMS, False) == Sm90Config(128, 128, 1)  # (no N-major 224 build)
    assert choose_config(1024, 14336, 1, H200_SMS, True, fp8=True) == Sm90Config(128, 128, 1)  # (nor FP8)
    # 256 x 14336: 112 wide tiles (0.85 of a wave) or 128 224-wide ones (0.97)
    assert choose_config(256, 14336, 1, H200_SMS, True) == Sm90Config(128, 224, 1)
    assert choose_config(2048, 14336, 1, H200_SMS, True) == Sm90Config(128, 256, 1)  # 27.2 / 31.0 waves: a tie
    assert choose_config(8192, 8192, 1, H200_SMS, True) == Sm90Config(128, 256, 1)  # (N not a multiple of 224)
    assert choose_config(1024, 28672, 1, H200_SMS, True) == Sm90Config(128, 256, 1)  # 6.8 waves of wide tiles
    assert choose_config(4096, 14336, 1, H200_SMS, True) == Sm90Config(128, 256, 1)  # 13.6 against 27.2: 97 vs 99%
    with override(config="128x64c1"):  # (M <= 16 takes the decode-sized kernel by default)
        plan = launch_plan(16, 4096, 4096, 1, H200_SMS, True)  # 64 tiles of 64 K tiles: two splits
        assert (plan.config, plan.splits, plan.units, plan.ctas) == (Sm90Config(128, 64, 1), 2, 128, 128)
    plan = launch_plan(80, 1024, 8192, 1, H200_SMS, True)  # 16 tiles, 128 K tiles: 8 splits of 16
    assert (plan.config, plan.splits, plan.ctas, plan.counter_elems) == (Sm90Config(128, 64, 1), 8, 128, 16)
    assert plan.workspace_elems == 128 * 128 * 64
    assert launch_plan(32, 4096, 64, 1, H200_SMS, True).splits == 1  # one K tile: nothing to cut
    assert launch_plan(4096, 4096, 4096, 1, H200_SMS, True).splits == 1
    plan = launch_plan(8192, 8192, 8192, 1, H200_SMS, True)
    assert plan.ctas == 132 and plan.group_m == 8
    with override(config="128x256c2"):  # clusters: whole pairs of CTAs, groups in pairs of M tiles
        plan = launch_plan(8192, 8192, 8192, 1, H200_SMS, True)
        assert plan.ctas == 132 and plan.ctas % 2 == 0 and plan.group_m == 4


def test_224_wide_tiles_take_a_k_major_b_only():
    """The 128 x 224 build exists for a K-major B only (an N-major B tile is whole 64-column
    swizzle atoms): forced on an N-major one, a clear error; FP8 and cluster_k have none."""
    assert ("bf16", "bf16", "k", Sm90Config(128, 224, 1)) in launch.SM90_SPECS
    assert ("bf16", "bf16", "n", Sm90Config(128, 224, 1)) not in launch.SM90_SPECS
    assert Sm90Config(128, 224, 1) not in launch.FP8_CONFIGS
    with override(config="128x224c1"):
        with pytest.raises(ValueError, match="K-major B only"):
            launch_plan(1024, 14336, 4096, 1, H200_SMS, False)
        plan = launch_plan(100, 14336, 8192, 1, H200_SMS, True)  # (split-K under a wave: no cluster pair)
        assert plan.config == Sm90Config(128, 224, 1) and plan.splits >= 1
    with pytest.raises(ValueError, match="cluster_k=2 needs tile_n a multiple of 64"):
        Sm90Config(128, 224, 1, False, 2)


def test_paired_k_stages():
    """The 16-bit dense swapped 64-row builds hold two K tiles a ring stage (not the 128-row
    ones, FP8, block-scaled or grouped builds); their ring still fits and keeps at least four
    stages."""
    paired = [c for c in launch.CONFIGS if c.k_tiles_a_stage("bf16") == 2]
    assert set(paired) == {Sm90Config(64, 64, 1, True, 2), Sm90Config(64, 32, 1, True, 2),
                           Sm90Config(64, 32, 1, True, 1, 2)}
    for config in paired:
        assert config.k_tiles_a_stage("fp8e4m3") == 1 and config.k_tiles_a_stage("bf16", block_scaled=True) == 1
        assert config.k_tiles_a_stage("bf16", grouped=True) == 1
        assert config.stages("bf16", "bf16") >= 4 and config.smem_bytes("bf16", "bf16") <= launch.SMEM_LIMIT
        # (a stage's bytes: two K tiles of A and B)
        unpaired = config.head_bytes(config.stages("bf16", "bf16"), False, 0) \
            + config.stages("bf16", "bf16") * config.tile_bytes()
        assert config.smem_bytes("bf16", "bf16") == unpaired + config.stages("bf16", "bf16") * config.tile_bytes()


def test_decode_sized_plan():
    """M <= 16 with a K-major b, one matrix: the mma.sync weight-streaming kernel (on Hopper up
    to 4096 weight rows, and K up to 8192 below 9 tokens; else the swapped wgmma build)."""
    plan = launch_plan(16, 4096, 4096, 1, H200_SMS, True)
    assert isinstance(plan, SkinnyPlan) and plan.config.token_tiles == 2
    assert plan.blocks * plan.config.rows >= 4096 and plan.splits >= 1
    assert launch_plan(8, 4096, 4096, 1, H200_SMS, True).config.token_tiles == 1
    # K cut into about sms / row blocks splits, each warp keeping two K steps (3 tokens: one or
    # two take the GEMV builds here, test_gemm_gemv_cpu)
    plan = launch_plan(3, 1024, 8192, 1, H200_SMS, True)
    steps = 8192 // plan.config.step_k
    assert plan.splits == min(round(H200_SMS / plan.blocks), steps // (2 * plan.config.k_groups)) == 4
    assert plan.workspace_elems == plan.blocks * plan.splits * plan.config.partial_elems
    assert launch_plan(16, 8192, 8192, 1, H200_SMS, True, wgmma=False).splits == 1  # two waves of row blocks
    assert launch_plan(16, 4096, 64, 1, H200_SMS, True).splits == 1  # one K step: nothing to cut
    # Hopper: the swapped wgmma build from 8192 weight rows on (two K splits: in a cluster)
    paired = launch_plan(16, 8192, 8192, 1, H200_SMS, True)
    assert (paired.config, paired.splits, paired.ctas) == (Sm90Config(128, 16, 1, True, 2), 2, 128)
    assert paired.workspace_elems == paired.counter_elems == 0
    # Hopper, up to 8 tokens and K past 8192: the swapped build (four splits, pairs in clusters)
    plan = launch_plan(8, 4096, 14336, 1, H200_SMS, True)
    assert (plan.config, plan.splits) == (Sm90Config(128, 16, 1, True, 2), 4)
    assert isinstance(launch_plan(9, 3584, 14336, 1, H200_SMS, True), SkinnyPlan)  # (9-16: test_gemm_stream_cpu)
    assert isinstance(launch_plan(1, 4096, 14336, 1, H200_SMS, True, wgmma=False), SkinnyPlan)
    plan = launch_plan(64, 4096, 4096, 1, H200_SMS, True)  # (64-row weight tiles, K in two in a cluster)
    assert (plan.config, plan.splits, plan.ctas) == (Sm90Config(64, 64, 1, True, 2), 2, 128)
    for m, batch, k_major in ((17, 1, True), (16, 2, True), (16, 1, False)):
        assert not isinstance(launch_plan(m, 4096, 4096, batch, H200_SMS, k_major), SkinnyPlan)
    with override(config="t1r4w8u2g2", splits=5):
        plan = launch_plan(3, 4096, 4096, 1, H200_SMS, True)
        assert (plan.config, plan.splits, plan.blocks) == (SkinnyConfig(1, 4, 8, 2, 2), 5, 32)
    with override(config="t1r2w8u4g1"), pytest.raises(ValueError, match="M <= 8"):
        launch_plan(9, 4096, 4096, 1, H200_SMS, True)
    with override(config="t2r2w8u4g1"), pytest.raises(ValueError, match="K-major"):
        launch_plan(9, 4096, 4096, 1, H200_SMS, False)
    with override(config="128x64c1"):  # a Hopper override takes decode sizes too
        assert launch_plan(1, 4096, 4096, 1, H200_SMS, True).config == Sm90Config(128, 64, 1)
    with pytest.raises(ValueError, match="not built"):
        parse_config("t2r2w4u4g1")
    # (a block-scaled build, or a multicast one FP8 lacks, forced on other inputs: refused by name)
    for config, k_tile, what in (("128x192c1", 64, "16-bit"), ("128x192c1", 128, "FP8"), ("128x256c2", 128, "FP8")):
        with override(config=config), pytest.raises(ValueError, match=f"{config} has no {what} build"):
            launch_plan(4096, 4096, 4096, 1, H200_SMS, True, k_tile=k_tile)
    with pytest.raises(ValueError, match="reads like t2r2w8u4g1"):
        parse_config("t2r2")


def test_override_and_its_errors(monkeypatch):
    with override(splits=3, config="128x64c1"):
        plan = launch_plan(16, 4096, 4096, 1, H200_SMS, True)
        assert plan.splits == 3 and plan.units == 3 * 64
    with override(splits=5):  # 64 K tiles in splits of 13: the fifth keeps 12
        assert launch_plan(32, 4096, 4096, 1, H200_SMS, True).splits == 5
    with override(splits=7):  # 10 K tiles: splits of 2, so 5 of them
        assert launch_plan(32, 4096, 640, 1, H200_SMS, True).splits == 5
    with override(config="128x128c1", group_m=3):
        plan = launch_plan(8192, 8192, 8192, 1, H200_SMS, True)
        assert plan.config == Sm90Config(128, 128, 1) and plan.group_m == 3
    assert launch_plan(8192, 8192, 8192, 1, H200_SMS, True).config == Sm90Config(128, 256, 1)
    with pytest.raises(ValueError, match="tile_n must be"):
        parse_config("128x160c1")
    with pytest.raises(ValueError, match="reads like"):
        parse_config("big")
    with override(config="128x256c2"), pytest.raises(ValueError, match="K-major"):
        choose_config(4096, 4096, 1, H200_SMS, False)
    monkeypatch.setenv("CUTEFI_GEMM_CONFIG", "128x64c1")
    assert choose_config(8192, 8192, 1, H200_SMS, True) == Sm90Config(128, 64, 1)


@pytest.mark.parametrize("config", launch.CONFIGS, ids=lambda c: c.name)
def test_contract_fits_hopper(config):
    for dtype in launch.DTYPES:
        contract = launch.sm90_contract(dtype, dtype, "k", config.tile_m, config.tile_n, config.cluster_m,
                                       config.swap)
        assert contract.smem_bytes <= launch.SMEM_LIMIT
        assert config.stages(dtype, dtype) >= 4
        for recipe in contract.tma:
            assert all(1 <= extent <= 256 for extent in recipe.box)
        assert contract.recipe("b").box[1] * config.cluster_m == config.tile_n


def test_specs_cover_the_api():
    for dtype in launch.DTYPES:
        for out_dtype in launch.DENSE_OUT_DTYPES:
            for config in launch.CONFIGS:
                assert (dtype, out_dtype, "k", config) in launch.SM90_SPECS
                assert ((dtype, out_dtype, "n", config) in launch.SM90_SPECS) == (
                    config.cluster_m == 1 and not config.swap and config.tile_n % 64 == 0)
            for config in launch.SKINNY_CONFIGS:
                assert (dtype, out_dtype, config) in launch.SKINNY_SPECS
            for config in launch.SM80_CONFIGS:
                for b_major in launch.B_MAJORS:
                    assert (dtype, out_dtype, b_major, config) in launch.SM80_SPECS
            for tokens in launch.gemv_launch.GEMV_TOKENS:
                assert (dtype, out_dtype, tokens) in launch.GEMV_SPECS


BF16 = torch.bfloat16


def _w(n, k, dtype=BF16):
    return torch.randn(n, k).to(dtype).t()


@pytest.mark.parametrize("call,exc,pattern", [
    (lambda: cutefi.mm_bf16(torch.randn(4, 64).to(BF16), _w(128, 32)), ValueError, "K must match"),
    (lambda: cutefi.mm_bf16(torch.randn(4, 60).to(BF16), _w(128, 60)), ValueError, "multiples of 8"),
    (lambda: cutefi.mm_bf16(torch.randn(4, 64).to(BF16), _w(100, 64)), ValueError, "multiples of 8"),
    (lambda: cutefi.mm_bf16(torch.randn(64, 16).to(BF16).t(), _w(128, 64)), ValueError, "contiguous rows"),
    (lambda: cutefi.mm_bf16(torch.randn(4, 64).to(BF16), torch.randn(128, 128).to(BF16)[::2, ::2]),
     ValueError, "not taken without a copy"),
    (lambda: cutefi.mm_bf16(torch.randn(4, 64), _w(128, 64)), TypeError, "a must be torch.bfloat16"),
    (lambda: cutefi.mm_fp16(torch.randn(4, 64).half(), _w(128, 64)), TypeError, "b must be torch.float16"),
    (lambda: cutefi.mm_bf16(torch.randn(4, 64).to(BF16), _w(128, 64), out_dtype=torch.float64),
     TypeError, "out_dtype"),
    (lambda: cutefi.mm_bf16(torch.randn(4, 64).to(BF16), _w(128, 64), out=torch.empty(4, 128, dtype=BF16),
                            out_dtype=torch.float32), ValueError, "out must be"),
    (lambda: cutefi.mm_bf16(torch.randn(4, 64).to(BF16), _w(128, 64), out=torch.empty(4, 128)),
     ValueError, "out must be"),
    (lambda: cutefi.mm_bf16(torch.randn(4, 64).to(BF16), _w(128, 64), bias=torch.randn(128)),
     ValueError, "bias must be"),
    (lambda: cutefi.mm_bf16(torch.randn(4, 64).to(BF16), _w(128, 64), backend="cutlass"),
     ValueError, "FlashInfer's"),
    (lambda: cutefi.mm_bf16(torch.randn(4, 64).to(BF16), _w(128, 64), pdl=1), TypeError, "pdl"),
    (lambda: cutefi.mm_bf16(torch.randn(4, 64).to(BF16), torch.randn(1, 64, 8).to(BF16)), ValueError, "2-D"),
    (lambda: cutefi.bmm_bf16(torch.randn(2, 4, 64).to(BF16), torch.randn(3, 64, 8).to(BF16)),
     ValueError, "batch size"),
    (lambda: cutefi.mm_bf16("a", _w(128, 64)), TypeError, "a must be a torch.Tensor"),
])
def test_bad_arguments_are_refused(call, exc, pattern):
    with pytest.raises(exc, match=pattern):
        call()


def test_fp8_plan_and_refusals_without_a_gpu():
    """FP8 plans count K in 128-element stages and never take the 16-bit kernels; arguments are
    checked before any device is touched."""
    for k in (4096, 14336):  # (33-64 tokens on 4096 weight rows: 64-row tiles, K in two in a cluster)
        plan = launch_plan(64, 4096, k, 1, H200_SMS, True, k_tile=128)
        assert (plan.config, plan.splits) == (Sm90Config(64, 64, 1, True, 2), 2)
    plan = launch_plan(16, 4096, 4096, 1, H200_SMS, True, k_tile=128)
    assert plan.config == Sm90Config(128, 16, 1, True, 2) and plan.splits == 4  # (32 K stages: 4 splits of 8)
    assert launch_plan(8192, 8192, 8192, 1, H200_SMS, True, k_tile=128).config == Sm90Config(128, 256, 1)
    with override(config="t1r2w8u4g1"), pytest.raises(ValueError, match="16-bit inputs"):
        launch_plan(1, 4096, 4096, 1, H200_SMS, True, k_tile=128)
    import torch

    a = torch.zeros(4, 32, dtype=torch.float8_e4m3fn)
    b = torch.zeros(16, 32, dtype=torch.float8_e5m2).t()
    with pytest.raises(ValueError, match="CUDA"):  # (mixed formats pass the checks up to the device)
        cutefi.mm_fp8(a, b)
    with pytest.raises(TypeError, match="float8"):
        cutefi.mm_fp8(a, b.to(torch.bfloat16))
    with pytest.raises(ValueError, match="FlashInfer's"):
        cutefi.bmm_fp8(a[None], b[None], torch.ones(1), torch.ones(1), torch.bfloat16, backend="cublas")
    # FP8 tensor cores from sm_89 on (wgmma on Hopper, FP8 mma.sync elsewhere); none before
    assert all(cutefi.mm_fp8.is_compute_capability_supported(cc) for cc in (89, 90, 100, 120, 121))
    assert not any(cutefi.mm_fp8.is_compute_capability_supported(cc) for cc in (80, 86))
    assert set(cutefi.bmm_fp8.supported_dtypes) == {"fp8e4m3", "fp8e5m2"}


def test_swapped_plan():
    """17-64 tokens, one matrix, a K-major weight: Hopper's weight-as-A build, tiles over the
    weight's rows, K cut when they fill under half the SMs."""
    for k in (4096, 14336):  # (64-row weight tiles: 64 of them, K in two in a cluster)
        plan = launch_plan(64, 4096, k, 1, H200_SMS, True)
        assert plan.config == Sm90Config(64, 64, 1, True, 2) and plan.splits == 2 and plan.units == 128
    plan = launch_plan(20, 4096, 4096, 1, H200_SMS, True)  # (17-32 tokens: 32-token tiles)
    assert plan.config == Sm90Config(64, 32, 1, True, 2) and plan.splits == 2
    plan = launch_plan(64, 8192, 8192, 1, H200_SMS, True)  # (128 64-row tiles would take two waves)
    assert plan.config == Sm90Config(128, 64, 1, True, 2) and plan.splits == 2
    assert launch_plan(20, 14336, 4096, 1, H200_SMS, True).config == Sm90Config(128, 32, 1, True)
    assert not launch_plan(65, 4096, 4096, 1, H200_SMS, True).config.swap
    assert not launch_plan(64, 4096, 4096, 2, H200_SMS, True).config.swap
    assert not launch_plan(64, 4096, 4096, 1, H200_SMS, False).config.swap
    assert parse_config("128x16c1t") == Sm90Config(128, 16, 1, True)
    assert parse_config("128x32c1k2t") == Sm90Config(128, 32, 1, True, 2)
    assert parse_config("128x128c1k2") == Sm90Config(128, 128, 1, False, 2)
    # the weight multicast to two token tiles (a cluster along the tokens): no split-K
    assert parse_config("128x64c1n2t") == Sm90Config(128, 64, 1, True, 1, 2)
    with override(config="128x64c1n2t"):
        plan = launch_plan(200, 4096, 4096, 1, H200_SMS, True)  # (4 token tiles: 2 clusters a weight tile)
        assert (plan.splits, plan.ctas, plan.units) == (1, 128, 128)
        assert launch_plan(17, 4096, 4096, 1, H200_SMS, True).ctas == 64  # (1 token tile: a cluster's worth)
    with override(config="128x64c1n2t", splits=2), pytest.raises(ValueError, match="without a cluster"):
        launch_plan(200, 4096, 4096, 1, H200_SMS, True)
    with pytest.raises(ValueError, match="cluster_n must be"):
        Sm90Config(128, 64, 1, False, 1, 2)
    with pytest.raises(ValueError, match="tile_m must be"):
        Sm90Config(64, 64, 1, False)  # (64-row tiles: swap builds only)
    assert parse_config("64x64c1k2t") == Sm90Config(64, 64, 1, True, 2)
    with pytest.raises(ValueError, match="not built"):
        parse_config("128x256c1k2")
    with override(config="128x128c1k2", splits=3), pytest.raises(ValueError, match="multiples of 2"):
        launch_plan(256, 4096, 4096, 1, H200_SMS, True)
    with override(config="128x64c1k2t", splits=4):  # two clusters a tile: shares meet in the workspace
        plan = launch_plan(64, 4096, 4096, 1, H200_SMS, True)
    assert (plan.splits, plan.ctas, plan.counter_elems, plan.workspace_elems) == (4, 128, 64, 128 * 128 * 64 // 2)
    with pytest.raises(ValueError, match="cluster_k"):
        Sm90Config(128, 64, 2, False, 2)
    with override(config="128x32c1t"), pytest.raises(ValueError, match="K-major"):
        launch_plan(64, 4096, 4096, 1, H200_SMS, False)
    with pytest.raises(ValueError, match="tile_n must be one of"):
        Sm90Config(128, 48, 1, True)


def test_mma_sync_plan():
    """Every GPU but Hopper: the mma.sync kernel beyond decode sizes; tiles by waves."""
    from cutefi.gemm.plan import Sm80Plan

    plan = launch_plan(8192, 8192, 8192, 1, 84, True, wgmma=False)  # an RTX-class SM count
    assert isinstance(plan, Sm80Plan) and plan.config.name == "128x256x32s3" and plan.tiles == 64 * 32
    assert launch_plan(1024, 1024, 1024, 1, 84, True, wgmma=False).config.name == "128x128x32s4"
    assert launch_plan(128, 256, 1024, 1, 84, False, wgmma=False).config.name == "64x64x32s4"
    assert isinstance(launch_plan(8, 4096, 4096, 1, 84, True, wgmma=False), SkinnyPlan)
    assert isinstance(launch_plan(8, 4096, 4096, 1, 84, False, wgmma=False), Sm80Plan)  # N-major b
    with override(config="128x128x32s4"):  # forced on a Hopper too
        assert isinstance(launch_plan(4096, 4096, 4096, 1, 132, True), Sm80Plan)
    with pytest.raises(ValueError, match="not built"):
        parse_config("128x128x128s4")
    for config in launch.SM80_CONFIGS:
        assert config.smem_bytes("bf16") <= 99 * 1024  # sm_86/89/120's limit per CTA
    for config in launch.SM80_FP8_CONFIGS:
        assert config.smem_bytes("fp8e4m3") <= 99 * 1024


def test_fp8_mma_sync_plan():
    """FP8 off Hopper: the FP8 mma.sync builds, tiles by waves where the chip has FP8 MMAs,
    64 x 64 where ptxas emulates them (the 128-wide builds spill there); 16-bit configs and the
    decode kernel refused for FP8, the FP8 configs for 16-bit inputs."""
    from cutefi.gemm.plan import Sm80Plan

    fp8 = dict(k_tile=128, wgmma=False)
    plan = launch_plan(8192, 8192, 8192, 1, 84, True, **fp8)
    assert isinstance(plan, Sm80Plan) and plan.config.name == "128x256x64s3" and plan.tiles == 64 * 32
    assert launch_plan(1024, 1024, 1024, 1, 84, True, **fp8).config.name == "128x128x64s4"
    assert launch_plan(1, 4096, 4096, 1, 84, True, **fp8).config.name == "64x64x64s4"  # (never the decode kernel)
    assert launch_plan(8192, 8192, 8192, 1, 148, True, native_fp8=False, **fp8).config.name == "64x64x64s4"
    with override(config="128x128x64s4"):  # forced on a Hopper too
        assert launch_plan(4096, 4096, 4096, 1, 132, True, k_tile=128).config.name == "128x128x64s4"
        with pytest.raises(ValueError, match="not built for these inputs"):
            launch_plan(4096, 4096, 4096, 1, 84, True, wgmma=False)
    with override(config="128x128x32s4"), pytest.raises(ValueError, match="16-bit inputs"):
        launch_plan(4096, 4096, 4096, 1, 84, True, **fp8)
    # block scales: 128 x 128 from half a wave where the FP8 MMA is native, else 64 x 64
    from cutefi.gemm.plan import block_scaled_plan

    wide, small = launch.SM80_BLOCK_SCALED_CONFIGS
    assert block_scaled_plan(4096, 7168, 2048, 84, wgmma=False).config == wide
    assert block_scaled_plan(128, 2048, 2048, 84, wgmma=False).config == small  # (16 wide tiles)
    assert block_scaled_plan(4096, 7168, 2048, 148, wgmma=False, native_fp8=False).config == small
    with override(config=small.name):
        plan = block_scaled_plan(300, 1000, 1008, 132)  # (forced on a Hopper)
        assert (plan.config, plan.tiles) == (small, 5 * 16)
    with override(config="64x64x64s4"), pytest.raises(ValueError, match="no block-scaled mma.sync build"):
        block_scaled_plan(300, 1000, 1008, 132)


def test_block_scaled_plan():
    """From an eighth of a wave of 128 x 128 tiles, the 128-row tile whose rounds cost least
    (128 x 256 from 0.8 of a wave, B multicast in clusters of two from two M tiles), else 128 x
    64, swapped builds for a few tokens; splits pair in clusters."""
    from cutefi.gemm.plan import block_scaled_plan

    assert block_scaled_plan(4096, 7168, 2048, H200_SMS).config == Sm90Config(128, 256, 2)
    # 2.7 rounds of 192-wide tiles (11 columns) cost less than 2.2 of 256 or 4.1 of 128 (the
    # sweep behind BLOCK_SCALED_TILE_RATES: each of these the fastest measured)
    for m, n, k in ((4096, 2112, 7168), (4096, 576, 7168), (2048, 1536, 7168), (2048, 7168, 18432)):
        assert block_scaled_plan(m, n, k, H200_SMS).config == Sm90Config(128, 192, 1), (m, n, k)
    assert block_scaled_plan(2048, 576, 7168, H200_SMS).config == Sm90Config(128, 128, 1)
    for m, n, k in ((4096, 4096, 7168), (8192, 7168, 18432), (8192, 1536, 7168), (2048, 2048, 7168)):
        assert block_scaled_plan(m, n, k, H200_SMS).config == Sm90Config(128, 256, 2), (m, n, k)
    assert block_scaled_plan(256, 7168, 2048, H200_SMS).config == Sm90Config(128, 128, 1)
    # (one M tile: no pair to multicast to)
    assert block_scaled_plan(128, 65536, 7168, H200_SMS).config == Sm90Config(128, 256, 1)
    small = block_scaled_plan(65, 1024, 7168, H200_SMS)
    assert small.config == Sm90Config(128, 64, 1) and small.splits > 1
    # up to 64 tokens swapped (the weight's rows fill the tile), split over K: 32-token tiles, two
    # a weight tile from 33 tokens where they fill at most half the SMs, else 64-token tiles
    single = block_scaled_plan(1, 7168, 2048, H200_SMS).config
    assert single.swap and single.tile_n == 32
    swapped = block_scaled_plan(64, 4096, 7168, H200_SMS)
    assert (swapped.config, swapped.splits) == (Sm90Config(128, 32, 1, True, 2), 2)
    for n, k in ((7168, 2048), (7168, 18432)):
        wide = block_scaled_plan(64, n, k, H200_SMS)
        assert (wide.config, wide.splits) == (Sm90Config(128, 64, 1, True, 2), 2)
    assert not block_scaled_plan(65, 4096, 7168, H200_SMS).config.swap
    # an odd split count drops one to pair from five splits; three stay whole (the workspace)
    assert (lambda p: (p.config, p.splits))(block_scaled_plan(64, 2112, 7168, H200_SMS)) == \
        (Sm90Config(128, 32, 1, True), 3)
    for m, config in ((1, Sm90Config(128, 32, 1, True, 2)), (128, Sm90Config(128, 128, 1, False, 2))):
        dropped = block_scaled_plan(m, 2112, 7168, H200_SMS)
        assert (dropped.config, dropped.splits) == (config, 6)
    paired = block_scaled_plan(128, 4096, 7168, H200_SMS)
    assert paired.config == Sm90Config(128, 128, 1, False, 2) and paired.splits % 2 == 0
    with override(config="128x16c1t"), pytest.raises(ValueError, match="no block-scaled build"):
        block_scaled_plan(4096, 4096, 4096, H200_SMS)


def test_split_k_scratch_grows_without_freeing(monkeypatch):
    """A stream's split-K scratch grows (at least doubling) and its old tensors stay alive: a
    CUDA graph captured on them keeps their addresses (freed, they could be handed to other
    tensors and the graph's replays would write into those)."""
    import torch

    from cutefi.gemm import api

    made = []
    real_empty, real_zeros = torch.empty, torch.zeros

    def fake(real):
        def make(size, dtype, device):
            made.append(device)
            return real(size, dtype=dtype)
        return make

    monkeypatch.setattr(torch, "empty", fake(real_empty))
    monkeypatch.setattr(torch, "zeros", fake(real_zeros))
    monkeypatch.setattr(api, "_SCRATCH", {})
    monkeypatch.setattr(api, "_RETIRED", [])
    first = api._scratch(0, 7, 10, 10)
    assert api._scratch(0, 7, 1 << 20, 1024) is first  # (big enough already: no new tensors)
    grown = api._scratch(0, 7, (1 << 20) + 1, 5)
    assert grown[0].numel() == 2 << 20 and grown[1].numel() == 2048
    assert api._RETIRED == [first] and made == ["cuda:0"] * 4
    assert api._scratch(0, 8, 1, 1) is not grown  # another stream, its own scratch
