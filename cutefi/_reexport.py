"""FlashInfer's module paths for cutefi's public names: ``from flashinfer.norm import
rmsnorm`` becomes ``from cutefi.norm import rmsnorm`` (a server switches by changing the
import). Each family package, and the alias modules named after FlashInfer's modules that
cutefi's families do not match one to one (``decode``, ``cascade``, ``page``), resolves its
names from a family's ``api`` module on first use, so importing them imports no kernel code.
The family packages import this module by name at that first use (``importlib``): a package's
``__init__`` is in the source key of each of its kernels (``jit.closure``), and this run-time
helper must not be."""

from __future__ import annotations

import importlib
import sys
from typing import Any, Callable


def resolve(module: str, names: tuple[str, ...], name: str) -> Any:
    """A family package's ``__getattr__``: ``name`` (one of its ``API`` ``names``) from its
    ``api`` module, then kept in the package."""
    return _fetch(module, f"{module}.api", names, name)


def lazy_names(module: str, source: str, names: tuple[str, ...]) -> tuple[Callable[[str], Any], Callable[[], list]]:
    """``(__getattr__, __dir__)`` for ``module``: ``names`` come from ``source`` (a module path,
    e.g. ``cutefi.attention.api``), each imported once and then kept in ``module``."""

    def __getattr__(name: str) -> Any:
        return _fetch(module, source, names, name)

    def __dir__() -> list:
        return sorted({*vars(sys.modules[module]), *names})

    return __getattr__, __dir__


def _fetch(module: str, source: str, names: tuple[str, ...], name: str) -> Any:
    if name not in names:
        raise AttributeError(f"module {module!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(source), name)
    setattr(sys.modules[module], name, value)
    return value
