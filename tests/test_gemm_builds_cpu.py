"""CPU tier: the GEMM family's builds without a GPU, each for its targets, checked in its PTX
and SASS: HGMMA / QGMMA fed by TMA on sm_90a (a K step of wgmmas in flight, cluster split-K
through DSMEM, block scales promoted per K block, grouped rows stored from registers), HMMA fed
by cp.async and ldmatrix on the mma.sync targets (FP8 from sm_89, block-scaled, grouped), and
no local memory anywhere."""

from __future__ import annotations

import os
import re

import pytest

from cutefi.cute import block_scale
from cutefi.gemm import launch
from cutefi.gemm.launch import SkinnyConfig, Sm90Config

from conftest import requires_dsl


def _build(spec, arch: str):
    """(PTX, SASS) of ``spec`` built for ``arch``; skips where no disassembler is installed
    (never on CI)."""
    from cutefi.jit.compile import build
    from cutefi.jit.sass import DisassemblerNotFoundError, disassemble
    from cutefi.jit.targets import Target

    artifact = build(spec, Target.parse(arch))
    try:
        return artifact.ptx, disassemble(artifact.cubin)
    except DisassemblerNotFoundError as error:
        if os.environ.get("CI"):
            raise
        pytest.skip(str(error))


@requires_dsl

def test_hopper_build_is_hgmma_fed_by_tma():
    spec = launch.SM90_SPECS[("bf16", "bf16", "k", Sm90Config(128, 256, 2))]
    ptx, sass = _build(spec, "9.0a")
    assert "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16" in ptx
    assert "multicast::cluster" in ptx
    # (one 64-wide K step of 16 in each copy of the unrolled main loop: one wait a copy)
    copies = len(re.findall(r"\bWARPGROUP\.DEPBAR\.LE gsb0, 0x1\b", sass))
    assert copies >= 4 and len(re.findall(r"\bHGMMA\.64x256x16\.F32\.BF16\b", sass)) == 4 * copies
    assert re.search(r"\bUTMALDG\b", sass) and re.search(r"\bUTMASTG\b", sass)
    assert not re.search(r"\b(LDL|STL)\b", sass), "the Hopper GEMM spills"


@requires_dsl
@pytest.mark.parametrize("spec", [
    launch.SM90_SPECS[("bf16", "bf16", "k", Sm90Config(128, 64, 1))],
    launch.SM90_SPECS[("fp16", "fp16", "n", Sm90Config(128, 128, 1))],
    launch.SM90_SPECS[("bf16", "bf16", "k", Sm90Config(128, 16, 1, True))],
    launch.SM90_SPECS[("bf16", "bf16", "k", Sm90Config(128, 32, 1, True, 2))],
    launch.SM90_SPECS[("fp8e4m3", "bf16", "k", Sm90Config(128, 64, 1, True))],
    launch.GROUPED_SPECS[("bf16", "bf16", "k", Sm90Config(128, 128, 1))],
    launch.SM90_SPECS[("bf16", "bf16", "k", Sm90Config(64, 64, 1, True, 2))],
    launch.SM90_SPECS[("fp8e4m3", "bf16", "k", Sm90Config(64, 32, 1, True, 1, 2))],
], ids=lambda spec: "-".join(str(v) for _, v in spec.options))

