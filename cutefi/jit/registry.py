"""Every kernel spec cutefi ships, so ``cutefi aot`` and the tests can build them all.

Op families are discovered, not listed: a family is a subpackage of ``cutefi`` with a
``launch.py`` (pure Python: contracts, configs, specs), which registers its specs when
imported. :func:`all_specs` imports each family's ``launch`` module, never a CuTe DSL source.
"""

from __future__ import annotations

import functools
import importlib
from pathlib import Path

from .spec import KernelSpec

_PACKAGE_DIR = Path(__file__).resolve().parent.parent
_SPECS: dict[str, KernelSpec] = {}


@functools.lru_cache(maxsize=1)
def families() -> tuple[str, ...]:
    """The op families' package names (``"norm"``, ``"rope"``, ...), sorted."""
    return tuple(sorted(path.parent.name for path in _PACKAGE_DIR.glob("*/launch.py")
                        if (path.parent / "__init__.py").is_file()))


def register(*specs: KernelSpec) -> None:
    for spec in specs:
        _SPECS[spec.describe()] = spec


def all_specs() -> list[KernelSpec]:
    for family in families():
        importlib.import_module(f"cutefi.{family}.launch")
    return list(_SPECS.values())
