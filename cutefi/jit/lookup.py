"""Find the cubin for a spec on a device: pack → cache → build (if CuTe DSL is here) → error.

The result is a loaded :class:`~cutefi.jit.loader.Kernel`, memoised per (spec, target), so
a cached call costs a dictionary lookup.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

from . import driver as drv
from .cache import Artifact, ArtifactStore, default_cache_root
from .loader import Kernel
from .policy import family_target
from .spec import KernelSpec, toolchain_key
from .targets import Target
from .toolchain import dsl_version

PACK_PATH_ENV = "CUTEFI_PACK_PATH"
_BUILTIN_PACK = Path(__file__).resolve().parent.parent / "_packs"


class KernelNotAvailableError(RuntimeError):
    """No prebuilt cubin exists and this machine cannot build one."""


def pack_stores() -> list[ArtifactStore]:
    roots = [p for p in os.environ.get(PACK_PATH_ENV, "").split(os.pathsep) if p]
    if _BUILTIN_PACK.is_dir():
        roots.append(str(_BUILTIN_PACK))
    return [ArtifactStore(root, writable=False) for root in roots if Path(root).is_dir()]


@functools.lru_cache(maxsize=None)
def cache_store() -> ArtifactStore:
    return ArtifactStore(default_cache_root())


def can_build(kind: str) -> bool:
    if kind == "cute":
        return dsl_version() is not None
    return True  # NVRTC ships with cuda-python's nvrtc extra


def find_artifact(spec: KernelSpec, target: Target) -> Artifact:
    """The artifact for ``spec`` on ``target``, building and caching it if needed."""
    key = spec.lookup_key(target)
    for pack in pack_stores():
        found = pack.read(key)
        if found is not None:
            return found
    cache = cache_store()
    buildable = can_build(spec.kind)
    exact = toolchain_key(spec.kind) if buildable else None
    found = cache.read(key, exact)
    if found is not None:
        return found
    if not buildable:
        raise KernelNotAvailableError(
            f"no cubin for {spec.describe()} on {target.sm}, and CuTe DSL is not installed to "
            f"build it. Either `pip install nvidia-cutlass-dsl` here (kernels then build on first "
            f"use), or on any machine with it run `cutefi aot --arch {target.dotted} --out DIR` "
            f"and set {PACK_PATH_ENV}=DIR here."
        )
    from .compile import build

    with cache.lock(key):
        found = cache.read(key, exact)  # another process may have built it while we waited
        if found is None:
            found = build(spec, target)
            cache.write(key, exact, found)
    return found


@functools.lru_cache(maxsize=None)
def device_cc(device_index: int) -> tuple[int, int]:
    for info in drv.devices():
        if info.index == device_index:
            return info.cc
    raise drv.NoGpuError(f"CUDA device {device_index} is not visible")


_LOADED: dict[tuple[KernelSpec, int], Kernel] = {}


def get_kernel(spec: KernelSpec, device_index: int) -> Kernel:
    """The loaded kernel for ``spec`` on ``device_index`` (memoised)."""
    kernel = _LOADED.get((spec, device_index))
    if kernel is not None:
        return kernel
    major, minor = device_cc(device_index)
    target = family_target(spec.family, Target(major, minor))
    if isinstance(target, str):
        raise KernelNotAvailableError(
            f"{spec.name} cannot run on device {device_index} (CC {major}.{minor}): {target}"
        )
    kernel = Kernel(find_artifact(spec, target), spec.launch_contract())
    kernel.prepare(device_index)
    _LOADED[(spec, device_index)] = kernel
    return kernel
