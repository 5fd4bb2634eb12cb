"""CPU tier: every registered kernel builds, within CI's budget as kernels multiply.

CI builds each registered spec once, for one target of its family's target list, rotating
through that list so every target is exercised by some kernels (``ci_build_plan``). Each build
is contract-checked by ``build`` itself (PTX entry kinds and alignments, directives, ELF
target); here the SASS is also read (nvdisasm): no local-memory traffic (spills) and, for the
memory-bound families, 128-bit global accesses. The full spec × target matrix is the
compile-only report (``cutefi-bench`` without a GPU → ``benchmarks/results/compile_report_cpu.txt``);
a spec covered by neither fails ``test_every_spec_is_covered``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from cutefi.jit.compile import build
from cutefi.jit.policy import TargetPolicy
from cutefi.jit.ptx import cubin_target
from cutefi.jit.registry import all_specs
from cutefi.jit.spec import KernelSpec
from cutefi.jit.targets import Target
from cutefi.jit.toolchain import toolchain_for

from conftest import dsl_available, requires_dsl

# what CI may pick from (the compile-only report's default list, sm_80 ... sm_121a)
CI_ARCH = "8.0 8.6 8.9 9.0a 10.0a 10.3a 12.0a 12.1a"
REPORT = Path(__file__).resolve().parent.parent / "benchmarks" / "results" / "compile_report_cpu.txt"
SPILLS = re.compile(r"\b(LDL|STL)\b")
WIDE_GLOBAL = re.compile(r"\b(LDG|STG)\.E\.128\b")
# families whose kernels must move memory in 128-bit accesses (SASS checked; row norms: their rows' width)
VECTORISED = ("norm.", "rope.", "copy.vector_copy", "attention.merge_states")
# Builds that spill, per target: tests/known_spills.json, written by benchmarks/spill_survey.py
# (every spec for every target). Strict xfail: a listed build that stops spilling fails too, so
# the list is rewritten, not left stale. What spills and why:
# - LayerNorm (fp32 gamma and beta) at 2048 on every target and 4096-32768 on some: the 64
#   elements a thread measured faster than spill-free splits; at 4096 by choice, 8 CTAs per SM
#   (64 registers) run 25% faster (launch.py).
# - Shifted builds (rows off 16-byte boundaries: odd hidden sizes, misaligned views): LayerNorm
#   keeps its aligned split and spills a little (measured 43% faster than a spill-free split);
#   Gemma RMSNorm at 768 threads/SM; FP8 RMSNorm 4096 (bf16) at 768 threads/SM (2-8 spill
#   instructions; 11% faster than 512 at 16384 x 4095 on the H200); everything at 32768 (1024
#   threads, a 64-register cap).
# - FP8 RMSNorm 4096 (bf16) on sm_100a/sm_103a: 4 spill instructions at 8 CTAs an SM (64
#   registers), the occupancy that ran 7-13% faster on the H200 (tuning.RMS_WIDE_ROWS).
# - LayerNorm 4096 (bf16) on sm_100a/sm_103a: 4 spill instructions at 8 CTAs of 256 threads an
#   SM (32 registers), the form that ran 1.8% faster than 128 threads at 12 CTAs on the H200
#   (tuning.REREAD_ROWS); fp16 and the other targets are spill-free.
# - RMSNorm + SiLU (fused_rmsnorm_silu) exactly where its RMSNorm siblings spill (32768 on
#   shifted rows, shifted 4096 on sm_80, FP8 4096 on sm_100a/sm_103a).
# - Packed-rows RMSNorm (norm/packed_kernel.py) at 64 registers: 2-23 spill instructions, once
#   a CTA or a block of 8 rows (not a chunk); its FP8 builds so measured 35-78% faster than the
#   shifted ones (benchmarks/results/norm_packed_vs_shifted_h200.json).
# - Wide decode builds with RoPE (K rotated in registers, at the 255-register cap: 4-16 spill
#   instructions on most targets) and wide head_dim 256 at one stage (sm_120a/121a's ring, 4):
#   the narrow builds that groups up to 8 take without RoPE spill nowhere.
KNOWN_SPILLS: set[tuple[str, str]] = {
    (spec, target)
    for spec, targets in json.loads((Path(__file__).resolve().parent / "known_spills.json").read_text()).items()
    for target in targets
}


def ci_build_plan(specs: list[KernelSpec]) -> list[tuple[KernelSpec, Target]]:
    """One (spec, target) per spec: the family's kept targets, taken in turn by each kernel's
    builds (empty where CuTe DSL is not installed, e.g. a GPU box running from a pack: its
    toolchain decides the targets)."""
    if not dsl_available():
        return []
    plan, turn = [], {}
    for spec in sorted(specs, key=KernelSpec.describe):
        targets = TargetPolicy.from_environment(toolchain_for(spec.kind), None, arch_list=CI_ARCH) \
            .decide(spec.family).kept
        if not targets:
            continue
        # rotated per kernel (spec name), so that kernels added elsewhere do not move the
        # targets this kernel's builds get (and tests/known_spills.json stays right)
        index = turn.get(spec.name, 0)
        turn[spec.name] = index + 1
        plan.append((spec, targets[index % len(targets)]))
    return plan


def _report_specs() -> set[str]:
    if not REPORT.is_file():
        return set()
    return {line.split("  ")[0].strip() for line in REPORT.read_text().splitlines()[2:] if line.strip()}


@requires_dsl
def test_every_spec_is_covered():
    in_ci = {spec.describe() for spec, _ in ci_build_plan(all_specs())}
    in_report = _report_specs()
    uncovered = [spec.describe() for spec in all_specs()
                 if spec.describe() not in in_ci and spec.describe() not in in_report]
    assert not uncovered, f"built neither in CI nor in the compile-only report: {uncovered}"


@requires_dsl
def test_ci_plan_uses_every_target_of_each_family():
    plan = ci_build_plan(all_specs())
    for family in {spec.family for spec, _ in plan}:
        specs = [spec for spec, _ in plan if spec.family == family]
        kept = TargetPolicy.from_environment(toolchain_for(specs[0].kind), None, arch_list=CI_ARCH) \
            .decide(family).kept
        used = {target for spec, target in plan if spec.family == family}
        assert used == set(kept[:len(specs)]), f"{family}: CI builds {sorted(map(str, used))}"


def _plan_params():
    known = pytest.mark.xfail(strict=True, reason="known register spills (see KNOWN_SPILLS)")
    return [pytest.param(spec, target, id=f"{spec.describe()}@{target.sm}",
                         marks=[known] if (spec.describe(), target.sm) in KNOWN_SPILLS else [])
            for spec, target in ci_build_plan(all_specs())]


@requires_dsl
@pytest.mark.parametrize("spec, target", _plan_params())
def test_every_kernel_builds(spec: KernelSpec, target: Target):
    from cutefi.jit.sass import disassemble

    artifact = build(spec, target)
    label = f"{spec.describe()} for {target.sm}"
    assert cubin_target(artifact.cubin).cc == target.cc, label
    sass = disassemble(artifact.cubin)
    assert not SPILLS.search(sass), f"{label}: local memory (spills) in SASS"
    if spec.describe().startswith(VECTORISED) and spec.option_dict.get("aligned", True):
        bits = _row_access_bits(spec)
        assert re.search(rf"\b(LDG|STG)\.E(\.E[FL])?\.{bits}\b", sass), f"{label}: no {bits}-bit global access in SASS"


def _row_access_bits(spec: KernelSpec) -> int:
    """The width of a vectorised build's row accesses: 128 bits, or a row-norm build's own (the
    LayerNorm builds that read x twice access it 64 bits at a time, tuning.REREAD_ROWS; their
    fp32 parameters still made 128-bit loads, their 16-bit ones do not)."""
    if spec.builder != "cutefi.norm.norm_kernel:RowNormKernel":
        return 128
    from cutefi.norm import launch

    o = spec.option_dict
    shape = launch.geometry(o["norm"], o["dtype_name"], o["n_class"], o["fused_add"], o.get("aligned", True),
                            o.get("out_dtype"), o.get("latency", False))
    return 8 * shape.elem_bytes * shape.vec


def test_norm_spec_table_is_complete():
    # per dtype, size class and access width (aligned / any): RMSNorm plain and fused x plain
    # and gemma weight, RMSNorm quant plain and fused x 2 FP8 formats, LayerNorm plain and 2 FP8
    # formats; plus the two software-FP8-conversion builds the GPU tests compare; and per dtype
    # the latency builds: RMSNorm 2048, 8192 and 16384 plain and gemma, the fused add 4096 plain
    # and gemma, FP8 RMSNorm 2048 x 2 formats, LayerNorm 4096 and 8192, and 4096 on shifted rows
    names = [spec.name for spec in all_specs() if spec.name.startswith("norm.")]
    assert names.count("norm.rmsnorm") == 2 * 10 * 2 * (4 + 4) + 2
    assert names.count("norm.layernorm") == 2 * 10 * 2 * 3
    assert names.count("norm.rmsnorm_latency") == 2 * 10
    assert names.count("norm.layernorm_latency") == 2 * 3
    # the long-row builds (hidden sizes above 32768): per dtype and access width, the variants
    # above without their classes
    assert names.count("norm.rmsnorm_long") == 2 * 2 * (4 + 4)
    assert names.count("norm.layernorm_long") == 2 * 2 * 3
    # RMSNorm + SiLU (bf16 only, bf16 or FP8 e4m3 out): the plain RMSNorm's class, latency and
    # long-row builds
    assert names.count("norm.rmsnorm_silu") == 10 * 2 * 2
    assert names.count("norm.rmsnorm_silu_latency") == 3 + 1
    assert names.count("norm.rmsnorm_silu_long") == 2 * 2


@requires_dsl
def test_long_layernorm_reads_parameters_in_at_most_128_bits_on_sm100():
    """The plan calls rows aligned at 16 bytes; gamma and beta (fp32, 32 bytes a chunk) declared
    32-byte aligned let sm_100a read them in 256-bit loads, which fault on a view 16 bytes in."""
    from cutefi.jit.sass import disassemble
    from cutefi.norm.long_rows import LONG_SPECS

    sass = disassemble(build(LONG_SPECS[("layer", "bf16", False, False, True, None)], Target.parse("10.0a")).cubin)
    assert WIDE_GLOBAL.search(sass) and not re.search(r"\b(LDG|STG)\.E[.A-Z0-9]*\.256\b", sass)
