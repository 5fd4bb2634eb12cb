"""Bad input is refused with a clear exception before anything reaches a GPU."""

import pytest
import torch

import cutefi


def test_cpu_tensors_are_refused():
    x = torch.randn(64)
    with pytest.raises(ValueError, match="src must be on a CUDA device"):
        cutefi.copy_(torch.empty_like(x), x)
    with pytest.raises(ValueError, match="src must be on a CUDA device"):
        cutefi.tma_copy_(torch.empty(8, 8), torch.randn(8, 8))
    with pytest.raises(ValueError, match="tensor must be on a CUDA device"):
        cutefi.fill_(x, 0)


def test_non_tensor_is_refused():
    with pytest.raises(TypeError, match="src must be a torch.Tensor"):
        cutefi.copy_(torch.empty(4), [1, 2, 3, 4])


def test_unknown_public_name():
    with pytest.raises(AttributeError, match="no attribute 'rmsnrom'"):
        cutefi.rmsnrom  # noqa: B018


def test_unknown_builder_kind():
    from cutefi.jit.toolchain import toolchain_for

    with pytest.raises(ValueError, match="accepted: 'cute', 'nvrtc'"):
        toolchain_for("triton")


def test_param_kind_is_checked():
    from cutefi.jit.contract import Param

    with pytest.raises(ValueError, match="kind must be one of"):
        Param("x", "u8")


def test_missing_kernel_explains_how_to_get_cubins(monkeypatch, isolated_cache):
    from cutefi.copy.launch import COPY_SPEC
    from cutefi.jit import lookup
    from cutefi.jit.targets import Target

    monkeypatch.setattr(lookup, "can_build", lambda kind: False)
    with pytest.raises(lookup.KernelNotAvailableError, match="cutefi aot --arch 9.0 --out DIR"):
        lookup.find_artifact(COPY_SPEC, Target(9, 0))
