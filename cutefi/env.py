"""What ``cutefi env`` reports, as data: GPUs, driver, toolchains, the target policy (and why it
drops targets), each public op's capabilities, the cache and the packs.

``cutefi.env()`` returns an :class:`EnvReport` (``.facts`` is a plain dict, ``str()`` is the
command's text, and a notebook shows it as a block of that text); the ``cutefi env`` command
prints the same report.
"""

from __future__ import annotations

import html
import warnings
from dataclasses import dataclass, field
from typing import Any

from ._version import __version__


@dataclass
class EnvReport:
    facts: dict[str, Any]
    lines: list[str]
    warnings: list[str] = field(default_factory=list)  # skipped pack entries and the like
    problems: list[str] = field(default_factory=list)  # refused settings (the command exits 2)

    def __str__(self) -> str:
        return "\n".join(self.lines)

    def __repr__(self) -> str:
        return str(self)

    def _repr_html_(self) -> str:
        notes = "".join(f"\n{line}" for line in (*self.warnings, *self.problems))
        return f"<pre>{html.escape(str(self) + notes)}</pre>"


def env() -> EnvReport:
    """The facts ``cutefi env`` prints, without printing them (works on any machine)."""
    lines: list[str] = [f"cutefi {__version__}"]
    facts: dict[str, Any] = {"cutefi": __version__}
    _devices_and_driver(facts, lines)
    _toolchains_and_policy(facts, lines)
    _ops(facts, lines)
    report = EnvReport(facts, lines)
    _cache_and_packs(report)
    return report


def _devices_and_driver(facts: dict[str, Any], lines: list[str]) -> None:
    from .jit import driver as drv

    _, why = drv.gpu_available()
    devices = drv.devices()
    facts["gpus"] = [{"index": d.index, "name": d.name, "cc": f"{d.cc[0]}.{d.cc[1]}", "sms": d.sms,
                      "memory_gib": round(d.memory_bytes / 2**30, 1)} for d in devices]
    facts["ccs"] = [d.cc for d in devices]
    for d in devices:
        lines.append(f"GPU {d.index}: {d.name}, compute capability {d.cc[0]}.{d.cc[1]}, "
                     f"{d.sms} SMs, {d.memory_bytes / 2**30:.1f} GiB")
    if not devices:
        lines.append(f"GPU: none ({why})")
        facts["no_gpu_reason"] = why
    driver = drv.driver_cuda_version()
    facts["driver_cuda"] = f"{driver[0]}.{driver[1]}" if driver else None
    facts["_driver"] = driver
    lines.append(f"driver: CUDA {driver[0]}.{driver[1]}" if driver else "driver: none")
    try:
        import torch

        facts["torch"] = torch.__version__
        lines.append(f"torch: {torch.__version__} (CUDA {torch.version.cuda or 'none'})")
    except ImportError:
        facts["torch"] = None
        lines.append("torch: not installed")


def _toolchains_and_policy(facts: dict[str, Any], lines: list[str]) -> None:
    from .jit import settings
    from .jit.policy import ARCH_LIST_ENV, Family, TargetPolicy
    from .jit.toolchain import dsl_toolchain, nvrtc_toolchain

    toolchains = []
    facts["toolchains"] = {}
    for probe in (dsl_toolchain, nvrtc_toolchain):
        try:
            chain = probe()
        except Exception as exc:  # report, don't fail: env must work on any machine
            lines.append(f"toolchain: unavailable ({exc})")
            continue
        toolchains.append(chain)
        facts["toolchains"][chain.name] = chain.version
        lines.append(f"toolchain: {chain.name} {chain.version} "
                     f"(CUDA {chain.cuda_version[0]}.{chain.cuda_version[1]})")
    facts["policy"] = {}
    for chain in toolchains:
        try:
            policy = TargetPolicy.from_environment(chain, facts["ccs"], facts["_driver"])
        except ValueError as exc:
            lines.append(f"policy ({chain.name}): {exc}")
            break
        arch_from_env = settings.arch_list() is not None  # memoised; the policy validated it
        source = ARCH_LIST_ENV if not facts["ccs"] or arch_from_env else "visible devices"
        lines.append(f"policy ({chain.name}, targets from {source}: "
                     f"{' '.join(t.dotted for t in policy.requested)}):")
        decided = facts["policy"][chain.name] = {}
        for family in Family:
            decision = policy.decide(family)
            decided[family.value] = {"build": [t.sm for t in decision.kept], "dropped": list(decision.reasons())}
            lines.append(f"  {family.value:12s} build {' '.join(t.sm for t in decision.kept) or '-'}")
            lines.extend(f"  {'':12s} {reason}" for reason in decision.reasons())


def _ops(facts: dict[str, Any], lines: list[str]) -> None:
    """Each public op's capability facts (the same its ``is_compute_capability_supported`` gives)."""
    import cutefi

    ccs = facts["ccs"]
    lines.append("ops (dtypes; kernel families"
                 + ("; runs on GPU " + " ".join(str(i) for i in range(len(ccs))) if ccs else "") + "):")
    facts["ops"] = {}
    for name in cutefi.__all__:
        if name == "__version__":
            continue
        function = getattr(cutefi, name)
        families = list(function.capabilities()["families"])
        runs = [function.is_compute_capability_supported(cc) for cc in ccs]
        facts["ops"][name] = {"dtypes": list(function.supported_dtypes), "families": families, "runs_on_gpus": runs}
        lines.append(f"  {name:38s} {' '.join(function.supported_dtypes)}; {' '.join(families)}"
                     + (f"; {' '.join('yes' if ok else 'no' for ok in runs)}" if ccs else ""))


def _cache_and_packs(report: EnvReport) -> None:
    from .jit import settings
    from .jit.lookup import cache_store, pack_stores

    try:
        cache = cache_store()
    except settings.SettingsError:  # reported below with every other refused setting
        report.facts["cache"] = None
        report.lines.append(f"cache: {settings.cache_dir(check=False)} (unusable)")
    else:
        report.facts["cache"] = {"path": str(cache.root), "entries": len(cache.entries()),
                                 "mib": round(cache.size_bytes() / 2**20, 1)}
        report.lines.append(f"cache: {cache.root} ({len(cache.entries())} entries, "
                            f"{cache.size_bytes() / 2**20:.1f} MiB)")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")  # every skipped entry, seen before or not
        settings.pack_paths()
    packs = pack_stores()
    report.facts["packs"] = [{"path": str(p.root), "entries": len(p.entries())} for p in packs]
    report.lines.append("packs: " + (", ".join(f"{p.root} ({len(p.entries())} entries)" for p in packs) or "none"))
    report.warnings = [str(warning.message) for warning in caught]
    report.problems = list(settings.problems())
    for private in ("ccs", "_driver"):
        report.facts.pop(private)
