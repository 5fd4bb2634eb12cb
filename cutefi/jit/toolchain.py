"""The toolchains in hand: CuTe DSL and NVRTC, probed lazily.

Probing CuTe DSL imports ``cutlass`` (for its CUDA version and the targets it accepts), so
it happens only when something must be built or reported (``cutefi env``, ``cutefi aot``),
never on import or on a cached call.
"""

from __future__ import annotations

import functools
from importlib import metadata

from .policy import Toolchain
from .targets import Target

DSL_DISTRIBUTION = "nvidia-cutlass-dsl"


def dsl_version() -> str | None:
    """The installed CuTe DSL version, read from package metadata (no import)."""
    try:
        return metadata.version(DSL_DISTRIBUTION)
    except metadata.PackageNotFoundError:
        return None


@functools.lru_cache(maxsize=1)
def dsl_toolchain() -> Toolchain:
    """CuTe DSL as a toolchain; raises ``ImportError`` naming the package when absent."""
    version = dsl_version()
    if version is None:
        raise ImportError(
            f"CuTe DSL is not installed; `pip install {DSL_DISTRIBUTION}` to build kernels"
        )
    from cutlass.base_dsl.enums import Arch
    from cutlass.base_dsl.version_info import CUDA_VERSION

    accepted = frozenset(Target(arch.major, arch.minor, arch.suffix) for arch in Arch)
    return Toolchain(
        name="CuTe DSL",
        version=version,
        cuda_version=(CUDA_VERSION.major, CUDA_VERSION.minor),
        accepted=accepted,
        min_cc=(8, 0),
    )


@functools.lru_cache(maxsize=1)
def nvrtc_toolchain() -> Toolchain:
    """NVRTC from cuda-python: its version and ``nvrtcGetSupportedArchs``."""
    from cuda.bindings import nvrtc

    err, major, minor = nvrtc.nvrtcVersion()
    if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        raise RuntimeError(f"nvrtcVersion failed: {err}")
    err, archs = nvrtc.nvrtcGetSupportedArchs()
    if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        raise RuntimeError(f"nvrtcGetSupportedArchs failed: {err}")
    accepted = set()
    for arch in archs:
        for suffix in ("", "a", "f"):
            accepted.add(Target(arch // 10, arch % 10, suffix))
    return Toolchain(
        name="NVRTC", version=f"{major}.{minor}", cuda_version=(major, minor),
        accepted=frozenset(accepted),
    )


def toolchain_for(kind: str) -> Toolchain:
    """The toolchain that builds kernels of a builder ``kind`` ("cute" or "nvrtc")."""
    if kind == "cute":
        return dsl_toolchain()
    if kind == "nvrtc":
        return nvrtc_toolchain()
    raise ValueError(f"unknown builder kind {kind!r}; accepted: 'cute', 'nvrtc'")