def test_main_loop_keeps_a_k_step_of_wgmmas_in_flight(spec):
    """The main loop issues a K step's four wgmmas back to back and waits only for the step
    before (one ``DEPBAR gsb0, 0x1`` in each copy of the step: the loop is unrolled 4 times,
    with its remainder; the other wait drains the last step). Several
    accumulator sets, one a wgmma (tried for the narrow tiles), made ptxas wait for each
    wgmma before the next: a ``DEPBAR gsb0, 0x0`` after every one (ncu, H100, 64 x 4096 x 4096:
    a third of the consumers' stall samples; 10-13% slower at M = 16-256 on 4096 x 4096)."""
    _, sass = _build(spec, "9.0a")
    gmma = re.findall(r"\b[HQ]GMMA\.64x\d+x(?:16|32)\.", sass)
    waits = re.findall(r"\bWARPGROUP\.DEPBAR\.LE gsb0, 0x(\d)\b", sass)
    options = dict(spec.options)
    config = Sm90Config(options["tile_m"], options["tile_n"], options["cluster_m"], options["swap"],
                        options.get("cluster_k", 1), options.get("cluster_n", 1))
    # (a ring stage of the 16-bit 64-row swapped builds holds two K tiles: eight wgmmas a step)
    pair = config.k_tiles_a_stage(options["dtype"], options.get("block_scaled", False), options.get("grouped", False))
    copies = waits.count("1")
    assert copies >= 4 and len(gmma) == 4 * pair * copies, gmma  # (one 128-byte K tile: four wgmmas)
    assert waits.count("0") == 1 and len(waits) == copies + 1, waits
    if options["tile_m"] == 64:  # (64-row tiles: the two warpgroups take half the tokens each)
        assert all(f"GMMA.64x{options['tile_n'] // 2}x" in g for g in gmma), gmma


@requires_dsl
@pytest.mark.parametrize("config", [Sm90Config(128, 32, 1, True, 2), Sm90Config(128, 128, 1, False, 2)])

def test_cluster_split_k_build_meets_through_dsmem(config):
    """Split-K in a cluster: the partial sums go to the peer by st.async (STAS.128, completing
    on its mbarrier), never through global memory; HGMMA fed by TMA; no spills."""
    spec = launch.SM90_SPECS[("bf16", "bf16", "k", config)]
    ptx, sass = _build(spec, "9.0a")
    assert "st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.b32" in ptx
    # (one vector store a 4 values of the peer's share, for each of the two ranks' code paths)
    vectors = config.tile_m * config.tile_n // 2 // launch.WARPGROUP // 2 // 4
    assert len(re.findall(r"\bSTAS\.128\b", sass)) == 2 * vectors
    # (one workspace counter: only where several clusters split a tile)
    assert len(re.findall(r"atom\.global\.acq_rel\.add", ptx)) == 1
    assert re.search(r"\bHGMMA\.64x%d" % config.tile_n, sass) and re.search(r"\bUTMALDG\b", sass)
    assert not re.search(r"\b(LDL|STL)\b", sass), "the cluster split-K build spills"
    assert spec.launch_contract().cluster == (2, 1, 1)


@requires_dsl
@pytest.mark.parametrize("dtype,config", [("fp8e4m3", Sm90Config(128, 256, 1)), ("fp8e5m2", Sm90Config(128, 256, 1)),
                                          ("fp8e4m3", Sm90Config(128, 16, 1, True, 2))])

def test_fp8_build_is_qgmma_fed_by_tma(dtype, config):
    """FP8: wgmma with 8-bit operands (QGMMA, 32-deep K), 128-element K stages loaded by TMA,
    the per-tensor scales read at the store; no spills."""
    spec = launch.SM90_SPECS[(dtype, "bf16", "k", config)]
    ptx, sass = _build(spec, "9.0a")
    kind = {"fp8e4m3": "E4M3", "fp8e5m2": "E5M2"}[dtype]
    assert f"wgmma.mma_async.sync.aligned.m64n{config.tile_n}k32.f32.{kind.lower()}.{kind.lower()}" in ptx
    qgmma = re.findall(r"\bQGMMA\.64x%dx32\.F32\.%s\.%s\b" % (config.tile_n, kind, kind), sass)
    assert len(qgmma) >= 4  # (a 128-element K stage: four 32-deep wgmmas)
    assert re.search(r"\bUTMALDG\b", sass) and "scale_a" in " ".join(p.name for p in spec.launch_contract().params)
    assert not re.search(r"\b(LDL|STL)\b", sass), "the FP8 GEMM spills"


@requires_dsl
@pytest.mark.parametrize("arch", ["8.0", "9.0a", "12.0a"])

