"""Per device, pick a kernel variant by compute capability.

An op lists its variants in order of preference (say ``wgmma`` then ``mma_sync``); the
first whose family the device can run (:func:`~cutefi.jit.policy.family_target` gives a
target for its compute capability) is chosen. Each choice is memoised per (op, compute
capability, forced name), and its reason is logged once at DEBUG level through the
``cutefi.dispatch`` logger, e.g.::

    gemm on CC 8.9 -> mma_sync: sm_89 on CC 8.9; wgmma skipped: the wgmma family needs wgmma, ...

Tests force a variant with :func:`force_variant` or ``CUTEFI_FORCE_VARIANT="op=name,op2=name2"``
(the context manager wins); forcing a name the op does not have, or one the device cannot run,
raises ``ValueError``. Pure Python: no torch, no CuTe DSL.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import os
from dataclasses import dataclass, field
from typing import Any, Iterator, Mapping, Sequence

from .policy import Family, family_target
from .targets import Target

FORCE_ENV = "CUTEFI_FORCE_VARIANT"

logger = logging.getLogger("cutefi.dispatch")


@dataclass(frozen=True)
class Variant:
    """One implementation of an op: its name (unique within the op) and kernel family.

    ``impl`` is whatever the op needs to run it (a spec, a builder, a function); it takes no
    part in equality or hashing.
    """

    name: str
    family: Family
    impl: Any = field(default=None, compare=False, hash=False, repr=False)


@dataclass(frozen=True)
class Choice:
    """A dispatch decision: the variant, the target it builds for, and why."""

    op: str
    cc: tuple[int, int]
    variant: Variant
    target: Target
    reason: str
    forced_by: str | None = None  # "force_variant()" or FORCE_ENV when forced
    skipped: tuple[tuple[str, str], ...] = ()  # (variant name, why) for preferred ones passed over


class NoVariantError(RuntimeError):
    """None of an op's variants can run on the device."""


_FORCED: contextvars.ContextVar[Mapping[str, str]] = contextvars.ContextVar(
    "cutefi_forced_variants", default={}
)
_MEMO: dict[tuple[str, tuple[int, int], str | None], tuple[tuple[Variant, ...], Choice]] = {}
_ENV_CACHE: dict[str, dict[str, str]] = {}


@contextlib.contextmanager
def force_variant(op: str, name: str) -> Iterator[None]:
    """Within the block, ``op`` uses variant ``name`` (checked when the op is dispatched)."""
    if not op or not name:
        raise ValueError(f"force_variant needs an op and a variant name, got {op!r}, {name!r}")
    token = _FORCED.set({**_FORCED.get(), op: name})
    try:
        yield
    finally:
        _FORCED.reset(token)


def parse_force_env(text: str) -> dict[str, str]:
    """``"op=name,op2=name2"`` → ``{"op": "name", "op2": "name2"}`` (spaces/';' also separate)."""
    forced: dict[str, str] = {}
    for item in text.replace(";", ",").replace(" ", ",").split(","):
        if not item:
            continue
        op, sep, name = item.partition("=")
        if not sep or not op.strip() or not name.strip():
            raise ValueError(
                f"{FORCE_ENV}={text!r}: cannot read {item!r}; expected op=variant items "
                f"separated by commas, e.g. {FORCE_ENV}='gemm=mma_sync,attention=sm80'"
            )
        forced[op.strip()] = name.strip()
    return forced


def _forced_name(op: str) -> tuple[str | None, str | None]:
    """The variant name forced for ``op`` and by what, or (None, None)."""
    name = _FORCED.get().get(op)
    if name is not None:
        return name, "force_variant()"
    text = os.environ.get(FORCE_ENV)
    if not text:
        return None, None
    parsed = _ENV_CACHE.get(text)
    if parsed is None:
        parsed = _ENV_CACHE[text] = parse_force_env(text)
    name = parsed.get(op)
    return (name, FORCE_ENV) if name is not None else (None, None)


def _cc_text(cc: tuple[int, int]) -> str:
    return f"CC {cc[0]}.{cc[1]}"


def decide(op: str, variants: Sequence[Variant], cc: tuple[int, int]) -> Choice:
    """The full decision for ``op`` on a device of compute capability ``cc`` (memoised)."""
    forced, forced_by = _forced_name(op)
    key = (op, cc, forced)
    hit = _MEMO.get(key)
    if hit is not None and (hit[0] is variants or hit[0] == tuple(variants)):
        return hit[1]
    listed = tuple(variants)
    choice = _decide(op, listed, (int(cc[0]), int(cc[1])), forced, forced_by)
    _MEMO[key] = (variants if isinstance(variants, tuple) else listed, choice)
    logger.debug("%s on %s -> %s", op, _cc_text(choice.cc), choice.reason)
    return choice


def choose(op: str, variants: Sequence[Variant], cc: tuple[int, int]) -> Variant:
    """The variant of ``op`` to run on a device of compute capability ``cc``.

    The first of ``variants`` whose family the device runs, unless one is forced. Raises
    ``NoVariantError`` listing each variant and why it was dropped when none can run, and
    ``ValueError`` when the forced one is unknown or cannot run on the device.
    """
    return decide(op, variants, cc).variant


def clear_cache() -> None:
    """Forget every memoised decision (tests; a changed ``CUTEFI_FORCE_VARIANT`` needs none)."""
    _MEMO.clear()


def _decide(op: str, variants: tuple[Variant, ...], cc: tuple[int, int],
            forced: str | None, forced_by: str | None) -> Choice:
    if not variants:
        raise ValueError(f"op {op!r} has no variants to dispatch between")
    names = [v.name for v in variants]
    if len(set(names)) != len(names):
        raise ValueError(f"op {op!r} lists a variant name twice: {names}")
    device = Target(*cc)
    where = _cc_text(cc)

    if forced is not None:
        by_name = {v.name: v for v in variants}
        if forced not in by_name:
            raise ValueError(
                f"{forced_by} forces variant {forced!r} for op {op!r}, which has no such "
                f"variant (it has: {', '.join(names)})"
            )
        variant = by_name[forced]
        target = family_target(variant.family, device)
        if isinstance(target, str):
            raise ValueError(
                f"{forced_by} forces variant {forced!r} for op {op!r}, which cannot run on "
                f"{where}: {target}"
            )
        return Choice(op, cc, variant, target,
                      f"{variant.name}: {target.sm} on {where}, forced by {forced_by}",
                      forced_by=forced_by)

    skipped: list[tuple[str, str]] = []
    for variant in variants:
        target = family_target(variant.family, device)
        if isinstance(target, str):
            skipped.append((variant.name, target))
            continue
        reason = f"{variant.name}: {target.sm} on {where}"
        if skipped:
            reason += "; " + "; ".join(f"{name} skipped: {why}" for name, why in skipped)
        return Choice(op, cc, variant, target, reason, skipped=tuple(skipped))

    lines = "\n".join(f"  {name} ({v.family.value}): {why}"
                      for v, (name, why) in zip(variants, skipped))
    raise NoVariantError(f"no variant of op {op!r} can run on {where}:\n{lines}")
