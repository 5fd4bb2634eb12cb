"""cutefi: GPU kernels for LLM inference, written in CuTe DSL, launched from cuda-python.

Importing cutefi imports neither the CuTe DSL compiler nor the CUDA driver; kernels are
found (pack → cache → build) and loaded on first use. The public functions are those each
op family's package lists in ``API`` (defined in its ``api.py``); families are discovered.
``cutefi.env()`` returns what the ``cutefi env`` command prints.
"""

from __future__ import annotations

import importlib
from typing import Any

from ._version import __version__

_EXPORTS: dict[str, str] = {}  # public name -> family, filled on first use


def _exports() -> dict[str, str]:
    if not _EXPORTS:
        from .jit.registry import families

        for family in families():
            for name in importlib.import_module(f"{__name__}.{family}").API:
                _EXPORTS[name] = family
    return _EXPORTS


def __getattr__(name: str) -> Any:
    if name == "__all__":
        return ["__version__", *_exports()]
    if name == "env":  # `cutefi env`'s report as data (not an op, so not in __all__)
        from .env import env

        return env
    family = _exports().get(name)
    if family is None:
        raise AttributeError(f"module 'cutefi' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{family}.api"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(["__version__", *_exports()])
