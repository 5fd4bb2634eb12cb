"""The cubin cache: atomic, verified, safe under concurrent cold builds, and permission-checked."""

import json
import multiprocessing
import os
import signal
import subprocess
import sys
import time

import pytest

from cutefi.jit.cache import Artifact, ArtifactStore, UnsafeCacheError
from cutefi.jit.lookup import find_artifact
from cutefi.jit.targets import Target
from cutefi.fill.launch import FILL_SPECS

SPEC = FILL_SPECS[32]  # NVRTC: builds in ~0.1 s on any machine
TARGET = Target(9, 0)


def _race(cache_dir: str, queue) -> None:
    os.environ["CUTEFI_CACHE_DIR"] = cache_dir
    try:
        artifact = find_artifact(SPEC, TARGET)
        queue.put(("ok", artifact.metadata["cubin_sha256"] if "cubin_sha256" in artifact.metadata else len(artifact.cubin)))
    except Exception as exc:  # reported to the parent
        queue.put(("error", repr(exc)))


def test_eight_processes_racing_cold_leave_one_valid_entry(tmp_path):
    cache_dir = str(tmp_path / "cache")
    context = multiprocessing.get_context("spawn")
    queue = context.Queue()
    workers = [context.Process(target=_race, args=(cache_dir, queue)) for _ in range(8)]
    for worker in workers:
        worker.start()
    results = [queue.get(timeout=120) for _ in workers]
    for worker in workers:
        worker.join(timeout=60)
    assert all(status == "ok" for status, _ in results), results
    entries = ArtifactStore(cache_dir).entries()
    assert len(entries) == 1
    assert not list((tmp_path / "cache").rglob("*.tmp"))
    assert ArtifactStore(cache_dir).read(SPEC.lookup_key(TARGET)) is not None


def test_truncated_entry_is_rebuilt_not_loaded(isolated_cache):
    first = find_artifact(SPEC, TARGET)
    (cubin_path,) = list(isolated_cache.rglob("*.cubin"))
    cubin_path.write_bytes(cubin_path.read_bytes()[:100])  # truncate
    store = ArtifactStore(isolated_cache)
    assert store.read(SPEC.lookup_key(TARGET)) is None  # checksum refuses it, entry discarded
    rebuilt = find_artifact(SPEC, TARGET)
    assert rebuilt.cubin == first.cubin
    assert cubin_path.read_bytes() == first.cubin


def test_corrupt_metadata_is_rebuilt(isolated_cache):
    find_artifact(SPEC, TARGET)
    (meta,) = list(isolated_cache.rglob("*.json"))
    meta.write_text("{not json")
    assert find_artifact(SPEC, TARGET).cubin
    assert json.loads(meta.read_text())["entry"] == "cutefi_fill_32"


def test_cache_directory_is_private(isolated_cache):
    find_artifact(SPEC, TARGET)
    assert (os.stat(isolated_cache).st_mode & 0o777) == 0o700


def test_world_writable_directory_is_refused(tmp_path):
    root = tmp_path / "shared"
    root.mkdir()
    os.chmod(root, 0o777)
    with pytest.raises(UnsafeCacheError, match="writable by other users"):
        ArtifactStore(root).read("0" * 32)


def test_world_writable_entry_is_refused(isolated_cache):
    find_artifact(SPEC, TARGET)
    entry_dir = next(p for p in isolated_cache.iterdir() if p.is_dir())
    os.chmod(entry_dir, 0o777)
    with pytest.raises(UnsafeCacheError):
        ArtifactStore(isolated_cache).read(SPEC.lookup_key(TARGET))


def test_stale_lock_of_a_killed_builder_is_recovered(tmp_path):
    store = ArtifactStore(tmp_path / "cache")
    holder = subprocess.Popen([sys.executable, "-c", (
        "import sys, time\n"
        "from cutefi.jit.cache import ArtifactStore\n"
        f"store = ArtifactStore({str(tmp_path / 'cache')!r})\n"
        "with store.lock('k'):\n"
        "    print('locked', flush=True)\n"
        "    time.sleep(60)\n"
    )], stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "locked"
    with pytest.raises(TimeoutError, match="build lock"):
        with store.lock("k", timeout=0.3):
            pass
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    started = time.monotonic()
    with store.lock("k", timeout=10):
        pass
    assert time.monotonic() - started < 5


def test_write_is_atomic_and_read_back(tmp_path):
    store = ArtifactStore(tmp_path / "c")
    store.write("a" * 32, "t" * 16, Artifact(cubin=b"\x7fELF" + b"x" * 60, metadata={"entry": "k"}, ptx="ptx"))
    found = store.read("a" * 32)
    assert found.metadata["entry"] == "k" and found.ptx == "ptx"
    assert store.read("a" * 32, "other") is None


def test_pack_is_read_only(tmp_path):
    pack = ArtifactStore(tmp_path, writable=False)
    with pytest.raises(PermissionError):
        pack.write("a" * 32, "t" * 16, Artifact(cubin=b"", metadata={}))


def test_keys_ignore_runtime_sizes_and_change_with_specialisation():
    assert SPEC.lookup_key(TARGET) == FILL_SPECS[32].lookup_key(TARGET)
    assert SPEC.lookup_key(TARGET) != FILL_SPECS[16].lookup_key(TARGET)
    assert SPEC.lookup_key(TARGET) != SPEC.lookup_key(Target(9, 0, "a"))
