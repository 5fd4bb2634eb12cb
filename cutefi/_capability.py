"""Capability queries of public ops (FlashInfer's ``is_compute_capability_supported``).

Each public function carries what its kernels need: ``fn.is_compute_capability_supported(cc)``
(``cc`` as FlashInfer passes it, ``major * 10 + minor``, or a ``(major, minor)`` pair),
``fn.supported_dtypes`` and ``fn.capabilities()`` (kernel families, the targets each family
builds for, dtypes): the same facts ``cutefi env`` prints per op.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

from .jit.policy import Family, family_target
from .jit.targets import Target


def _cc_pair(cc: int | tuple[int, int]) -> tuple[int, int]:
    if isinstance(cc, tuple) and len(cc) == 2:
        return int(cc[0]), int(cc[1])
    if isinstance(cc, int) and not isinstance(cc, bool) and cc > 0:
        return divmod(cc, 10)
    raise TypeError(f"cc must be major * 10 + minor (e.g. 90) or a (major, minor) pair; got {cc!r}")


def declare(function: Callable[..., Any], families: Sequence[Family], dtypes: Sequence[str]) -> Callable[..., Any]:
    """Attach the capability queries to ``function`` (returned, for use as a decorator)."""

    def is_compute_capability_supported(cc: int | tuple[int, int]) -> bool:
        """True when every kernel family this op uses has a target for ``cc``."""
        major, minor = _cc_pair(cc)
        return all(isinstance(family_target(family, Target(major, minor)), Target) for family in families)

    def capabilities() -> dict[str, Any]:
        from .jit.policy import TargetPolicy
        from .jit.toolchain import toolchain_for

        try:
            toolchain = toolchain_for("cute")
        except ImportError:  # no CuTe DSL: report what the families need, not what builds here
            toolchain = None
        facts: dict[str, Any] = {"dtypes": list(dtypes), "families": {}}
        for family in families:
            kept = (TargetPolicy.from_environment(toolchain, None, arch_list="8.0 8.6 8.9 9.0a 10.0a 10.3a 12.0a 12.1a")
                    .decide(family).kept if toolchain is not None else [])
            facts["families"][family.value] = [target.sm for target in kept]
        return facts

    function.is_compute_capability_supported = is_compute_capability_supported  # type: ignore[attr-defined]
    function.capabilities = capabilities  # type: ignore[attr-defined]
    function.supported_dtypes = tuple(dtypes)  # type: ignore[attr-defined]
    return function