def test_decode_sized_build_streams_into_hmma(arch):
    """Every weight byte by a 16-byte load that skips L1, straight into HMMA; no spills."""
    config = SkinnyConfig(2, 2, 8, 4)
    ptx, sass = _build(launch.SKINNY_SPECS[("bf16", "fp16", config)], arch)
    assert "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32" in ptx
    assert "ld.global.L1::no_allocate.v4" in ptx
    # a full K step: 2 MMAs x unroll x row tiles x token tiles, plus the partial step's
    per_step = 2 * config.unroll * config.row_tiles * config.token_tiles
    assert len(re.findall(r"\bHMMA\.16816\.F32\.BF16\b", sass)) == 2 * per_step
    weight_loads = 2 * config.row_tiles * config.unroll  # a step's: in the prologue, the loop, the partial step
    assert len(re.findall(r"\bLDG\.E\.NA\.128\b", sass)) == 3 * weight_loads
    assert not re.search(r"\b(LDL|STL)\b", sass), "the decode-sized GEMM spills"


@requires_dsl
@pytest.mark.parametrize("arch,fp8,mma", [
    ("8.9", "fp8e4m3", r"QMMA\.16832\.F32\.E4M3\.E4M3"), ("12.0a", "fp8e5m2", r"QMMA\.16832\.F32\.E5M2\.E5M2"),
    ("10.0a", "fp8e4m3", r"HMMA\.16816\.F32"),
])

