"""Ahead-of-time packs: build every registered spec for the policy's targets, in parallel.

A pack is an :class:`~cutefi.jit.cache.ArtifactStore` directory that can ship in a wheel or
be pointed at with ``CUTEFI_PACK_PATH``. Builds run in worker processes because
``cute.compile`` is not thread-safe.
"""

from __future__ import annotations

import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from .cache import Artifact, ArtifactStore
from .policy import TargetPolicy
from .registry import all_specs
from .spec import KernelSpec, toolchain_key
from .targets import Target
from .toolchain import toolchain_for


@dataclass
class AotReport:
    built: list[tuple[KernelSpec, Target, float, int]] = field(default_factory=list)
    dropped: list[tuple[KernelSpec, str]] = field(default_factory=list)
    failed: list[tuple[KernelSpec, Target, str]] = field(default_factory=list)


def plan(arch_list: str | None, specs: list[KernelSpec] | None = None,
         device_ccs: list[tuple[int, int]] | None = None) -> tuple[list[tuple[KernelSpec, Target]], AotReport]:
    """(spec, target) pairs the policy keeps, and a report holding the dropped ones."""
    report = AotReport()
    jobs: list[tuple[KernelSpec, Target]] = []
    for spec in specs if specs is not None else all_specs():
        policy = TargetPolicy.from_environment(toolchain_for(spec.kind), device_ccs, arch_list=arch_list)
        decision = policy.decide(spec.family)
        jobs.extend((spec, target) for target in decision.kept)
        report.dropped.extend((spec, reason) for reason in decision.reasons())
    return jobs, report


def _build_one(spec: KernelSpec, target: Target) -> Artifact:
    from .compile import build

    return build(spec, target)


def build_pack(out_dir: str | Path, jobs: list[tuple[KernelSpec, Target]], report: AotReport,
               workers: int | None = None,
               progress: Callable[[int], object] | None = None) -> AotReport:
    """Build ``jobs`` into the pack at ``out_dir``; failures are reported, not raised."""
    store = ArtifactStore(out_dir)
    workers = workers or max(1, min(len(jobs), os.cpu_count() or 1))
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
        futures = {pool.submit(_build_one, spec, target): (spec, target) for spec, target in jobs}
        for future in as_completed(futures):
            spec, target = futures[future]
            try:
                artifact = future.result()
            except Exception as exc:  # one failing kernel must not hide the others
                report.failed.append((spec, target, f"{type(exc).__name__}: {exc}"))
            else:
                store.write(spec.lookup_key(target), toolchain_key(spec.kind), artifact)
                report.built.append((spec, target, artifact.metadata["build_seconds"], len(artifact.cubin)))
            if progress is not None:
                progress(1)
    return report
