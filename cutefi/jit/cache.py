"""Content-addressed artifact store: the disk cache and prebuilt packs share this layout.

``<root>/<lookup_key>/<toolchain_key>.cubin`` holds the cubin and ``.json`` its metadata,
including the cubin's sha256. Files are written to a temporary name and renamed. A read
verifies the checksum, the metadata's shape and (``expect``) that it names the kernel the key
was computed for; an unusable entry is deleted in the cache (a miss: rebuilt, never loaded)
and raises :class:`CorruptEntryError` from a pack (which cannot repair itself). Builders of
one key serialise on a ``flock`` (released if a holder dies). A store others can write to is
refused (a cubin is code the GPU runs); the cache must also be the user's own, a pack need
not (it is checksummed; packs installed by root are normal). ``clear`` deletes only what
cutefi wrote, and nothing if the root holds anything else.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import os
import re
import stat
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Mapping


CACHE_ENV = "CUTEFI_CACHE_DIR"
LOCK_TIMEOUT_ENV = "CUTEFI_LOCK_TIMEOUT"
MARKER = "CUTEFI_CACHE"  # written when cutefi creates a store; caches from before lack it
MARKER_TEXT = ("This directory is a cutefi cubin store (cache or pack). `cutefi cache clear` "
               "removes its entries; it refuses if other files are here.\n")

_KEY = re.compile(r"[0-9a-f]{32}")  # a lookup key: one entry directory
_ENTRY_FILE = re.compile(r"[0-9a-f]{16}\.(?:cubin|json|ptx)")  # <toolchain key>.<suffix>
_LOCK_FILE = re.compile(r"[0-9a-f]{32}\.lock")
_MARKER_FILE = re.compile(MARKER)
_TEMP_OF = re.compile(r"\.(.+)\.[a-z0-9_]+\.tmp")  # atomic_write's name, left by a killed writer
_UNSAFE_BITS = stat.S_IWGRP | stat.S_IWOTH


class UnsafeCacheError(RuntimeError):
    """A cache or pack directory is writable by other users; cutefi will not load from it."""


class CorruptEntryError(RuntimeError):
    """A pack entry exists but cannot be used (damaged, or the metadata of another kernel)."""


class ForeignContentError(RuntimeError):
    """A store root holds files cutefi did not write; ``clear`` refuses to touch it."""


@dataclass(frozen=True)
class Artifact:
    cubin: bytes
    metadata: dict[str, Any]
    ptx: str | None = None


def default_cache_root() -> Path:
    """The cache directory, checked writable; raises ``settings.SettingsError`` naming
    ``CUTEFI_CACHE_DIR`` (or ``CUTEFI_LOCK_TIMEOUT``) if the cache cannot be used."""
    from . import settings  # lazy: settings imports this module

    settings.lock_timeout()  # why: a bad value fails when the cache is opened, not only on a cold build
    return settings.cache_dir()


def check_safe_dir(path: Path, require_owner: bool = True, hint: str | None = None) -> None:
    """Refuse a directory (or file) writable by group/others or, if ``require_owner``, owned by
    someone else."""
    info = path.stat()
    hint = hint or f"run `chmod go-w {path}` or set {CACHE_ENV} to a private directory"
    if info.st_mode & _UNSAFE_BITS:
        raise UnsafeCacheError(f"{path} is writable by other users (mode {stat.S_IMODE(info.st_mode):o}); "
                               f"cutefi does not load cubins from it: {hint}")
    if require_owner and hasattr(os, "getuid") and info.st_uid != os.getuid():
        # a caller's hint is about write bits; for ownership only "use your own" helps
        owner_hint = "use a directory you own" if hint is not None else f"set {CACHE_ENV} to a private directory"
        raise UnsafeCacheError(f"{path} belongs to another user (uid {info.st_uid}); cutefi writes and loads "
                               f"cubins only in a directory of its own: {owner_hint}")


def _is_own(name: str, pattern: re.Pattern[str]) -> bool:
    """``name`` is a file of ``pattern``, or atomic_write's temporary for one."""
    temp = _TEMP_OF.fullmatch(name)
    return bool(pattern.fullmatch(name) or (temp and pattern.fullmatch(temp.group(1))))


