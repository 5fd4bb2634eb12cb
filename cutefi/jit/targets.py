"""GPU targets: parse, print, and what each one needs from a toolchain.

A target is what a cubin is built for: ``sm_<major><minor>`` plus an optional suffix,
``a`` (arch-specific: uses instructions such as wgmma/tcgen05, runs on exactly that
compute capability) or ``f`` (family-portable: runs on every chip of the family).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

ACCEPTED_FORMS = "'8.0', '9.0a', '12.0f', 'sm_90a', '90a' (also 'compute_90a')"

_DOTTED = re.compile(r"^(?:sm_|compute_)?(\d{1,2})\.(\d)([af]?)$")
_COMPACT = re.compile(r"^(?:sm_|compute_)?(\d{1,2})(\d)([af]?)$")


@dataclass(frozen=True, order=True)
class Target:
    """A build target such as ``sm_90a``; ordered by (major, minor, suffix)."""

    major: int
    minor: int
    suffix: str = ""

    def __post_init__(self) -> None:
        if self.suffix not in ("", "a", "f"):
            raise ValueError(f"Target suffix must be '', 'a' or 'f', got {self.suffix!r}")

    @classmethod
    def parse(cls, text: str) -> "Target":
        """Parse any accepted spelling; raise ``ValueError`` listing the forms otherwise."""
        if isinstance(text, Target):
            return text
        cleaned = str(text).strip().lower()
        for pattern in (_DOTTED, _COMPACT):
            match = pattern.match(cleaned)
            if match:
                return cls(int(match.group(1)), int(match.group(2)), match.group(3))
        raise ValueError(f"unknown GPU target {text!r}; accepted forms: {ACCEPTED_FORMS}")

    @property
    def sm(self) -> str:
        """The compiler's spelling, e.g. ``sm_90a``."""
        return f"sm_{self.major}{self.minor}{self.suffix}"

    @property
    def cc(self) -> tuple[int, int]:
        return (self.major, self.minor)

    @property
    def dotted(self) -> str:
        return f"{self.major}.{self.minor}{self.suffix}"

    def runs_on(self, cc: tuple[int, int]) -> bool:
        """Whether a cubin built for this target loads on a device of compute capability ``cc``."""
        if self.suffix == "f":
            return cc[0] == self.major and cc[1] >= self.minor
        return cc == self.cc

    def __str__(self) -> str:
        return self.sm


def parse_target_list(text: str) -> list[Target]:
    """Parse ``CUTEFI_CUDA_ARCH_LIST``-style text: targets separated by spaces, commas or ';'.

    A list is a request to build, so a target no toolchain could build for cutefi is refused
    here (see :func:`why_never_built`); a visible GPU's target is not parsed, and the policy
    explains why it is dropped instead.
    """
    items = [item for item in re.split(r"[\s,;]+", text.strip()) if item]
    if not items:
        raise ValueError(f"empty GPU target list; give targets such as {ACCEPTED_FORMS}")
    targets = [Target.parse(item) for item in items]
    for target in targets:
        reason = why_never_built(target)
        if reason is not None:
            raise ValueError(f"{reason}; known targets: {known_targets()} (optionally with 'a' or 'f'), "
                             f"written as {ACCEPTED_FORMS}")
    return targets


# The first CUDA release whose compiler builds each compute capability (any suffix), and the
# first that knows the 'a'/'f' variants where they came later. These decide, with a
# toolchain's version, which targets it can build; see TargetPolicy.
_FIRST_CUDA: dict[tuple[int, int], tuple[int, int]] = {
    (7, 0): (9, 0), (7, 2): (10, 0), (7, 5): (10, 0),
    (8, 0): (11, 0), (8, 6): (11, 1), (8, 7): (11, 4), (8, 8): (13, 0), (8, 9): (11, 8),
    (9, 0): (11, 8),
    (10, 0): (12, 8), (10, 1): (12, 8), (10, 3): (12, 9), (11, 0): (13, 0),
    (12, 0): (12, 8), (12, 1): (12, 9),
}
_FIRST_CUDA_SUFFIXED: dict[str, tuple[int, int]] = {"a": (12, 0), "f": (12, 9)}
# Compute capabilities a CUDA major release stopped building.
_LAST_CUDA_MAJOR: dict[tuple[int, int], int] = {(7, 0): 12, (7, 2): 12, (10, 1): 12}


def first_cuda_for(target: Target) -> tuple[int, int] | None:
    """The oldest CUDA version whose compiler builds ``target``; None for unknown chips."""
    base = _FIRST_CUDA.get(target.cc)
    if base is None:
        return None
    return max(base, _FIRST_CUDA_SUFFIXED.get(target.suffix, (0, 0)))


def last_cuda_major_for(target: Target) -> int | None:
    """The last CUDA major version that builds ``target``, or None if still supported."""
    return _LAST_CUDA_MAJOR.get(target.cc)


def format_version(version: tuple[int, int]) -> str:
    return f"{version[0]}.{version[1]}"


# The oldest chip any cutefi kernel family builds for (policy.family_target refuses older ones).
MIN_CC = (8, 0)


def why_never_built(target: Target) -> str | None:
    """Why no toolchain builds ``target`` for cutefi, whatever its version; None if some can."""
    if first_cuda_for(target) is None:
        return f"no CUDA release knows {target.sm}"
    if target.cc < MIN_CC:
        last = last_cuda_major_for(target)
        dropped = f" (and CUDA {last + 1} dropped it)" if last is not None else ""
        return f"cutefi builds for compute capability {format_version(MIN_CC)} and newer, not {target.sm}{dropped}"
    return None


def known_targets() -> str:
    """The compute capabilities cutefi can be asked to build, e.g. ``'8.0 8.6 ... 12.1'``."""
    return " ".join(format_version(cc) for cc in sorted(_FIRST_CUDA) if cc >= MIN_CC)
