"""CPU tier: a kernel's ABI is declared once, in its contract, and everything follows from it.

- the launch packs arguments **by name** at the contract's offsets (checked byte by byte);
- a missing, unknown, positional or ill-typed argument is refused before anything runs;
- a CuTe DSL kernel whose host function lists parameters itself (so could order them
  differently from the contract) is refused at build;
- the launch config carries the cluster and PDL attributes in the driver's layout.
"""

from __future__ import annotations

import struct

import pytest

from cutefi.jit.contract import LaunchContract, Param, TmaRecipe, pointers, scalars
from cutefi.jit.loader import _LAUNCH_CONFIG, _ThreadState, make_packer, param_offsets

from conftest import requires_dsl

MIXED = LaunchContract(
    params=(*pointers("x", "out", dtype="bf16"), *scalars("i32", "rows"), Param("scale", "f32"),
            *scalars("i64", "stride"), Param("desc", "tma"), *scalars("i32", "tail")),
    block=(128, 1, 1), grid=lambda p: (p["rows"], 1, 1), cluster=(2, 1, 1),
    tma=(TmaRecipe("desc", "bf16", box=(64, 128), placeholder=(256, 256)),),
)


def _fake_encode(buffer, offset, tensor, name):
    buffer[offset:offset + 128] = bytes([tensor]) * 128  # a "tensor" here is a byte value


def test_offsets_follow_natural_alignment():
    offsets, size = param_offsets(MIXED.params)
    #           x  out rows scale stride desc tail
    assert offsets == [0, 8, 16, 20, 24, 64, 192]
    assert size == 196


def test_pack_by_name_writes_each_value_at_its_offset():
    pack = make_packer(MIXED, _fake_encode)
    buffer = bytearray(param_offsets(MIXED.params)[1])
    # keyword order is irrelevant: names decide where each value goes
    pack(buffer, tail=-7, desc=0xAB, stride=1 << 40, scale=0.5, rows=3, out=0x2000, x=0x1000)
    assert struct.unpack_from("=QQifq", buffer, 0) == (0x1000, 0x2000, 3, 0.5, 1 << 40)
    assert buffer[64:192] == b"\xab" * 128
    assert struct.unpack_from("=i", buffer, 192) == (-7,)


@pytest.mark.parametrize("kwargs, message", [
    (dict(x=1, out=2, rows=3, scale=1.0, stride=4, desc=0), "missing 1 required keyword-only argument: 'tail'"),
    (dict(x=1, out=2, rows=3, scale=1.0, stride=4, desc=0, tail=0, extra=1), "unexpected keyword argument 'extra'"),
    (dict(x=1, out=2, rows=3.5, scale=1.0, stride=4, desc=0, tail=0), "'rows' \\(i32\\)"),
    (dict(x=1, out=2, rows=2**31, scale=1.0, stride=4, desc=0, tail=0), "'rows' \\(i32\\)"),
    (dict(x=-1, out=2, rows=3, scale=1.0, stride=4, desc=0, tail=0), "'x' \\(ptr\\)"),
    (dict(x=1, out=2, rows=3, scale="a", stride=4, desc=0, tail=0), "'scale' \\(f32\\)"),
])
def test_bad_launch_arguments_are_refused(kwargs, message):
    pack = make_packer(MIXED, _fake_encode)
    with pytest.raises(TypeError, match=message):
        pack(bytearray(256), **kwargs)


def test_positional_arguments_are_refused():
    pack = make_packer(MIXED, _fake_encode)
    with pytest.raises(TypeError):
        pack(bytearray(256), 1, 2, 3, 1.0, 4, 0, 0)


def test_contract_refuses_bad_declarations():
    with pytest.raises(ValueError, match="duplicate"):
        LaunchContract(params=scalars("i32", "n", "n"), block=(32, 1, 1), grid=lambda p: (1, 1, 1))
    with pytest.raises(ValueError, match="recipe"):
        LaunchContract(params=(Param("t", "tma"),), block=(32, 1, 1), grid=lambda p: (1, 1, 1))
    with pytest.raises(ValueError, match="pointer dtype"):
        Param("x", "ptr")
    with pytest.raises(ValueError, match="identifier"):
        Param("grid", "i32")  # would shadow Kernel.launch's own argument


def test_launch_config_layout_with_cluster_and_pdl():
    state = _ThreadState(MIXED)
    assert state.base_attributes == 1
    # CUlaunchAttribute: id 4 (cluster) with x, y, z; then id 6 (PDL) with value 1
    assert struct.unpack_from("=I4x3I", state.attributes, 0) == (4, 2, 1, 1)
    assert struct.unpack_from("=I4xi", state.attributes, 72) == (6, 1)
    _LAUNCH_CONFIG.pack_into(state.config, 0, 5, 6, 7, 128, 1, 1, 4096, 0xBEEF, state.attributes_address, 2)
    raw = bytes(state.config)
    assert len(raw) == 56
    assert struct.unpack_from("=7I", raw, 0) == (5, 6, 7, 128, 1, 1, 4096)
    assert struct.unpack_from("=QQI", raw, 32) == (0xBEEF, state.attributes_address, 2)


@requires_dsl
def test_kernel_listing_its_own_parameters_is_refused(monkeypatch):
    """A host function with positional parameters could order them unlike the contract."""
    import cutlass.cute as cute

    from cutefi.copy.launch import COPY_SPEC
    from cutefi.jit.compile import ContractMismatchError, build
    from cutefi.jit.targets import Target

    class SwappedCopy:
        @cute.jit
        def __call__(self, dst: cute.Pointer, src: cute.Pointer, num_vectors):
            pass

    monkeypatch.setattr(type(COPY_SPEC), "builder_fn", lambda self: (lambda **options: SwappedCopy()))
    with pytest.raises(ContractMismatchError, match="must take one argument"):
        build(COPY_SPEC, Target.parse("sm_80"))


@requires_dsl
def test_kernel_body_reads_parameters_by_contract_name():
    """A name the contract does not declare fails the build, naming the contract's names."""
    from cutefi.cute.args import fake_args

    args = fake_args(MIXED.__class__(params=scalars("i32", "n"), block=(32, 1, 1), grid=lambda p: (1, 1, 1)))
    with pytest.raises(AttributeError, match="no parameter 'm'; it has n"):
        args.m
