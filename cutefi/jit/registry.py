"""Every kernel spec cutefi ships, so ``cutefi aot`` can build them all.

Op modules register their specs at import; :func:`all_specs` imports each kernel module
listed here (pure-Python launch modules, never the CuTe DSL sources).
"""

from __future__ import annotations

import importlib

from .spec import KernelSpec

KERNEL_MODULES = (
    "cutefi.copy.copy",
    "cutefi.copy.tma_copy",
    "cutefi.utils.fill",
    "cutefi.norm.common",
    "cutefi.rope.specs",
)

_SPECS: dict[str, KernelSpec] = {}


def register(*specs: KernelSpec) -> None:
    for spec in specs:
        _SPECS[spec.describe()] = spec


def all_specs() -> list[KernelSpec]:
    for module in KERNEL_MODULES:
        importlib.import_module(module)
    return list(_SPECS.values())
