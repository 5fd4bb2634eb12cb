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


class _FakeDriver:
    """Stands in for libcuda: records each launch's config and parameter bytes."""

    def __init__(self, current_device: int) -> None:
        self.current_device = current_device
        self.fail_next: int = 0
        self.launches: list[tuple[bytes, bytes]] = []
        self.param_size = param_offsets(COPY_LIKE.params)[1]

    def __getitem__(self, name):
        import ctypes

        driver = self

        class _Function:
            restype = None

            def __call__(self, *args):
                if driver.fail_next:
                    code, driver.fail_next = driver.fail_next, 0
                    return code
                config, _kernel, pointers, _extra = args
                config_bytes = ctypes.string_at(config.value, 56)
                first_param = ctypes.cast(pointers.value, ctypes.POINTER(ctypes.c_void_p))[0]
                driver.launches.append((config_bytes, ctypes.string_at(first_param, driver.param_size)))
                return 0

        return _Function()


COPY_LIKE = LaunchContract(params=(*pointers("src", "dst", dtype="i32"), *scalars("i32", "n")),
                           block=(256, 1, 1), grid=lambda p: (p["n"], 1, 1), pdl=True)


def test_generated_launch_path_with_a_fake_driver(monkeypatch):
    """The whole launch path on the CPU: packing by name, config with PDL, the context check."""
    from cutefi.jit import libcuda, loader
    from cutefi.jit.cache import Artifact

    fake = _FakeDriver(current_device=0)
    monkeypatch.setattr(libcuda, "lib", lambda: fake)
    monkeypatch.setattr(libcuda, "library_load", lambda cubin: 0x1)
    monkeypatch.setattr(libcuda, "library_kernel", lambda library, entry: 0x2)
    monkeypatch.setattr(libcuda, "kernel_function", lambda kernel: 0x3)
    monkeypatch.setattr(libcuda, "kernel_param_sizes", lambda kernel, declared: [8, 8, 4])
    monkeypatch.setattr(libcuda, "primary_context", lambda device: 0x111 if device == 0 else 0x222)
    monkeypatch.setattr(libcuda, "device_attribute", lambda attribute, device: 9)
    monkeypatch.setattr(libcuda, "error_text", lambda code: f"CUDA error {code}")
    pushed = []

    class _OnDevice:
        def __init__(self, device):
            pushed.append(device)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return None

    monkeypatch.setattr(libcuda, "on_device", _OnDevice)
    monkeypatch.setattr(loader, "_torch_hooks", lambda: ((lambda device: 0), (lambda: fake.current_device)))
    kernel = loader.Kernel(Artifact(cubin=b"", metadata={"entry": "k", "target": "sm_90a"}, ptx=""), COPY_LIKE)

    kernel.launch((5, 1, 1), 0, None, True, n=7, dst=0x2000, src=0x1000)
    config, params = fake.launches[-1]
    assert struct.unpack_from("=7I", config) == (5, 1, 1, 256, 1, 1, 0)
    assert struct.unpack_from("=QQI", config, 32)[0::2] == (0, 1)  # stream 0, one attribute (PDL)
    assert struct.unpack_from("=QQi", params) == (0x1000, 0x2000, 7)
    assert pushed == [0]  # prepare only: device 0's context is current, so no push at launch

    kernel.launch((3, 1, 1), 1, 0xABC, False, n=1, dst=2, src=1)  # device 1, explicit stream
    config, _ = fake.launches[-1]
    assert struct.unpack_from("=QQI", config, 32) == (0xABC, 0, 0)  # no attribute without PDL
    assert pushed == [0, 1]  # prepare on device 1; a non-null stream carries its own context

    kernel.launch((3, 1, 1), 1, None, False, n=1, dst=2, src=1)  # default stream, device 0 current
    assert pushed == [0, 1, 1]  # device 1's context pushed around the launch
    fake.fail_next = 201  # CUDA_ERROR_INVALID_CONTEXT: a thread that never touched CUDA
    launches = len(fake.launches)
    kernel.launch((3, 1, 1), 0, None, False, n=1, dst=2, src=1)
    assert pushed == [0, 1, 1, 0] and len(fake.launches) == launches + 1  # retried in device 0's context
    fake.fail_next = 700
    with pytest.raises(libcuda.CudaDriverError, match="cuLaunchKernelEx"):
        kernel.launch((3, 1, 1), 0, None, False, n=1, dst=2, src=1)
    with pytest.raises(TypeError, match="unexpected keyword argument 'm'"):
        kernel.launch((1, 1, 1), 0, None, False, n=1, dst=2, src=1, m=3)


@pytest.mark.parametrize("counts", [True, False])
@pytest.mark.parametrize("declared", [3, 4, 5])
def test_param_sizes_never_probe_past_the_last_parameter(monkeypatch, counts, declared):
    """No query goes past the cubin's last parameter (the driver answers it with an API error
    that compute-sanitizer shows in the user's program): with cuKernelGetParamCount every
    parameter, without it (older drivers) the declared count, short where the cubin has fewer."""
    import ctypes

    from cutefi.jit import libcuda

    sizes = [128, 8, 4, 4]
    asked = []

    class _Driver:
        def cuKernelGetParamInfo(self, kernel, index, offset, size):
            asked.append(index)
            if index >= len(sizes):
                return libcuda.CUDA_ERROR_INVALID_VALUE
            ctypes.cast(size, ctypes.POINTER(ctypes.c_size_t))[0] = sizes[index]
            return 0

    if counts:
        def _count(self, kernel, count):
            ctypes.cast(count, ctypes.POINTER(ctypes.c_size_t))[0] = len(sizes)
            return 0
        _Driver.cuKernelGetParamCount = _count
    monkeypatch.setattr(libcuda, "lib", lambda: _Driver())
    got = libcuda.kernel_param_sizes(0x2, declared)
    assert got == (sizes if counts else sizes[:declared])
    assert max(asked) <= len(sizes) - 1 or (not counts and declared > len(sizes))
    assert len(asked) == (len(sizes) if counts else min(declared, len(sizes) + 1))
