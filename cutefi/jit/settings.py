"""cutefi's settings: every environment variable read, validated and explained in one place.

One function per variable. A refused value raises :class:`SettingsError` (a ``ValueError``)
whose one-line message names the variable, its value and what is accepted, so a typo fails the
same way on every machine (warm cache or cold) instead of deep inside a build. An empty
variable counts as unset (``VAR= cmd`` is how a shell unsets one for a command).

Parsing is memoised on the variable's raw string: a changed variable (a test's monkeypatch) is
read again, and a failure is never remembered, so the next call after a fix works. Checks
of the disk (does the cache directory exist, can it be written) run on every call: the disk
changes, and callers (``lookup.cache_store``) keep the result anyway.
"""

from __future__ import annotations

import functools
import math
import os
import warnings
from pathlib import Path

from .._version import __version__
from .cache import CACHE_ENV, LOCK_TIMEOUT_ENV, UnsafeCacheError, check_safe_dir
from .policy import ARCH_LIST_ENV
from .targets import Target, parse_target_list

PACK_PATH_ENV = "CUTEFI_PACK_PATH"  # lookup.PACK_PATH_ENV names the same variable
DEFAULT_LOCK_TIMEOUT = 600.0


class SettingsError(ValueError):
    """A setting (environment variable or command-line option) has a value cutefi refuses."""


class SettingsWarning(UserWarning):
    """A setting names something that is not there; cutefi goes on without it."""


def _raw(name: str) -> str | None:
    value = os.environ.get(name)
    return value if value and value.strip() else None


# -- CUTEFI_CUDA_ARCH_LIST ---------------------------------------------------------------------
def arch_list() -> list[Target] | None:
    """The targets ``$CUTEFI_CUDA_ARCH_LIST`` asks for; None when unset (use the visible GPUs)."""
    raw = _raw(ARCH_LIST_ENV)
    return None if raw is None else parse_arch_list(raw, ARCH_LIST_ENV)


def parse_arch_list(text: str, source: str) -> list[Target]:
    """Parse a target list from ``source`` (a variable or an option such as ``--arch``)."""
    return list(_parse_arch_list(text, source))


@functools.lru_cache(maxsize=64)
def _parse_arch_list(text: str, source: str) -> tuple[Target, ...]:
    try:
        return tuple(parse_target_list(text))
    except ValueError as exc:
        raise SettingsError(f"{source}={text!r}: {exc}") from None


# -- CUTEFI_LOCK_TIMEOUT -----------------------------------------------------------------------
def lock_timeout() -> float:
    """Seconds to wait for another process building the same kernel; 0: do not wait (fail at
    once if the kernel is being built elsewhere)."""
    return _parse_lock_timeout(_raw(LOCK_TIMEOUT_ENV))


@functools.lru_cache(maxsize=16)
def _parse_lock_timeout(raw: str | None) -> float:
    if raw is None:
        return DEFAULT_LOCK_TIMEOUT
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    # why finite: nan makes every deadline comparison false (a contended lookup waits forever)
    if not math.isfinite(value) or value < 0:
        raise SettingsError(
            f"{LOCK_TIMEOUT_ENV}={raw!r}: expected a finite number of seconds >= 0 "
            f"(0: do not wait for another process's build; default {DEFAULT_LOCK_TIMEOUT:.0f})"
        )
    return value


# -- CUTEFI_CACHE_DIR --------------------------------------------------------------------------
def cache_dir(check: bool = True, private: bool = False) -> Path:
    """The cubin cache directory (``$CUTEFI_CACHE_DIR``, else ``~/.cache/cutefi/<version>``).

    ``check``: refuse (SettingsError) a path cutefi cannot write cubins under: a file, or a
    directory that is not writable or cannot be created. ``private``: also refuse one others can
    write to (the cache refuses those itself when it reads; ``cutefi env`` flags it early).
    """
    raw = _raw(CACHE_ENV)
    path = Path(raw).expanduser() if raw is not None else Path.home() / ".cache" / "cutefi" / __version__
    problem = dir_problem(path, private) if check else None
    if problem is not None:
        where = f"{CACHE_ENV}={raw!r}" if raw is not None else f"the default cache ({CACHE_ENV} is not set)"
        raise SettingsError(f"{where}: {problem}; set {CACHE_ENV} to a directory you can write "
                            f"(for read-only cubins, use {PACK_PATH_ENV})")
    return path


def dir_problem(path: Path, private: bool = True) -> str | None:
    """Why cutefi cannot write cubins into ``path`` (created if missing), or None if it can.

    ``private``: also refuse a directory that others can write to or that is not ours (a cubin
    is code the GPU runs).
    """
    try:
        if path.exists():
            if not path.is_dir():
                return f"{path} is not a directory"
            if private:
                try:
                    check_safe_dir(path, hint=f"run `chmod go-w {path}`")
                except UnsafeCacheError as exc:
                    return str(exc)
            if not os.access(path, os.W_OK | os.X_OK):
                return f"{path} is not writable"
            return None
        parent = path.parent
        while not parent.exists():  # ends: "/" or "." exists
            parent = parent.parent
        if not parent.is_dir():
            return f"{path} cannot be created: {parent} is not a directory"
        if not os.access(parent, os.W_OK | os.X_OK):
            return f"{path} cannot be created: {parent} is not writable"
    except OSError as exc:  # e.g. a parent we may not even look into
        return f"{path} cannot be used: {exc.strerror or exc}"
    return None


# -- CUTEFI_PACK_PATH --------------------------------------------------------------------------
def pack_paths() -> list[Path]:
    """The directories listed in ``$CUTEFI_PACK_PATH`` (``os.pathsep``-separated), in order.

    Packs are optional, so an entry that is not a directory is skipped with a
    :class:`SettingsWarning` naming it (shown once per entry by the default warning filter)
    rather than refused: a missing pack costs a build or a clear "no cubin" error later.
    """
    raw = _raw(PACK_PATH_ENV)
    found: list[Path] = []
    for path in _split_pack_path(raw) if raw is not None else ():
        try:
            usable = path.is_dir()
        except OSError:
            usable = False
        if usable:
            found.append(path)
        else:
            warnings.warn(f"{PACK_PATH_ENV}: {path} is not a directory; skipping it", SettingsWarning,
                          stacklevel=2)
    return found


@functools.lru_cache(maxsize=16)
def _split_pack_path(raw: str) -> tuple[Path, ...]:
    return tuple(Path(item).expanduser() for item in raw.split(os.pathsep) if item.strip())


# -- all of them -------------------------------------------------------------------------------
def problems() -> list[str]:
    """One line per setting cutefi refuses (``cutefi env`` prints them)."""
    found: list[str] = []
    for check in (arch_list, lock_timeout, lambda: cache_dir(private=True)):
        try:
            check()
        except SettingsError as exc:
            found.append(str(exc))
    return found
