"""Find the cubin for a spec on a device: pack → cache → build (if CuTe DSL is here) → error.

The result is a loaded :class:`~cutefi.jit.loader.Kernel`, memoised per (spec, target), so
a cached call costs a dictionary lookup. A pack that is refused (writable by others) or holds
an unusable entry is skipped with a :class:`PackWarning` (``warnings.warn``, once per pack
and reason in a process), and the lookup goes on to the next pack, the cache, a build.
"""

from __future__ import annotations

import functools
import warnings
from pathlib import Path
from typing import Any

from .._version import __version__
from . import driver as drv
from . import logs
from .cache import Artifact, ArtifactStore, CorruptEntryError, UnsafeCacheError, default_cache_root
from .loader import Kernel
from .policy import family_target
from .spec import KernelSpec, toolchain_key
from .targets import Target
from .toolchain import dsl_version

PACK_PATH_ENV = "CUTEFI_PACK_PATH"
_BUILTIN_PACK = Path(__file__).resolve().parent.parent / "_packs"


class KernelNotAvailableError(RuntimeError):
    """No prebuilt cubin exists and this machine cannot build one."""


class PackWarning(UserWarning):
    """A pack on CUTEFI_PACK_PATH (or the built-in one) was skipped; the reason is in the text."""


_WARNED: set[tuple[str, str]] = set()  # (pack, reason): warn once, not on every lookup


def pack_stores() -> list[ArtifactStore]:
    """``$CUTEFI_PACK_PATH``'s directories (a missing one is skipped with a warning naming
    it), then the pack shipped inside cutefi, if any."""
    from . import settings

    roots = settings.pack_paths() + ([_BUILTIN_PACK] if _BUILTIN_PACK.is_dir() else [])
    return [ArtifactStore(root, writable=False) for root in roots]


@functools.lru_cache(maxsize=None)
def cache_store() -> ArtifactStore:
    return ArtifactStore(default_cache_root())


def can_build(kind: str) -> bool:
    if kind == "cute":
        return dsl_version() is not None
    return True  # NVRTC ships with cuda-python's nvrtc extra


def expected_metadata(spec: KernelSpec, target: Target) -> dict[str, Any]:
    """What an entry's metadata must say to be the kernel ``spec.lookup_key(target)`` names:
    an entry copied under another key (by hand, or a wrongly assembled pack) is never loaded."""
    return {"spec": spec.describe(), "target": target.sm, "fingerprint": spec.fingerprint(),
            "cutefi": __version__}


def _skip_pack(pack: ArtifactStore, exc: Exception) -> str:
    reason = f"{type(exc).__name__}: {exc}"
    if (str(pack.root), reason) not in _WARNED:
        _WARNED.add((str(pack.root), reason))
        warnings.warn(f"cutefi skips the pack {pack.root}: {reason}", PackWarning, stacklevel=3)
    return f"{pack.root} ({exc})"


def find_artifact(spec: KernelSpec, target: Target) -> Artifact:
    """The artifact for ``spec`` on ``target``, building and caching it if needed."""
    key = spec.lookup_key(target)
    expect = expected_metadata(spec, target)
    skipped: list[str] = []
    for pack in pack_stores():
        try:
            found = pack.read(key, expect=expect)
        except (UnsafeCacheError, CorruptEntryError, OSError) as exc:
            skipped.append(_skip_pack(pack, exc))
            continue
        if found is not None:
            logs.log(3, f"kernel {spec.describe()} for {target.sm}: cubin from the pack {pack.root}")
            return found
    cache = cache_store()
    buildable = can_build(spec.kind)
    exact = toolchain_key(spec.kind) if buildable else None
    found = cache.read(key, exact, expect=expect)  # an unusable entry is deleted: a miss
    if found is not None:
        logs.log(3, f"kernel {spec.describe()} for {target.sm}: cubin from the cache {cache.root}")
        return found
    if not buildable:
        if skipped:
            raise KernelNotAvailableError(
                f"no usable cubin for {spec.describe()} on {target.sm}: skipped the pack(s) "
                f"{'; '.join(skipped)}, and CuTe DSL is not installed to build it. Fix or rebuild "
                f"the pack (`cutefi aot --arch {target.dotted} --out DIR`) and list it in {PACK_PATH_ENV}."
            )
        raise KernelNotAvailableError(
            f"no cubin for {spec.describe()} on {target.sm}, and CuTe DSL is not installed to "
            f"build it. Either `pip install nvidia-cutlass-dsl` here (kernels then build on first "
            f"use), or on any machine with it run `cutefi aot --arch {target.dotted} --out DIR` "
            f"and set {PACK_PATH_ENV}=DIR here."
        )
    from .compile import build

    with cache.lock(key):
        found = cache.read(key, exact, expect=expect)  # another process may have built it meanwhile
        if found is None:
            logs.log(3, f"kernel {spec.describe()} for {target.sm}: building (CuTe DSL / NVRTC)")
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
