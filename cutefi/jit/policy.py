"""Target policy: which targets to build a kernel family for, and why the others are dropped.

Inputs: the requested targets (``CUTEFI_CUDA_ARCH_LIST``, else the visible devices), the
toolchain in hand (its CUDA version and the targets it accepts), the driver where a GPU
exists, and the kernel family's requirement. Output: the kept targets, plus one sentence per
dropped target. Nothing is patched out of flag lists after the fact: this decides.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

from .targets import (
    Target,
    first_cuda_for,
    format_version,
    last_cuda_major_for,
    parse_target_list,
)

ARCH_LIST_ENV = "CUTEFI_CUDA_ARCH_LIST"


class Family(str, Enum):
    """What a kernel needs from the chip; decides the build target per compute capability."""

    SIMT = "simt"          # plain loads/stores and FMAs: every chip from sm_80
    MMA_SYNC = "mma_sync"  # warp-level mma.sync tensor cores
    MMA_SYNC_FP8 = "mma_sync_fp8"  # mma.sync with FP8 operands: sm_89 and newer
    TMA = "tma"            # bulk tensor copies and thread-block clusters: sm_90 and newer
    WGMMA = "wgmma"        # Hopper warpgroup MMA: exactly sm_90a
    TCGEN05 = "tcgen05"    # Blackwell datacenter tensor cores: sm_100a / sm_103a


# Warp-level mma.sync runs on every tensor-core chip from Ampere on, Blackwell included
# (B200 10.0, GB300 10.3, Thor 11.0, RTX 50 12.0, DGX Spark 12.1). A toolchain that cannot
# build one of them (CuTe DSL on CUDA 12.9 for Thor's sm_110a) drops it in TargetPolicy.
_MMA_SYNC_CCS = {(8, 0), (8, 6), (8, 9), (9, 0), (10, 0), (10, 3), (11, 0), (12, 0), (12, 1)}
_FAMILY_RULE = {
    Family.SIMT: "builds for compute capability 8.0 and newer",
    Family.MMA_SYNC: "builds for 8.0, 8.6, 8.9, 9.0, 10.0, 10.3, 11.0, 12.0 and 12.1",
    Family.MMA_SYNC_FP8: "needs FP8 mma.sync: builds for 8.9, 9.0, 10.0, 10.3, 11.0, 12.0 and 12.1",
    Family.TMA: "needs TMA and clusters (compute capability 9.0 and newer)",
    Family.WGMMA: "needs wgmma, which only sm_90a has",
    Family.TCGEN05: "needs tcgen05 (sm_100a or sm_103a)",
}


def family_target(family: Family, requested: Target) -> Target | str:
    """The target a family builds for a requested one, or the reason it cannot.

    The device → target map is exact: a family-specific suffix is chosen per compute
    capability (CC 12.1 gets sm_121a, never sm_120a), and a requested ``f`` suffix is kept
    where the family can use a family-portable cubin.
    """
    major, minor = requested.cc
    if major < 8 or (family not in (Family.SIMT, Family.MMA_SYNC, Family.MMA_SYNC_FP8) and major < 9):
        return f"the {family.value} family {_FAMILY_RULE[family]}"
    if family is Family.MMA_SYNC and requested.cc not in _MMA_SYNC_CCS:
        return f"the {family.value} family {_FAMILY_RULE[family]}"
    if family is Family.MMA_SYNC_FP8 and (requested.cc not in _MMA_SYNC_CCS or requested.cc < (8, 9)):
        return f"the {family.value} family {_FAMILY_RULE[family]}"
    if family is Family.WGMMA:
        return Target(9, 0, "a") if requested.cc == (9, 0) else f"the wgmma family {_FAMILY_RULE[family]}"
    if family is Family.TCGEN05:
        if requested.cc not in {(10, 0), (10, 3)}:
            return f"the tcgen05 family {_FAMILY_RULE[family]}"
        return Target(major, minor, "f" if requested.suffix == "f" else "a")
    if major < 10:
        return Target(major, minor, "")  # nothing arch-specific needed before Blackwell
    return Target(major, minor, "f" if requested.suffix == "f" else "a")


@dataclass(frozen=True)
class Toolchain:
    """A compiler as the policy sees it: name, version, CUDA version, accepted targets."""

    name: str
    version: str
    cuda_version: tuple[int, int]
    accepted: frozenset[Target] | None = None  # None: any target its CUDA version knows
    min_cc: tuple[int, int] = (0, 0)

    def why_not(self, target: Target) -> str | None:
        """None if this toolchain builds ``target``, else the reason."""
        first = first_cuda_for(target)
        if first is None:
            return f"{self.name} {self.version} does not know {target.sm}"
        cuda = format_version(self.cuda_version)
        if self.cuda_version < first:
            return f"needs CUDA {format_version(first)}, {self.name} uses CUDA {cuda}"
        last_major = last_cuda_major_for(target)
        if last_major is not None and self.cuda_version[0] > last_major:
            return f"CUDA {self.cuda_version[0]} no longer builds it (last: CUDA {last_major}.x)"
        if target.cc < self.min_cc:
            return f"{self.name} builds for {format_version(self.min_cc)} and newer"
        if self.accepted is not None and target not in self.accepted:
            return f"{self.name} {self.version} (CUDA {cuda}) does not accept {target.sm}"
        return None


@dataclass(frozen=True)
class PolicyDecision:
    kept: tuple[Target, ...]
    dropped: tuple[tuple[Target, str], ...] = field(default_factory=tuple)

    def reasons(self) -> list[str]:
        return [f"{target.sm} dropped: {reason}" for target, reason in self.dropped]


@dataclass(frozen=True)
class TargetPolicy:
    """Decides the build targets of a kernel family for a toolchain (and a driver)."""

    requested: tuple[Target, ...]
    toolchain: Toolchain
    driver_cuda: tuple[int, int] | None = None

    @classmethod
    def from_environment(
        cls,
        toolchain: Toolchain,
        device_ccs: list[tuple[int, int]] | None = None,
        driver_cuda: tuple[int, int] | None = None,
        arch_list: str | None = None,
    ) -> "TargetPolicy":
        """Requested targets from ``arch_list``, else ``$CUTEFI_CUDA_ARCH_LIST``, else devices.

        ``arch_list=""`` means the devices. A bad list raises a ``ValueError`` (from the
        variable: a ``SettingsError`` naming it).
        """
        from . import settings  # lazy: settings imports this module

        requested: list[Target] | None
        if arch_list is not None:
            requested = parse_target_list(arch_list) if arch_list else None
        else:
            requested = settings.arch_list()  # validated and memoised in one place
        if requested is None:
            if not device_ccs:
                raise ValueError(
                    f"no GPU targets: no GPU is visible and {ARCH_LIST_ENV} is not set "
                    f"(e.g. {ARCH_LIST_ENV}='8.0 9.0a 12.0a')"
                )
            requested = [Target(major, minor) for major, minor in device_ccs]
        return cls(tuple(requested), toolchain, driver_cuda)

    def decide(self, family: Family) -> PolicyDecision:
        kept: list[Target] = []
        dropped: list[tuple[Target, str]] = []
        for requested in self.requested:
            # a chip the toolchain cannot build at all is reported as such, before the family
            toolchain_reason = self.toolchain.why_not(Target(*requested.cc))
            if toolchain_reason is not None:
                dropped.append((requested, toolchain_reason))
                continue
            built = family_target(family, requested)
            if isinstance(built, str):
                dropped.append((requested, built))
                continue
            reason = self.toolchain.why_not(built)
            if reason is None and self.driver_cuda is not None:
                first = first_cuda_for(built)
                if first is not None and self.driver_cuda < first:
                    reason = (
                        f"needs a driver for CUDA {format_version(first)}, "
                        f"driver is {format_version(self.driver_cuda)}"
                    )
            if reason is not None:
                dropped.append((built, reason))
            elif built not in kept:
                kept.append(built)
        return PolicyDecision(tuple(kept), tuple(dropped))
