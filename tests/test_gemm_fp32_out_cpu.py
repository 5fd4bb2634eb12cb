"""CPU tier: the dense GEMM builds that write fp32 (``out_dtype=torch.float32``, FlashInfer's
mm_bf16 / bmm_bf16 option): each kernel kind builds for its targets and stores whole fp32
values (4 or 8 bytes a store, never split into 16-bit halves), with its MMAs and no spills."""

from __future__ import annotations

import re

import pytest

from cutefi.gemm import launch
from cutefi.gemm.launch import Sm90Config

from conftest import requires_dsl
from test_gemm_builds_cpu import _build


def test_fp32_out_is_dense_16_bit_only():
    """FP8, block-scaled and grouped builds keep 16-bit outputs (their APIs take no fp32)."""
    assert "fp32" in launch.DENSE_OUT_DTYPES and "fp32" not in launch.OUT_DTYPES
    assert not any(key[1] == "fp32" for key in launch.BLOCK_SCALED_SPECS)
    assert not any(key[1] == "fp32" for key in launch.GROUPED_SPECS)
    assert not any(key[1] == "fp32" and key[0] in launch.FP8_DTYPES for key in launch.SM90_SPECS)
    # the TMA-store epilogue's pieces are 64 bytes of a row at any type (16 fp32 columns): the
    # main loop keeps the ring stages of a 16-bit output
    assert launch.epi_tile_n("fp32") == 16 and launch.epi_tile_n("bf16") == launch.EPI_TILE_N == 32
    for config in launch.CONFIGS:
        assert config.stages("bf16", "fp32") == config.stages("bf16", "bf16")
        assert config.smem_bytes("bf16", "fp32") <= launch.SMEM_LIMIT
    contract = launch.sm90_contract("bf16", "fp32", "k", 128, 256, 1)
    assert contract.recipe("c").box == (16, 128, 1)


@requires_dsl
@pytest.mark.parametrize("key,stores", [
    (("bf16", "fp32", "k", Sm90Config(128, 256, 1)), r"\bUTMASTG\.3D\b"),        # staged, TMA-stored
    (("fp16", "fp32", "n", Sm90Config(128, 128, 1)), r"\bUTMASTG\.3D\b"),
    (("bf16", "fp32", "k", Sm90Config(128, 128, 1, False, 2)), r"\bUTMASTG\.3D\b"),  # cluster split-K
    (("bf16", "fp32", "k", Sm90Config(128, 16, 1, True)), r"\bSTG\.E\b"),         # swapped: from registers
], ids=lambda v: v[3].name if isinstance(v, tuple) else "")
def test_hopper_fp32_out_builds(key, stores):
    _, sass = _build(launch.SM90_SPECS[key], "9.0a")
    assert re.search(r"\bHGMMA\.64x\d+x16\.F32\b", sass)
    assert re.search(stores, sass)
    assert not re.search(r"\bSTG\.E\.U16\b", sass), "an fp32 value stored as 16-bit halves"
    assert not re.search(r"\b(LDL|STL)\b", sass), "the fp32-out build spills"


@requires_dsl
@pytest.mark.parametrize("arch", ["8.0", "12.0a"])
@pytest.mark.parametrize("kind", ["sm80", "skinny", "gemv"])
def test_mma_sync_fp32_out_builds(kind, arch):
    spec = {"sm80": launch.SM80_SPECS[("bf16", "fp32", "k", launch.SM80_CONFIGS[0])],
            "skinny": launch.SKINNY_SPECS[("fp16", "fp32", launch.SKINNY_CONFIGS[0])],
            "gemv": launch.GEMV_SPECS[("bf16", "fp32", 1)]}[kind]
    _, sass = _build(spec, arch)
    if kind == "sm80":  # each thread's column pair of a row: one 8-byte store
        assert re.search(r"\bHMMA\.16816\.F32\b", sass) and re.search(r"\bSTG\.E\.64\b", sass)
    else:
        assert re.search(r"\bSTG\.E\b", sass)
    assert not re.search(r"\bSTG\.E\.U16\b", sass), "an fp32 value stored as 16-bit halves"
    assert not re.search(r"\b(LDL|STL)\b", sass)