def test_fp8_mma_sync_build(arch, fp8, mma):
    """FP8 mma.sync: m16n8k32 in hardware on sm_89/sm_120a (QMMA), emulated by ptxas on sm_100a
    (two f16 HMMAs each, fed by F2FP unpacks); fed by LDGSTS and LDSM; no spills (the 64 x 64
    build where emulated; every tile where native)."""
    configs = launch.SM80_FP8_CONFIGS if mma.startswith("QMMA") else launch.SM80_FP8_CONFIGS[2:]
    for config in configs:
        ptx, sass = _build(launch.SM80_SPECS[(fp8, "bf16", "k", config)], arch)
        assert f"mma.sync.aligned.m16n8k32.row.col.f32.{fp8[3:]}.{fp8[3:]}.f32" in ptx
        per_warp = (config.tile_m // config.warps_m // 16) * (config.tile_n // config.warps_n // 8)
        steps = config.tile_k // 32
        count = len(re.findall(r"\b%s\b" % mma, sass))
        warps = config.warps_m * config.warps_n
        assert count == per_warp * steps * (2 if mma.startswith("HMMA") else 1), (config.name, count, warps)
        assert re.search(r"\bLDGSTS\.E\.BYPASS\.(LTC128B\.)?128\b", sass) and re.search(r"\bLDSM\.16\.", sass)
        assert not re.search(r"\b(LDL|STL)\b", sass), f"the FP8 mma.sync GEMM spills ({config.name}, {arch})"


@requires_dsl
@pytest.mark.parametrize("arch,b_major", [("8.0", "k"), ("8.6", "n"), ("12.0a", "k")])

def test_mma_sync_build_is_ldgsts_ldsm_hmma(arch, b_major):
    config = launch.SM80_CONFIGS[0]
    ptx, sass = _build(launch.SM80_SPECS[("bf16", "bf16", b_major, config)], arch)
    assert "cp.async.cg.shared.global" in ptx and "ldmatrix.sync.aligned" in ptx
    # a K tile of 32: each of 4 warps' 64 x 64 pieces is 4 x 8 MMAs of m16n8k16, twice
    assert len(re.findall(r"\bHMMA\.16816\.F32\.BF16\b", sass)) == 4 * 8 * 2
    assert re.search(r"\bLDGSTS\.E\.BYPASS\.(LTC128B\.)?128\b", sass) and re.search(r"\bLDSM\.16\.", sass)
    assert not re.search(r"\b(LDL|STL)\b", sass), "the mma.sync GEMM spills"


@requires_dsl
@pytest.mark.parametrize("arch", ["8.9", "12.0a", "10.0a"])

def test_block_scaled_mma_sync_build(arch):
    """Block scales on mma.sync: a 128-deep K tile's QMMAs (four k32 steps) into a scratch set,
    promoted with one FFMA an accumulator; no spills (the 64 x 64 build where ptxas emulates
    the FP8 MMA, sm_100a)."""
    native = arch != "10.0a"
    for config in launch.SM80_BLOCK_SCALED_CONFIGS[0 if native else 1:]:
        _, sass = _build(launch.SM80_BLOCK_SCALED_SPECS[("fp8e4m3", "bf16", config)], arch)
        per_warp = (config.tile_m // config.warps_m // 16) * (config.tile_n // config.warps_n // 8)
        mma = r"\bQMMA\.16832\.F32\.E4M3\.E4M3\b" if native else r"\bHMMA\.16816\.F32\b"
        assert len(re.findall(mma, sass)) == per_warp * 4 * (1 if native else 2), config.name
        assert len(re.findall(r"\bFFMA\b", sass)) >= config.tile_m * config.tile_n // config.threads
        assert not re.search(r"\b(LDL|STL)\b", sass), f"{config.name} spills on {arch}"


@requires_dsl
@pytest.mark.parametrize("arch", ["8.6", "12.0a"])

def test_grouped_mma_sync_builds(arch):
    """The mma.sync grouped builds (segment GEMM; FP8 experts with block scales from sm_89):
    the same MMAs a tile as the plain builds, no spills."""
    for key, spec in launch.SM80_GROUPED_SPECS.items():
        fp8 = key[0].startswith("fp8")
        if (fp8 and arch == "8.6") or key[1] == "fp16" or key[2] == "n":
            continue
        config = key[3]
        _, sass = _build(spec, arch)
        per_warp = (config.tile_m // config.warps_m // 16) * (config.tile_n // config.warps_n // 8)
        mma = r"\bQMMA\.16832\.F32\.E[45]M[23]\.E[45]M[23]\b" if fp8 else r"\bHMMA\.16816\.F32\.BF16\b"
        assert len(re.findall(mma, sass)) == per_warp * config.tile_k // (32 if fp8 else 16), (key, arch)
        assert not re.search(r"\b(LDL|STL)\b", sass), f"{key} spills on {arch}"


@requires_dsl
@pytest.mark.parametrize("a_format,b_format", [("fp8e4m3", "fp8e5m2"), ("fp8e5m2", "fp8e4m3")])

def test_mixed_fp8_builds(a_format, b_format):
    """Mixed FP8 formats: the wgmma and the mma.sync instruction take each operand's format
    (QGMMA ...E4M3.E5M2 on Hopper, a swapped build too; QMMA ...E4M3.E5M2 on sm_89)."""
    pair = (a_format, b_format)
    a_name, b_name = (f.upper()[3:] for f in pair)
    for config, width in ((Sm90Config(128, 256, 1), 256), (Sm90Config(128, 64, 1, True), 64)):
        _, sass = _build(launch.SM90_SPECS[(pair, "bf16", "k", config)], "9.0a")
        assert re.search(r"\bQGMMA\.64x%dx32\.F32\.%s\.%s\b" % (width, a_name, b_name), sass), config.name
        assert not re.search(r"\b(LDL|STL)\b", sass)
    _, sass = _build(launch.SM80_SPECS[(pair, "fp16", "k", launch.SM80_FP8_CONFIGS[0])], "8.9")
    assert len(re.findall(r"\bQMMA\.16832\.F32\.%s\.%s\b" % (a_name, b_name), sass)) == 64
    assert not re.search(r"\b(LDL|STL)\b", sass)


@requires_dsl
@pytest.mark.parametrize("config", launch.BLOCK_SCALED_CONFIGS)

def test_block_scaled_build_promotes_each_k_block(config):
    """Block scales: each 128-element K stage's QGMMAs (four, 32 deep) start from zero (RZ,
    !UPT) in a scratch set, kept asynchronous until the stage's one wait; the sums are promoted
    with one FFMA an accumulator; no spills. Where the ring has room the producer stages the
    scales with cp.async, tied to the stage's full barrier; elsewhere (128 x 128 / 64 tiles) the
    consumers load them a step ahead, two K steps a loop iteration (three copies of the step)."""
    spec = launch.BLOCK_SCALED_SPECS[("fp8e4m3", "bf16", config)]
    _, sass = _build(spec, "9.0a")
    # (a 256-wide tile: two 128-column slices, one after the other)
    width = block_scale.slice_width(config.tile_n)
    qgmma = re.findall(r"\bQGMMA\.64x%dx32\.F32\.E4M3\.E4M3 (R\d+), gdesc\[\w+\], (\w+)(.*);" % width, sass)
    staged = config.scale_slot(True) > 0
    assert staged == (config.swap or config.tile_n == 256)
    # (a 192-wide tile: a loop for each place it starts in its weight block)
    loops = len(block_scale.first_block_columns(config.tile_n)) if block_scale.weight_blocks(config.tile_n) > 1 else 1
    steps = 1 if staged else 3
    assert len(qgmma) == 4 * (config.tile_n // width) * loops * steps
    for first in range(0, len(qgmma), 4):
        stage = qgmma[first:first + 4]
        assert stage[0][1] == "RZ" and all(src == dst for dst, src, _ in stage[1:])
        assert [("gsb0" in rest) for _, _, rest in stage] == [False, False, False, True]  # (not serialised)
    assert len(re.findall(r"\bFFMA\b", sass)) >= config.tile_n // 2  # (64 rows x tile_n over 128 threads)
    assert not re.search(r"\b(LDL|STL)\b", sass), "the block-scaled FP8 GEMM spills"
    names = [p.name for p in spec.launch_contract().params]
    assert {"scale_rows", "sa_row", "sa_k", "sb_col", "sb_k"} <= set(names)
    assert bool(re.search(r"\bLDGSTS\.E\b", sass) and re.search(r"\bARRIVES\.LDGSTSBAR\.64\b", sass)) == staged
    if config.swap:
        assert config.stages("fp8e4m3", "bf16", block_scaled=True) >= 8


@requires_dsl
@pytest.mark.parametrize("config", launch.GROUPED_SWAP_CONFIGS)

def test_grouped_swapped_fp8_build(config):
    """The grouped FP8 builds for experts of a few tokens: the weight as the wgmma's A
    (QGMMA 64 x tokens), each K step's block scales staged by the producer (LDGSTS), the tile
    prefix counted by a warp scan (SHFL.UP), the tile stored transposed from registers (STG.E,
    no TMA store); no spills."""
    spec = launch.GROUPED_SPECS[("fp8e4m3", "bf16", "k", config)]
    _, sass = _build(spec, "9.0a")
    assert re.search(rf"\bQGMMA\.64x{config.tile_n}x32\.F32\.E4M3\.E4M3", sass)
    assert re.search(r"\bLDGSTS\b", sass) and re.search(r"\bSHFL\.UP\b", sass) and re.search(r"\bSTG\.E\b", sass)
    assert not re.search(r"\bUTMASTG\b", sass)
    assert not re.search(r"\b(LDL|STL)\b", sass), "the grouped swapped GEMM spills"
    assert spec.launch_contract().smem_bytes <= launch.SMEM_LIMIT


@requires_dsl
@pytest.mark.parametrize("key", [("bf16", "bf16", "k", Sm90Config(128, 256, 1)), ("fp16", "fp16", "n", Sm90Config(128, 128, 1)),
                                 ("fp8e4m3", "bf16", "k", Sm90Config(128, 256, 1))])

def test_grouped_build_stores_rows_from_registers(key):
    """Grouped (segment) builds: the usual wgmmas fed by TMA; a tile inside its segment stored by
    TMA, one crossing the segment's end from registers two columns a store (STG.E: it must not
    write the next segment's rows); the tile prefix counted in shared memory by a warp scan
    (SHFL.UP), not passed in; no spills."""
    spec = launch.GROUPED_SPECS[key]
    _, sass = _build(spec, "9.0a")
    assert re.search(r"\b[HQ]GMMA\.64x\d+x\d+\.F32", sass) and re.search(r"\bUTMALDG\b", sass)
    assert re.search(r"\bSTG\.E\b", sass) and re.search(r"\bUTMASTG\b", sass)
    assert not re.search(r"\b(LDL|STL)\b", sass), "the grouped GEMM spills"
    names = [p.name for p in spec.launch_contract().params]
    assert re.search(r"\bSHFL\.UP\b", sass)
    assert {"c_rows", "seg_indptr", "weight_indices", "groups", "ldc"} <= set(names) and "tile_prefix" not in names
    assert spec.launch_contract().smem_bytes <= launch.SMEM_LIMIT
