"""CUDA C++ → cubin (and PTX) through NVRTC (``cuda.bindings.nvrtc``), for the same targets.

For the pieces where CuTe DSL does not fit. Kernels are ``extern "C"`` so the entry name is
the function name; the PTX is produced too so the launch contract can be checked the same
way as for CuTe DSL kernels.
"""

from __future__ import annotations

from .targets import Target


class NvrtcError(RuntimeError):
    """NVRTC refused the source; the message carries its log."""


def _check(result, call: str):
    from cuda.bindings import nvrtc

    err, *values = result if isinstance(result, tuple) else (result,)
    if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        raise NvrtcError(f"{call} failed: {err.name}")
    return values[0] if len(values) == 1 else values


def _compile(source: str, arch_option: str, want_cubin: bool) -> bytes:
    from cuda.bindings import nvrtc

    program = _check(nvrtc.nvrtcCreateProgram(source.encode(), b"cutefi.cu", 0, [], []),
                     "nvrtcCreateProgram")
    try:
        options = [arch_option.encode(), b"-std=c++17", b"--use_fast_math", b"-default-device"]
        err, = nvrtc.nvrtcCompileProgram(program, len(options), options)
        if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
            size = _check(nvrtc.nvrtcGetProgramLogSize(program), "nvrtcGetProgramLogSize")
            log = b" " * size
            _check(nvrtc.nvrtcGetProgramLog(program, log), "nvrtcGetProgramLog")
            raise NvrtcError(f"NVRTC compile ({arch_option}) failed:\n{log.decode(errors='replace')}")
        getter, sizer = (
            (nvrtc.nvrtcGetCUBIN, nvrtc.nvrtcGetCUBINSize) if want_cubin
            else (nvrtc.nvrtcGetPTX, nvrtc.nvrtcGetPTXSize)
        )
        size = _check(sizer(program), sizer.__name__)
        buffer = b" " * size
        _check(getter(program, buffer), getter.__name__)
        return buffer
    finally:
        nvrtc.nvrtcDestroyProgram(program)


def compile_cuda(source: str, target: Target) -> tuple[bytes, str]:
    """(cubin, ptx) of ``source`` for ``target``."""
    cubin = _compile(source, f"--gpu-architecture={target.sm}", want_cubin=True)
    ptx = _compile(source, f"--gpu-architecture=compute_{target.major}{target.minor}{target.suffix}",
                   want_cubin=False)
    return cubin, ptx.rstrip(b"\0").decode()
