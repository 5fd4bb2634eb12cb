"""CPU tier: every norm and RoPE kernel cutefi ships builds for every supported target.

Each build is contract-checked by ``build`` itself (PTX entry, launch geometry, ELF target);
here we also require 128-bit global loads and stores and no local-memory arrays in the PTX
(register spills are decided later by ptxas and are checked on the GPU box with ncu).
"""

import re

import pytest

from cutefi.jit.compile import build
from cutefi.jit.ptx import cubin_target
from cutefi.jit.registry import all_specs
from cutefi.jit.targets import Target

from conftest import requires_dsl

TARGETS = ["sm_80", "sm_86", "sm_89", "sm_90a", "sm_100a", "sm_120a", "sm_121a"]
FAMILIES = ("norm.", "rope.")
LOCAL_MEMORY = re.compile(r"\b(ld|st)\.local\b")


def _family_specs(prefix: str):
    return [spec for spec in all_specs() if spec.name.startswith(prefix)]


@requires_dsl
@pytest.mark.parametrize("prefix", FAMILIES)
@pytest.mark.parametrize("target", TARGETS)
def test_every_kernel_builds_for_target(target, prefix):
    specs = _family_specs(prefix)
    assert specs, f"no {prefix}* kernels registered"
    want = Target.parse(target)
    for spec in specs:
        artifact = build(spec, want)
        label = f"{spec.describe()} for {target}"
        assert cubin_target(artifact.cubin).cc == want.cc, label
        assert "ld.global.v4" in artifact.ptx and "st.global.v4" in artifact.ptx, f"{label}: no 128-bit access"
        assert not LOCAL_MEMORY.search(artifact.ptx), f"{label}: local memory in PTX"


def test_norm_spec_table_is_complete():
    # RMSNorm: 2 dtypes x 10 size classes x fused x gemma; LayerNorm: 2 dtypes x 10 classes
    names = [spec.name for spec in _family_specs("norm.")]
    assert names.count("norm.rmsnorm") == 80 and names.count("norm.layernorm") == 20
