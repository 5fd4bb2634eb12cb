"""Content-addressed artifact store: the disk cache and prebuilt packs share this layout.

``<root>/<lookup_key>/<toolchain_key>.cubin`` holds the cubin and ``.json`` its metadata,
including the cubin's sha256. Files are written to a temporary name and renamed, checksums
are verified on every read (a corrupt entry is deleted and reported as a miss, so it is
rebuilt, never loaded), builders of one key serialise on a ``flock`` (released by the kernel
if a holder dies, so a stale lock never blocks), and a directory that others can write to is
refused: a cubin is code the GPU will run.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import os
import shutil
import stat
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from .._version import __version__

CACHE_ENV = "CUTEFI_CACHE_DIR"
LOCK_TIMEOUT_ENV = "CUTEFI_LOCK_TIMEOUT"


class UnsafeCacheError(RuntimeError):
    """A cache or pack directory is writable by other users; cutefi will not load from it."""


@dataclass(frozen=True)
class Artifact:
    cubin: bytes
    metadata: dict[str, Any]
    ptx: str | None = None


def default_cache_root() -> Path:
    configured = os.environ.get(CACHE_ENV)
    if configured:
        return Path(configured).expanduser()
    return Path.home() / ".cache" / "cutefi" / __version__


def check_safe_dir(path: Path) -> None:
    """Refuse a directory writable by group/others or owned by someone else."""
    info = path.stat()
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise UnsafeCacheError(
            f"{path} is writable by other users (mode {stat.S_IMODE(info.st_mode):o}); cutefi "
            f"does not load cubins from it. Run `chmod go-w {path}` or set {CACHE_ENV}."
        )
    if hasattr(os, "getuid") and info.st_uid != os.getuid():
        raise UnsafeCacheError(f"{path} belongs to another user; cutefi does not load cubins from it")


class ArtifactStore:
    """A directory of artifacts (the cache when ``writable``, else a read-only pack)."""

    def __init__(self, root: Path | str, writable: bool = True) -> None:
        self.root = Path(root)
        self.writable = writable
        self._checked = False

    # -- paths --------------------------------------------------------------------------
    def _entry_dir(self, lookup_key: str) -> Path:
        return self.root / lookup_key

    def _ensure_root(self) -> None:
        if self._checked:
            return
        if self.writable and not self.root.exists():
            self.root.mkdir(mode=0o700, parents=True, exist_ok=True)
            os.chmod(self.root, 0o700)  # mkdir's mode is filtered by the umask
        if self.root.exists():
            check_safe_dir(self.root)
            self._checked = True

    # -- reading ------------------------------------------------------------------------
    def read(self, lookup_key: str, toolchain_key: str | None = None) -> Artifact | None:
        """The entry for ``lookup_key`` (exactly ``toolchain_key`` if given, else any)."""
        self._ensure_root()
        entry_dir = self._entry_dir(lookup_key)
        if not entry_dir.is_dir():
            return None
        check_safe_dir(entry_dir)
        if toolchain_key is not None:
            candidates = [entry_dir / f"{toolchain_key}.json"]
        else:
            candidates = sorted(entry_dir.glob("*.json"), key=lambda p: p.stat().st_mtime, reverse=True)
        for meta_path in candidates:
            artifact = self._read_entry(meta_path)
            if artifact is not None:
                return artifact
        return None

    def _read_entry(self, meta_path: Path) -> Artifact | None:
        cubin_path = meta_path.with_suffix(".cubin")
        try:
            metadata = json.loads(meta_path.read_text())
            cubin = cubin_path.read_bytes()
        except FileNotFoundError:
            return None
        except (OSError, ValueError):
            self._discard(meta_path)
            return None
        if hashlib.sha256(cubin).hexdigest() != metadata.get("cubin_sha256"):
            self._discard(meta_path)  # truncated or tampered: rebuild, never load
            return None
        ptx_path = meta_path.with_suffix(".ptx")
        ptx = ptx_path.read_text() if ptx_path.exists() else None
        return Artifact(cubin=cubin, metadata=metadata, ptx=ptx)

    def _discard(self, meta_path: Path) -> None:
        if not self.writable:
            return
        for suffix in (".json", ".cubin", ".ptx"):
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
        atomic_write(base.with_suffix(".json"), json.dumps(metadata, indent=1, sort_keys=True).encode())

    @contextlib.contextmanager
    def lock(self, lookup_key: str, timeout: float | None = None) -> Iterator[None]:
        """Exclusive per-key build lock across processes (flock; dies with its holder)."""
        self._ensure_root()
        if timeout is None:
            timeout = float(os.environ.get(LOCK_TIMEOUT_ENV, "600"))
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

    # -- listing ------------------------------------------------------------------------
    def entries(self) -> list[dict[str, Any]]:
        if not self.root.is_dir():
            return []
        found = []
        for meta_path in sorted(self.root.glob("*/*.json")):
            try:
                metadata = json.loads(meta_path.read_text())
            except (OSError, ValueError):
                continue
            cubin = meta_path.with_suffix(".cubin")
            metadata["_path"] = str(cubin)
            metadata["_bytes"] = cubin.stat().st_size if cubin.exists() else 0
            found.append(metadata)
        return found

    def size_bytes(self) -> int:
        if not self.root.is_dir():
            return 0
        return sum(p.stat().st_size for p in self.root.rglob("*") if p.is_file())

    def clear(self) -> int:
        removed = len(self.entries())
        if self.root.is_dir():
            shutil.rmtree(self.root)
        self._checked = False
        return removed


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
