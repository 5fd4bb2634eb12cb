"""The ``cutefi`` command: ``env``, ``aot``, ``cache ls|clear|path``."""

from __future__ import annotations

import argparse
import sys
from typing import Sequence

from ._version import __version__


def _env(_args: argparse.Namespace) -> int:
    from .env import env

    report = env()
    print(report)
    for warning in report.warnings:
        print(f"cutefi env: warning: {warning}", file=sys.stderr)
    for problem in report.problems:
        print(f"cutefi env: {problem}", file=sys.stderr)
    return 2 if report.problems else 0  # a script can check its settings with `cutefi env`


def _aot(args: argparse.Namespace) -> int:
    from pathlib import Path

    from tqdm.auto import tqdm

    from .jit import settings
    from .jit import driver as drv
    from .jit.aot import build_pack, plan
    from .jit.registry import all_specs

    # every option is checked before anything is built: a typo must not cost a full build
    out = Path(args.out).expanduser()
    try:
        if args.arch:
            settings.parse_arch_list(args.arch, "--arch")
        else:
            settings.arch_list()
        problem = settings.dir_problem(out)  # a pack is code the GPU runs: private, like the cache
        if problem is not None:
            raise settings.SettingsError(f"--out={args.out!r}: {problem}")
        workers: int | None = None
        if args.jobs is not None:  # parsed here, not by argparse, for a one-line error
            try:
                workers = int(args.jobs)
            except ValueError:
                workers = 0
            if workers < 1:
                raise settings.SettingsError(f"--jobs={args.jobs!r}: expected an integer >= 1 (worker processes)")
    except settings.SettingsError as exc:
        print(f"cutefi aot: {exc}", file=sys.stderr)
        return 2
    specs = all_specs()
    if args.only:
        specs = [s for s in specs if any(pattern in s.name for pattern in args.only)]
        if not specs:
            print(f"cutefi aot: no kernel matches --only {' '.join(args.only)}", file=sys.stderr)
            return 2
    try:
        jobs, report = plan(args.arch, specs, [d.cc for d in drv.devices()] if not args.arch else None)
    except (ValueError, ImportError) as exc:
        print(f"cutefi aot: {exc}", file=sys.stderr)
        return 2
    for spec, reason in report.dropped:
        print(f"{spec.describe()}: {reason}")
    if not jobs:  # a pack with nothing in it is a failure a script must see
        print("cutefi aot: nothing to build: the policy dropped every target of every kernel "
              "(reasons above)", file=sys.stderr)
        return 2
    with tqdm(total=len(jobs), desc="building", unit="cubin") as bar:
        build_pack(out, jobs, report, workers=workers, progress=bar.update)
    for spec, target, seconds, size in sorted(report.built, key=lambda r: (r[0].describe(), r[1])):
        print(f"built {spec.describe()} {target.sm}: {size} bytes in {seconds:.2f} s")
    for spec, target, error in report.failed:
        print(f"FAILED {spec.describe()} {target.sm}: {error}", file=sys.stderr)
    print(f"{len(report.built)} built, {len(report.failed)} failed, pack: {args.out}")
    if args.prune and not report.failed:
        from .jit.cache import ArtifactStore

        removed = ArtifactStore(out).clear(keep={spec.lookup_key(target) for spec, target in jobs})
        print(f"pruned {removed} entries this build did not write")
    return 1 if report.failed else 0


def _cache(args: argparse.Namespace) -> int:
    from .jit.cache import ForeignContentError
    from .jit.lookup import cache_store

    store = cache_store()
    if args.action == "path":
        print(store.root)
    elif args.action == "ls":
        for entry in store.entries():  # metadata fields may be anything in a damaged entry
            problem = f"  corrupt: {entry['_problem']} ({entry['_path']})" if entry["_problem"] else ""
            print(f"{str(entry.get('target', '?')):8s} {entry['_bytes']:8d} B  {entry.get('spec', '?')}  "
                  f"[{entry.get('toolchain', '?')}]{problem}")
    elif args.action == "clear":
        try:
            removed = store.clear()
        except (ForeignContentError, OSError) as exc:  # refused (nothing deleted) or failed: say why
            print(f"cutefi cache clear: {exc}", file=sys.stderr)
            return 1
        print(f"removed {removed} entries from {store.root}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="cutefi", description="cutefi kernels: environment, AOT packs, cache")
    parser.add_argument("--version", action="version", version=f"cutefi {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("env", help="GPUs, driver, toolchains, target policy, cache and packs")
    aot = sub.add_parser("aot", help="build every kernel for a target list into a pack directory")
    aot.add_argument("--arch", help="targets, e.g. '8.0 9.0a 12.0a' (default: $CUTEFI_CUDA_ARCH_LIST or the visible GPUs)")
    aot.add_argument("--out", required=True, help="pack directory to write (created mode 0700; "
                     "must not be writable by others)")
    aot.add_argument("--jobs", default=None, help="worker processes, an integer >= 1 (default: CPU count)")
    aot.add_argument("--only", nargs="*", help="build only kernels whose name contains one of these")
    aot.add_argument("--prune", action="store_true",
                     help="after a build with no failure, delete the pack's entries this build did not "
                          "write (cubins of earlier kernel versions, targets or specs)")
    cache = sub.add_parser("cache", help="the on-disk cubin cache")
    cache.add_argument("action", choices=["ls", "clear", "path"])
    args = parser.parse_args(argv)
    from .jit.settings import SettingsError

    handler = {"env": _env, "aot": _aot, "cache": _cache}[args.command]
    try:
        return handler(args)
    except SettingsError as exc:  # e.g. `cutefi cache ls` with a bad CUTEFI_CACHE_DIR: one line
        print(f"cutefi {args.command}: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
