"""Kernel specs: what to build (builder + specialisation) and the keys that name the result.

A spec specialises only on what changes the code (dtype, size class, tile shape, flags);
runtime sizes such as rows, batch or sequence length are kernel arguments and never part of
a key. Builders and contracts are named by ``"module:function"`` strings so a spec is a small
hashable value and nothing is imported until it is needed.
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import json
from dataclasses import dataclass
from importlib import metadata
from typing import Any, Callable

from .._version import __version__
from .closure import fingerprint_modules, import_closure, memoised
from .contract import LaunchContract
from .policy import Family
from .targets import Target

# modules that turn a spec into a cubin for every kernel (the DSL/NVRTC compile, PTX checks,
# toolchain choice): part of every fingerprint, besides the builder's and contract's closures
BUILD_PIPELINE = ("cutefi.jit.compile", "cutefi.jit.toolchain")


@dataclass(frozen=True)
class KernelSpec:
    """One buildable kernel variant.

    name:     readable id, e.g. ``"norm.rmsnorm"``.
    kind:     ``"cute"`` (CuTe DSL; the builder returns the kernel object, whose host
              function takes the contract's ``KernelArgs``) or ``"nvrtc"`` (the builder
              returns ``(cuda_source, kernel_name)``).
    builder:  ``"module:callable"`` called with ``**options``.
    contract: ``"module:function"`` called with ``**options``; returns a LaunchContract.
              Must not import cutlass (it is used at run time).
    family:   the kernel's hardware requirement, for the target policy.
    options:  the specialisation, as sorted ``(name, value)`` pairs.

    The key's source fingerprint covers every cutefi module the builder and contract modules
    reach by import (:mod:`.closure`): editing a shared helper changes exactly the keys of
    the kernels that use it.
    """

    name: str
    kind: str
    builder: str
    contract: str
    family: Family
    options: tuple[tuple[str, Any], ...] = ()

    def __post_init__(self) -> None:
        # specs key the loaded-kernel table on every call: hash once, not per lookup
        object.__setattr__(self, "_hash", hash((self.name, self.kind, self.builder, self.options)))

    def __hash__(self) -> int:
        return self._hash  # type: ignore[attr-defined]

    @classmethod
    def make(cls, name: str, kind: str, builder: str, contract: str, family: Family,
             **options: Any) -> "KernelSpec":
        return cls(name, kind, builder, contract, family, tuple(sorted(options.items())))

    @property
    def option_dict(self) -> dict[str, Any]:
        return dict(self.options)

    def launch_contract(self) -> LaunchContract:
        return _contract(self.contract, self.options)

    def builder_fn(self) -> Callable[..., Any]:
        return resolve(self.builder)

    def fingerprint(self) -> str:
        """Hash of every cutefi module the builder, the contract or the build pipeline reaches
        by import."""
        roots = {self.builder.partition(":")[0], self.contract.partition(":")[0], *BUILD_PIPELINE}
        return _fingerprint(tuple(sorted(roots)))

    def lookup_key(self, target: Target) -> str:
        """Names the artifact independently of the toolchain that built it."""
        payload = {
            "name": self.name, "kind": self.kind, "builder": self.builder,
            "options": [[k, repr(v)] for k, v in self.options],
            "fingerprint": self.fingerprint(), "target": target.sm, "cutefi": __version__,
        }
        return _digest(payload)[:32]

    def describe(self) -> str:
        opts = ", ".join(f"{k}={v}" for k, v in self.options)
        return f"{self.name}({opts})"


def toolchain_id(kind: str) -> str:
    """Identifies the toolchain in hand without importing it (package metadata only)."""
    if kind == "cute":
        return "cute-dsl-" + "+".join(_installed("nvidia-cutlass-dsl", "nvidia-cutlass-dsl-libs-cu12",
                                                "nvidia-cutlass-dsl-libs-cu13"))
    if kind == "nvrtc":
        from cuda.bindings import nvrtc

        _, major, minor = nvrtc.nvrtcVersion()
        return f"nvrtc-{major}.{minor}"
    raise ValueError(f"unknown builder kind {kind!r}")


def toolchain_key(kind: str) -> str:
    return _digest({"toolchain": toolchain_id(kind)})[:16]


def resolve(path: str) -> Callable[..., Any]:
    module_name, _, attr = path.partition(":")
    if not attr:
        raise ValueError(f"expected 'module:function', got {path!r}")
    return getattr(importlib.import_module(module_name), attr)


@functools.lru_cache(maxsize=None)
def _contract(path: str, options: tuple[tuple[str, Any], ...]) -> LaunchContract:
    return resolve(path)(**dict(options))


@memoised  # per root-module set; closure.clear_caches() (and substituted_sources) reset it
def _fingerprint(roots: tuple[str, ...]) -> str:
    return fingerprint_modules(set().union(*(import_closure(root) for root in roots)))


def _installed(*distributions: str) -> list[str]:
    found = []
    for name in distributions:
        try:
            found.append(f"{name}=={metadata.version(name)}")
        except metadata.PackageNotFoundError:
            pass
    return found or ["none"]


def _digest(payload: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()