@dataclass
class _Scan:
    """The root's contents, sorted into what cutefi wrote and what it did not."""

    entries: dict[Path, list[Path]] = field(default_factory=dict)  # entry dir -> its files
    locks: list[Path] = field(default_factory=list)
    own: list[Path] = field(default_factory=list)  # marker and temporaries
    foreign: list[Path] = field(default_factory=list)


class ArtifactStore:
    """A directory of artifacts (the cache when ``writable``, else a read-only pack)."""

    def __init__(self, root: Path | str, writable: bool = True) -> None:
        self.root = Path(root)
        self.writable = writable
        self._checked = False

    # -- paths and safety ---------------------------------------------------------------
    def _entry_dir(self, lookup_key: str) -> Path:
        return self.root / lookup_key

    def _check(self, path: Path) -> None:  # a pack may be root's, never writable by others
        hint = None if self.writable else f"run `chmod -R go-w {self.root}` or rebuild the pack"
        check_safe_dir(path, require_owner=self.writable, hint=hint)

    def _ensure_root(self) -> None:
        if self._checked:
            return
        if self.writable and not self.root.exists():
            self.root.mkdir(mode=0o700, parents=True, exist_ok=True)
            os.chmod(self.root, 0o700)  # mkdir's mode is filtered by the umask
            atomic_write(self.root / MARKER, MARKER_TEXT.encode())  # says whose files these are
        if self.root.exists():
            self._check(self.root)
            self._checked = True

    # -- reading ------------------------------------------------------------------------
    def read(self, lookup_key: str, toolchain_key: str | None = None, *,
             expect: Mapping[str, Any] | None = None) -> Artifact | None:
        """The entry for ``lookup_key`` (exactly ``toolchain_key`` if given, else the newest), or
        None. ``expect``: metadata fields it must carry (lookup: what the key was computed from);
        a mismatch is corruption. Unusable entries are deleted from the cache; a pack with no
        usable one raises CorruptEntryError saying why."""
        self._ensure_root()
        entry_dir = self._entry_dir(lookup_key)
        if not entry_dir.is_dir():
            return None
        self._check(entry_dir)
        problems: list[str] = []
        if toolchain_key is not None:
            candidates = [entry_dir / f"{toolchain_key}.json"]
        else:
            try:
                candidates = sorted((p for p in entry_dir.iterdir() if p.suffix == ".json"
                                     and not p.name.startswith(".")), key=_mtime, reverse=True)
            except OSError as exc:
                candidates = []
                problems.append(f"cannot list {entry_dir}: {exc.strerror}")
        for meta_path in candidates:
            _, artifact, problem = self._load(meta_path, expect)
            if artifact is not None:
                return artifact
            if problem:
                problems.append(f"{meta_path.with_suffix('')}: {problem}")
                self._discard(meta_path)
        if problems and not self.writable:
            raise CorruptEntryError("; ".join(problems))
        return None

    def _load(self, meta_path: Path, expect: Mapping[str, Any] | None
              ) -> tuple[dict[str, Any], Artifact | None, str]:
        """(metadata as far as readable, the artifact if usable, else why not; '' = absent)."""
        try:
            metadata = json.loads(meta_path.read_bytes())
        except FileNotFoundError:
            return {}, None, ""
        except OSError as exc:
            return {}, None, f"cannot read the metadata ({exc.strerror})"
        except ValueError:  # also UnicodeDecodeError
            return {}, None, "metadata is not valid JSON"
        if not isinstance(metadata, dict):
            return {}, None, f"metadata is a JSON {type(metadata).__name__}, not an object"
        entry = metadata.get("entry")
        if not isinstance(entry, str) or not entry:
            return metadata, None, "metadata has no 'entry' (the kernel's name, a non-empty string)"
        for name, value in (expect or {}).items():
            if metadata.get(name) != value:
                return metadata, None, (f"metadata says {name}={metadata.get(name)!r}, the key was "
                                        f"computed for {value!r} (an entry of another kernel)")
        cubin_path, ptx_path = meta_path.with_suffix(".cubin"), meta_path.with_suffix(".ptx")
        try:
            cubin = cubin_path.read_bytes()
        except OSError as exc:
            return metadata, None, f"cannot read the cubin ({exc.strerror})"
        if hashlib.sha256(cubin).hexdigest() != metadata.get("cubin_sha256"):
            return metadata, None, "cubin does not match its checksum (truncated or modified)"
        try:
            ptx = ptx_path.read_bytes().decode() if ptx_path.exists() else None
        except OSError as exc:
            return metadata, None, f"cannot read the PTX ({exc.strerror})"
        except UnicodeDecodeError:
            return metadata, None, "PTX is not UTF-8 text"
        # rewritable files would let others swap code past the checksum (it sits beside them)
        for path in (meta_path, cubin_path) + ((ptx_path,) if ptx is not None else ()):
            check_safe_dir(path, require_owner=False, hint=f"run `chmod go-w {path}`")
        return metadata, Artifact(cubin=cubin, metadata=metadata, ptx=ptx), ""

    def _discard(self, meta_path: Path) -> None:
        if not self.writable:
            return
        for suffix in (".json", ".cubin", ".ptx"):  # metadata first: readers need it
            with contextlib.suppress(FileNotFoundError):
                meta_path.with_suffix(suffix).unlink()

    # -- writing ------------------------------------------------------------------------
    def write(self, lookup_key: str, toolchain_key: str, artifact: Artifact) -> None:
        if not self.writable:
            raise PermissionError(f"{self.root} is a read-only pack")
        self._ensure_root()
        entry_dir = self._entry_dir(lookup_key)
        entry_dir.mkdir(mode=0o700, exist_ok=True)
        metadata = dict(artifact.metadata, cubin_sha256=hashlib.sha256(artifact.cubin).hexdigest())
        base = entry_dir / toolchain_key
        # the metadata goes last: a reader needs it, so a half-written entry is never seen
        atomic_write(base.with_suffix(".cubin"), artifact.cubin)
        if artifact.ptx is not None:
            atomic_write(base.with_suffix(".ptx"), artifact.ptx.encode())
        else:
            with contextlib.suppress(FileNotFoundError):  # a stale one would pair with this cubin
                base.with_suffix(".ptx").unlink()
        atomic_write(base.with_suffix(".json"), json.dumps(metadata, indent=1, sort_keys=True).encode())

    @contextlib.contextmanager
    def lock(self, lookup_key: str, timeout: float | None = None) -> Iterator[None]:
        """Exclusive per-key build lock across processes (flock; dies with its holder)."""
        self._ensure_root()
        if timeout is None:
            from . import settings  # lazy: settings imports this module

            timeout = settings.lock_timeout()  # validated: finite, >= 0 (0: do not wait)
        path = self.root / f"{lookup_key}.lock"
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            deadline = time.monotonic() + timeout
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except OSError as exc:
                    if exc.errno not in (errno.EAGAIN, errno.EACCES):
                        raise
                    if time.monotonic() > deadline:
                        raise TimeoutError(
                            f"waited {timeout:.0f} s for the build lock {path}; another process "
                            f"is building this kernel (raise {LOCK_TIMEOUT_ENV} or remove the file)"
                        ) from None
                    time.sleep(0.05)
            yield
        finally:
            os.close(fd)  # closing releases the flock

    # -- listing and clearing -----------------------------------------------------------
    def _scan(self) -> _Scan:
        scan = _Scan()
        with os.scandir(self.root) as children:
            for child in children:
                path = Path(child.path)
                if child.is_dir(follow_symlinks=False) and _KEY.fullmatch(child.name):
                    files = [Path(f.path) for f in os.scandir(path)]
                    scan.entries[path] = files
                    scan.foreign += [f for f in files if f.is_symlink() or not f.is_file()
                                     or not _is_own(f.name, _ENTRY_FILE)]
                elif child.is_file(follow_symlinks=False) and _is_own(child.name, _LOCK_FILE):
                    scan.locks.append(path)
                elif child.is_file(follow_symlinks=False) and _is_own(child.name, _MARKER_FILE):
                    scan.own.append(path)
                else:
                    scan.foreign.append(path)
        return scan

    def entries(self) -> list[dict[str, Any]]:
        """Metadata of every entry, with ``_path``, ``_bytes`` and ``_problem`` ('' if usable)."""
        try:
            scan = self._scan()
        except OSError:  # absent or unreadable: nothing to list (`cutefi env` must not fail)
            return []
        found = []
        for meta_path in sorted(f for files in scan.entries.values() for f in files
                                if f.suffix == ".json" and _ENTRY_FILE.fullmatch(f.name)):
            try:
                metadata, _, problem = self._load(meta_path, None)
            except UnsafeCacheError as exc:  # listing loads nothing: report, don't refuse
                metadata, problem = {}, str(exc)
            cubin = meta_path.with_suffix(".cubin")
            found.append(dict(metadata, _path=str(cubin), _problem=problem,
                              _bytes=cubin.stat().st_size if cubin.exists() else 0))
        return found

    def size_bytes(self) -> int:
        try:
            scan = self._scan()
        except OSError:
            return 0
        own = [f for files in scan.entries.values() for f in files if f not in scan.foreign]
        return sum(p.stat().st_size for p in own + scan.locks + scan.own if p.exists())

    def clear(self, keep: frozenset[str] | set[str] = frozenset()) -> int:
        """Delete every entry (but those whose lookup key is in ``keep``) and return how many;
        refuse (deleting nothing) if the root holds anything cutefi did not write."""
        if not self.writable:
            raise PermissionError(f"{self.root} is a read-only pack; cutefi does not clear packs")
        if not os.path.lexists(self.root):
            return 0
        if not self.root.is_dir():
            raise ForeignContentError(f"refusing to clear {self.root}: it is not a directory")
        scan = self._scan()
        if scan.foreign:
            shown = ", ".join(str(p.relative_to(self.root)) for p in sorted(scan.foreign)[:3])
            more = f" and {len(scan.foreign) - 3} more" if len(scan.foreign) > 3 else ""
            raise ForeignContentError(
                f"refusing to clear {self.root}: it holds files cutefi did not write ({shown}{more}); "
                f"cutefi clears only <32 hex>/<16 hex>.cubin|.json|.ptx entries and <32 hex>.lock "
                f"files: remove the others or point {CACHE_ENV} at a directory of its own"
            )
        removed = 0
        for entry_dir, files in scan.entries.items():
            if entry_dir.name in keep:
                continue
            for path in sorted(files, key=lambda p: p.suffix != ".json"):  # metadata first
                removed += path.suffix == ".json"
                with contextlib.suppress(FileNotFoundError):
                    path.unlink()
            with contextlib.suppress(OSError):  # a build that just added files keeps its entry
                entry_dir.rmdir()
        for lock in scan.locks:
            if lock.stem not in keep:
                _remove_unheld_lock(lock)
        self._checked = False
        return removed


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:  # discarded meanwhile: sorts last, then reads as absent
        return 0.0


def _remove_unheld_lock(path: Path) -> None:
    """Remove a lock file unless a builder holds it (its waiters would lock another inode)."""
    try:
        fd = os.open(path, os.O_RDWR)
    except FileNotFoundError:
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        path.unlink()
    except OSError:
        pass  # held: the build finishes and its entry stays
    finally:
        os.close(fd)


def atomic_write(path: Path, data: bytes) -> None:
    fd, temp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp)
        raise
