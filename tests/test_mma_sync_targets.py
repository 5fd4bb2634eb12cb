"""CPU tier: warp-level mma.sync builds, and becomes tensor-core SASS, for every target the
policy keeps for the mma_sync family (sm_80 … sm_121a, Blackwell included).

A one-warp CuTe DSL kernel issues one bf16 m16n8k16 MMA atom. For each kept target the PTX
must hold ``mma.sync.aligned`` and the SASS (``nvdisasm``, from the ``nvidia-cuda-nvdisasm``
wheel in the test extra) an ``HMMA``. A target the policy drops is skipped with the policy's
reason, and checked to be one the installed CuTe DSL really cannot build.
"""

import functools
import os
import re
import tempfile

import pytest

from cutefi.jit.policy import Family, TargetPolicy
from cutefi.jit.ptx import cubin_target
from cutefi.jit.targets import Target

from conftest import requires_dsl

# Every compute capability with warp-level mma.sync tensor cores that cutefi targets.
MMA_SYNC_CCS = ["8.0", "8.6", "8.9", "9.0", "10.0", "10.3", "11.0", "12.0", "12.1"]

PTX_MMA = "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32"
SASS_HMMA = re.compile(r"\bHMMA\.16816\.F32\.BF16\b")


@functools.lru_cache(maxsize=1)
def _mma_program():
    """The CuTe DSL program: a host function launching one warp that runs one MMA atom."""
    import cutlass
    import cutlass.cute as cute

    @cute.kernel
    def one_mma_kernel(tiled_mma: cute.TiledMma, gA: cute.Tensor, gB: cute.Tensor,
                       gC: cute.Tensor):
        tidx, _, _ = cute.arch.thread_idx()
        thr_mma = tiled_mma.get_slice(tidx)
        tCgA = thr_mma.partition_A(gA)
        tCgB = thr_mma.partition_B(gB)
        tCgC = thr_mma.partition_C(gC)
        tCrA = tiled_mma.make_fragment_A(tCgA)
        tCrB = tiled_mma.make_fragment_B(tCgB)
        tCrC = tiled_mma.make_fragment_C(tCgC)
        cute.autovec_copy(tCgA, tCrA)
        cute.autovec_copy(tCgB, tCrB)
        tCrC.fill(0.0)
        cute.gemm(tiled_mma, tCrC, tCrA, tCrB, tCrC)
        cute.autovec_copy(tCrC, tCgC)

    @cute.jit
    def one_mma(a: cute.Tensor, b: cute.Tensor, c: cute.Tensor):
        # C (16x8, f32) = A (16x16, bf16, K-major) @ B (8x16, bf16, K-major)^T
        op = cute.nvgpu.warp.MmaF16BF16Op(cutlass.BFloat16, cutlass.Float32, (16, 8, 16))
        tiled_mma = cute.make_tiled_mma(op)
        one_mma_kernel(tiled_mma, a, b, c).launch(grid=(1, 1, 1), block=(32, 1, 1))

    return one_mma


def _compile(sm: str):
    """``cute.compile`` for ``sm`` without a GPU, as cutefi's build does: (cubin, ptx)."""
    import cutlass
    import cutlass.cute as cute
    from cutlass.cute.runtime import make_fake_compact_tensor

    a = make_fake_compact_tensor(cutlass.BFloat16, (16, 16), stride_order=(1, 0))
    b = make_fake_compact_tensor(cutlass.BFloat16, (8, 16), stride_order=(1, 0))
    c = make_fake_compact_tensor(cutlass.Float32, (16, 8), stride_order=(1, 0))
    with tempfile.TemporaryDirectory(prefix="cutefi-mma-sync-") as dump_dir:
        compiled = cute.compile(
            _mma_program(), a, b, c,
            options=f"--gpu-arch {sm} --keep-cubin --keep-ptx --dump-dir {dump_dir}",
        )
        return compiled.__cubin__, compiled.__ptx__


def _decide(cc: str):
    """The installed CuTe DSL's policy for one compute capability: (target or None, reason)."""
    from cutefi.jit.toolchain import dsl_toolchain

    decision = TargetPolicy((Target.parse(cc),), dsl_toolchain()).decide(Family.MMA_SYNC)
    if decision.kept:
        (target,) = decision.kept
        return target, None
    ((_, reason),) = decision.dropped
    return None, reason


def _sass_or_skip(cubin: bytes) -> str:
    from cutefi.jit.sass import DisassemblerNotFoundError, disassemble

    try:
        return disassemble(cubin)
    except DisassemblerNotFoundError as error:
        if os.environ.get("CI"):
            raise  # CI installs the test extra, which brings nvdisasm: never skip there
        pytest.skip(str(error))


@requires_dsl
@pytest.mark.parametrize("cc", MMA_SYNC_CCS)
def test_mma_sync_becomes_hmma(cc):
    target, reason = _decide(cc)
    if target is None:
        pytest.skip(f"the policy drops CC {cc} for the installed CuTe DSL: {reason}")
    assert target.cc == Target.parse(cc).cc
    cubin, ptx = _compile(target.sm)
    assert isinstance(cubin, bytes) and cubin, f"no cubin for {target.sm}"

    built_for = cubin_target(cubin)
    assert built_for.cc == target.cc, f"{target.sm}: cubin ELF header names {built_for.sm}"
    assert re.search(rf"^\.target\s+{target.sm}\b", ptx, re.M), f"{target.sm}: PTX .target"
    assert PTX_MMA in ptx, f"{target.sm}: no {PTX_MMA} in the PTX"

    sass = _sass_or_skip(cubin)
    hmma = SASS_HMMA.findall(sass)
    assert len(hmma) == 1, f"{target.sm}: expected one HMMA.16816.F32.BF16, SASS:\n{sass}"


@requires_dsl
def test_policy_drops_only_what_the_dsl_cannot_build():
    """The policy claims no target the DSL cannot build, and drops none it can."""
    cubin, _ = _compile("sm_80")  # the program itself builds, so a failure below is the target's
    assert isinstance(cubin, bytes)
    for cc in MMA_SYNC_CCS:
        target, reason = _decide(cc)
        if target is not None:
            continue
        assert reason and "\n" not in reason and ". " not in reason, reason  # one sentence
        requested = Target.parse(cc)
        sm = f"{requested.sm}a" if requested.major >= 10 else requested.sm
        try:
            cubin, _ = _compile(sm)
        except Exception:  # refused outright: the policy was right to drop it
            continue
        # CuTe DSL 4.8.1 on CUDA 12.9 takes --gpu-arch sm_110a but builds sm_101a (Thor's
        # name before CUDA 13) and returns the path of a file it never wrote, not the cubin.
        good = isinstance(cubin, bytes) and cubin_target(cubin).cc == requested.cc
        assert not good, f"the DSL builds {sm}, yet the policy drops it: {reason}"
