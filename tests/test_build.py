"""CPU tier: every kernel builds for every target, the cubin names that target, and the
launch contract is checked against what the compiler produced."""

import dataclasses

import pytest

from cutefi.jit.compile import ContractMismatchError, build, check_contract
from cutefi.jit.contract import Param
from cutefi.jit.ptx import cubin_target, ptx_entries
from cutefi.jit.registry import all_specs
from cutefi.jit.targets import Target

from conftest import requires_dsl

TARGETS = ["sm_80", "sm_86", "sm_89", "sm_90a", "sm_100a", "sm_120a", "sm_121a"]


def _spec(name, **options):
    for spec in all_specs():
        if spec.name == name and all(spec.option_dict.get(k) == v for k, v in options.items()):
            return spec
    raise LookupError(name)


@requires_dsl
@pytest.mark.parametrize("target", TARGETS)
def test_vector_copy_builds_for_target(target):
    artifact = build(_spec("copy.vector_copy"), Target.parse(target))
    elf = cubin_target(artifact.cubin)
    assert elf.cc == Target.parse(target).cc
    assert artifact.metadata["target"] == target
    # 128-bit global accesses, nothing spilled to local memory
    assert "ld.global.v4.b32" in artifact.ptx and "st.global.v4.b32" in artifact.ptx
    assert "ld.local" not in artifact.ptx and "st.local" not in artifact.ptx


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("bits", [8, 16, 32])
def test_nvrtc_fill_builds_for_target(target, bits):
    artifact = build(_spec("fill.fill", bits=bits), Target.parse(target))
    assert cubin_target(artifact.cubin).cc == Target.parse(target).cc
    assert artifact.metadata["entry"] == f"cutefi_fill_{bits}"
    assert artifact.metadata["kind"] == "nvrtc"


def test_elf_header_reports_arch_specific_suffix():
    # DSL (CUDA 12.9) marks sm_90a cubins arch-specific in ELF ABI v7
    if not _dsl():
        pytest.skip("needs CuTe DSL")
    artifact = build(_spec("copy.vector_copy"), Target.parse("sm_90a"))
    assert cubin_target(artifact.cubin) == Target(9, 0, "a")


def _dsl():
    from cutefi.jit.toolchain import dsl_version

    return dsl_version() is not None


@requires_dsl
def test_contract_order_mismatch_is_refused():
    """A contract whose parameter order differs from the cubin's is caught by kind and size."""
    spec = _spec("copy.vector_copy")
    artifact = build(spec, Target.parse("sm_90"))
    good = spec.launch_contract()
    swapped = dataclasses.replace(good, params=(good.params[2], good.params[0], good.params[1]))
    with pytest.raises(ContractMismatchError, match="parameter 0 'num_vectors' is declared i32"):
        check_contract(spec, swapped, Target.parse("sm_90"), artifact.cubin, artifact.ptx)
    wider = dataclasses.replace(good, params=good.params[:2] + (Param("num_vectors", "i64"),))
    with pytest.raises(ContractMismatchError, match="num_vectors.*declared i64"):
        check_contract(spec, wider, Target.parse("sm_90"), artifact.cubin, artifact.ptx)
    misaligned = dataclasses.replace(good, params=(Param("src", "ptr", "i32", 4),) + good.params[1:])
    with pytest.raises(ContractMismatchError, match="src.*assumes 16-byte alignment"):
        check_contract(spec, misaligned, Target.parse("sm_90"), artifact.cubin, artifact.ptx)


@requires_dsl
@pytest.mark.parametrize("field, value, message", [
    ("block", (128, 1, 1), "reqntid \\(128, 1, 1\\)"),
    ("min_ctas_per_sm", 3, "minnctapersm \\(3,\\)"),
])
def test_kernel_launched_outside_its_contract_is_refused(monkeypatch, field, value, message):
    """The spec's contract and the kernel's own launch disagree: the PTX directives show it."""
    spec = _spec("copy.vector_copy")
    bad = dataclasses.replace(spec.launch_contract(), **{field: value})
    monkeypatch.setattr(type(spec), "launch_contract", lambda self: bad)
    with pytest.raises(ContractMismatchError, match=message):
        build(spec, Target.parse("sm_80"))


def test_ptx_entry_parser():
    ptx = """
.visible .entry k(
	.param .u64 .ptr .global .align 16 k_param_0,
	.param .align 64 .b8 k_param_1[128],
	.param .u32 k_param_2,
	.param .f32 k_param_3
)"""
    (entry,) = ptx_entries(ptx + "\n.reqntid 256, 1, 1\n.minnctapersm 4\n{").values()
    assert [(p.type, p.size, p.align) for p in entry.params] == [("u64", 8, 8), ("b8", 128, 64), ("u32", 4, 4),
                                                                 ("f32", 4, 4)]
    assert [p.pointer_align for p in entry.params] == [16, None, None, None]  # .align 16 is the pointee
    assert entry.directives == {"reqntid": (256, 1, 1), "minnctapersm": (4,)}


def test_elf_parser_rejects_non_elf():
    with pytest.raises(ValueError, match="not an ELF"):
        cubin_target(b"\0" * 64)


@requires_dsl
@pytest.mark.parametrize("target", ["sm_90", "sm_90a", "sm_100a", "sm_120a", "sm_121a"])
@pytest.mark.parametrize("dtype", ["bf16", "fp32"])
def test_tma_cluster_copy_builds(target, dtype):
    """The TMA + cluster kernel: two 128-byte descriptors, cluster (2,1,1) in the contract."""
    artifact = build(_spec("copy.tma_copy", dtype=dtype), Target.parse(target))
    (entry,) = ptx_entries(artifact.ptx).values()
    assert [(p.size, p.align) for p in entry.params] == [(128, 64), (128, 64)]
    assert "cp.async.bulk.tensor.2d" in artifact.ptx
    assert artifact.metadata["contract"]["cluster"] == [2, 1, 1]
    assert cubin_target(artifact.cubin).cc == Target.parse(target).cc
