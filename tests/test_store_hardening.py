"""The store's hardening: ``clear`` deletes only cutefi's files, an entry is loaded only if it
is the kernel its key names, malformed entries are rebuilt (and listed as corrupt), packs are
refused for writers (not owners), a skipped pack warns, and the next call after any of these
works. All CPU: the NVRTC fill kernels build in ~0.1 s."""

from __future__ import annotations

import json
import os
import warnings
from pathlib import Path
from typing import Callable

import pytest

from cutefi import cli
from cutefi.fill.launch import FILL_SPECS
from cutefi.jit import compile as jit_compile
from cutefi.jit import lookup
from cutefi.jit.cache import Artifact, ArtifactStore, UnsafeCacheError
from cutefi.jit.spec import toolchain_key
from cutefi.jit.targets import Target

SPEC = FILL_SPECS[32]
TARGET = Target(9, 0)
KEY = SPEC.lookup_key(TARGET)
TOOLCHAIN = toolchain_key("nvrtc")
EXPECT = {"spec": SPEC.describe(), "target": TARGET.sm}


@pytest.fixture(scope="module")
def built() -> Artifact:
    return jit_compile.build(SPEC, TARGET)


@pytest.fixture
def use_packs(monkeypatch: pytest.MonkeyPatch) -> Callable[..., None]:
    def use(*roots: Path) -> None:
        monkeypatch.setenv(lookup.PACK_PATH_ENV, os.pathsep.join(map(str, roots)))
    return use


@pytest.fixture
def cache_at(monkeypatch: pytest.MonkeyPatch):
    """Point CUTEFI_CACHE_DIR (and the memoised cache store) at a given directory."""
    def point(root: Path) -> None:
        monkeypatch.setenv("CUTEFI_CACHE_DIR", str(root))
        lookup.cache_store.cache_clear()
    yield point
    lookup.cache_store.cache_clear()


def make_pack(root: Path, artifact: Artifact) -> Path:
    ArtifactStore(root).write(KEY, TOOLCHAIN, artifact)  # what `cutefi aot` does
    return root


def tree(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


# -- 1. clear deletes only what cutefi wrote --------------------------------------------------
def test_clear_refuses_a_root_holding_other_files_and_deletes_nothing(tmp_path, cache_at, capsys, built):
    root = tmp_path / "myproject"  # CUTEFI_CACHE_DIR=$HOME/myproject
    root.mkdir()
    (root / "notes.txt").write_text("mine")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "keep").write_text("x")
    (root / ("e" * 32)).symlink_to(elsewhere)  # named like an entry, but a link out
    ArtifactStore(root).write(KEY, TOOLCHAIN, built)
    cache_at(root)
    before = tree(root)
    assert cli.main(["cache", "clear"]) != 0
    err = capsys.readouterr().err
    assert str(root) in err and "notes.txt" in err and "CUTEFI_CACHE_DIR" in err and err.count("\n") == 1
    assert tree(root) == before and (elsewhere / "keep").exists()

    (root / "notes.txt").unlink()
    (root / ("e" * 32)).unlink()
    (root / KEY / "README").write_text("not a cutefi file")  # inside an entry directory
    with pytest.raises(RuntimeError, match="refusing to clear .*README"):
        ArtifactStore(root).clear()
    assert (root / KEY / f"{TOOLCHAIN}.cubin").exists()


def test_clear_removes_its_entries_locks_and_temporaries_old_caches_too(isolated_cache):
    lookup.find_artifact(SPEC, TARGET)  # creates the cache, an entry and its lock
    assert (isolated_cache / "CUTEFI_CACHE").is_file()  # says what the directory is
    (isolated_cache / KEY / f".{TOOLCHAIN}.cubin.k3_x9abc.tmp").write_bytes(b"half")  # killed writer
    assert (isolated_cache / f"{KEY}.lock").exists()
    store = lookup.cache_store()
    assert store.clear() == 1
    assert tree(isolated_cache) == ["CUTEFI_CACHE"]

    lookup.find_artifact(SPEC, TARGET)
    (isolated_cache / "CUTEFI_CACHE").unlink()  # a cache written before the marker existed
    assert store.clear() == 1 and tree(isolated_cache) == []
    assert lookup.find_artifact(SPEC, TARGET).metadata["spec"] == SPEC.describe()


# -- 2. an entry must be the kernel its key names ----------------------------------------------
@pytest.mark.parametrize("other", ["spec", "target"])
def test_an_entry_of_another_kernel_is_rebuilt_not_loaded(isolated_cache, other):
    wrong = jit_compile.build(FILL_SPECS[16], TARGET) if other == "spec" else jit_compile.build(SPEC, Target(8, 0))
    ArtifactStore(isolated_cache).write(KEY, TOOLCHAIN, wrong)  # valid checksum, wrong kernel
    found = lookup.find_artifact(SPEC, TARGET)
    assert (found.metadata["spec"], found.metadata["target"]) == (SPEC.describe(), "sm_90")
    assert found.metadata["entry"] == "cutefi_fill_32"


def test_read_checks_the_expected_metadata(tmp_path, built):
    cache = ArtifactStore(tmp_path / "cache")
    cache.write(KEY, TOOLCHAIN, built)
    assert cache.read(KEY, TOOLCHAIN, expect=EXPECT) is not None
    assert cache.read(KEY, TOOLCHAIN, expect=dict(EXPECT, target="sm_80")) is None
    assert cache.read(KEY, TOOLCHAIN) is None  # discarded: rebuilt on the next lookup

    pack = ArtifactStore(make_pack(tmp_path / "pack", built), writable=False)
    with pytest.raises(RuntimeError, match="spec=.*another kernel"):
        pack.read(KEY, expect=dict(EXPECT, spec="fill.fill(bits=16)"))
    assert pack.read(KEY, expect=EXPECT) is not None  # a pack is never modified


# -- 3. malformed entries are corrupt, not crashes ---------------------------------------------
def damage(entry_dir: Path, how: str) -> None:
    meta = entry_dir / f"{TOOLCHAIN}.json"
    if how == "metadata not an object":
        meta.write_text("[1, 2]")
    elif how == "no entry":
        metadata = json.loads(meta.read_text())
        del metadata["entry"]
        meta.write_text(json.dumps(metadata))
    elif how == "ptx not utf-8":
        (entry_dir / f"{TOOLCHAIN}.ptx").write_bytes(b"\xff\xfe .entry")


DAMAGES = ["metadata not an object", "no entry", "ptx not utf-8"]


@pytest.mark.parametrize("how", DAMAGES)
def test_a_malformed_entry_is_listed_as_corrupt_and_rebuilt(isolated_cache, capsys, how):
    first = lookup.find_artifact(SPEC, TARGET)
    damage(isolated_cache / KEY, how)
    (listed,) = ArtifactStore(isolated_cache).entries()
    assert listed["_problem"]
    assert cli.main(["cache", "ls"]) == 0
    assert "corrupt" in capsys.readouterr().out.lower()
    found = lookup.find_artifact(SPEC, TARGET)
    assert (found.cubin, found.ptx, found.metadata["entry"]) == (first.cubin, first.ptx, "cutefi_fill_32")


# -- 4. packs: refused for writers, not for owners ---------------------------------------------
def test_a_pack_of_another_user_is_used_but_a_cache_of_another_user_is_not(
        tmp_path, isolated_cache, use_packs, monkeypatch, built):
    pack = make_pack(tmp_path / "pack", built)
    for path in (pack, pack / KEY):
        os.chmod(path, 0o755)  # as installed by root
    for path in (pack / KEY).iterdir():
        os.chmod(path, 0o644)
    use_packs(pack)
    uid = os.getuid()
    monkeypatch.setattr(os, "getuid", lambda: uid + 1)  # we are now someone else
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        found = lookup.find_artifact(SPEC, TARGET)
    assert found.cubin == built.cubin
    assert not isolated_cache.exists()  # served by the pack
    with pytest.raises(UnsafeCacheError, match="belongs to another user"):
        ArtifactStore(pack).read(KEY)  # the same directory as one's cache: the owner check stays


# -- 5. a skipped pack warns once and the lookup goes on ---------------------------------------
BAD_PACKS = {
    "root writable by others": "writable by other users",
    "cubin writable by others": "writable by other users",
    "truncated cubin": "checksum",
    "another kernel": "another kernel",
}


@pytest.mark.parametrize("problem", BAD_PACKS)
def test_a_bad_pack_is_skipped_with_one_warning(tmp_path, isolated_cache, use_packs, built, problem):
    content = jit_compile.build(FILL_SPECS[16], TARGET) if problem == "another kernel" else built
    bad = make_pack(tmp_path / "bad", content)
    cubin = bad / KEY / f"{TOOLCHAIN}.cubin"
    if problem == "root writable by others":
        os.chmod(bad, 0o775)
    elif problem == "cubin writable by others":
        os.chmod(cubin, 0o666)
    elif problem == "truncated cubin":
        cubin.write_bytes(cubin.read_bytes()[:100])
    use_packs(bad, make_pack(tmp_path / "good", built))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        first = lookup.find_artifact(SPEC, TARGET)
        second = lookup.find_artifact(SPEC, TARGET)
    assert first.cubin == second.cubin == built.cubin
    about_bad = [str(w.message) for w in caught if f"{bad}:" in str(w.message) or f"{bad} " in str(w.message)]
    assert len(about_bad) == 1, [str(w.message) for w in caught]
    assert BAD_PACKS[problem] in about_bad[0]
    assert not isolated_cache.exists()  # the good pack served it


def test_no_usable_pack_and_no_builder_names_the_pack_path(tmp_path, isolated_cache, use_packs, monkeypatch, built):
    bad = make_pack(tmp_path / "bad", built)
    os.chmod(bad, 0o777)
    use_packs(bad)
    monkeypatch.setattr(lookup, "can_build", lambda kind: False)  # a GPU box without CuTe DSL
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(lookup.KernelNotAvailableError) as info:
            lookup.find_artifact(SPEC, TARGET)
    message = str(info.value)
    assert str(bad) in message and "CUTEFI_PACK_PATH" in message and "CUTEFI_CACHE_DIR" not in message
    assert "\n" not in message
    assert any(str(bad) in str(w.message) for w in caught)


# -- 6. after a failure, the next normal call works --------------------------------------------
def test_after_a_corrupt_entry_the_next_call_leaves_a_valid_entry_that_hits(isolated_cache, monkeypatch):
    lookup.find_artifact(SPEC, TARGET)
    damage(isolated_cache / KEY, "metadata not an object")
    rebuilt = lookup.find_artifact(SPEC, TARGET)

    def no_build(*_args: object) -> Artifact:
        raise AssertionError("the second lookup must hit the cache")

    monkeypatch.setattr(jit_compile, "build", no_build)
    assert lookup.find_artifact(SPEC, TARGET).cubin == rebuilt.cubin
    store = ArtifactStore(isolated_cache)
    assert store.read(KEY, TOOLCHAIN, expect=EXPECT) is not None
    assert [e["_problem"] for e in store.entries()] == [""]
    assert not list(isolated_cache.rglob("*.tmp"))
