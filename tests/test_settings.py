"""Settings: every environment variable and `cutefi aot` option validated in one place, with
one-line errors that name it; the CLI refuses bad settings before building anything."""

import fcntl
import os
import subprocess
import sys
import time

import pytest

from cutefi.fill.launch import FILL_SPECS
from cutefi.jit import lookup
from cutefi.jit.cache import ArtifactStore
from cutefi.jit.policy import TargetPolicy, Toolchain
from cutefi.jit.targets import Target

SPEC = FILL_SPECS[32]  # NVRTC: builds in ~0.1 s on any machine
TARGET = Target(9, 0)
CUDA_13_0 = Toolchain("NVRTC", "13.0", (13, 0))
AS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0


def cutefi(*args, env=None):
    return subprocess.run([sys.executable, "-m", "cutefi.cli", *args], capture_output=True, text=True,
                          env=dict(os.environ, **(env or {})))


def one_line(text: str) -> str:
    lines = text.strip().splitlines()
    assert len(lines) == 1, text
    return lines[0]


@pytest.fixture
def fresh_cache(tmp_path, monkeypatch):
    """The cache store re-read from this test's environment, before and after."""
    monkeypatch.setenv("CUTEFI_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("CUTEFI_PACK_PATH", raising=False)
    monkeypatch.delenv("CUTEFI_LOCK_TIMEOUT", raising=False)
    lookup.cache_store.cache_clear()
    yield tmp_path / "cache"
    lookup.cache_store.cache_clear()


# -- 1. CUTEFI_CUDA_ARCH_LIST -----------------------------------------------------------------
@pytest.mark.parametrize("value", ["foo", "7.0", "sm_999", "99.9", "8.0 7.5"])
def test_bad_arch_list_is_refused_naming_the_variable(monkeypatch, value):
    monkeypatch.setenv("CUTEFI_CUDA_ARCH_LIST", value)
    with pytest.raises(ValueError, match=r"^CUTEFI_CUDA_ARCH_LIST=.*(accepted forms|known targets)") as info:
        TargetPolicy.from_environment(CUDA_13_0, device_ccs=[(9, 0)])
    assert "\n" not in str(info.value)


def test_arch_list_is_reread_when_the_variable_changes(monkeypatch):
    from cutefi.jit import settings

    monkeypatch.setenv("CUTEFI_CUDA_ARCH_LIST", "8.0,9.0a")
    assert settings.arch_list() == [Target(8, 0), Target(9, 0, "a")]
    monkeypatch.setenv("CUTEFI_CUDA_ARCH_LIST", "12.1a")
    assert settings.arch_list() == [Target(12, 1, "a")]
    monkeypatch.setenv("CUTEFI_CUDA_ARCH_LIST", "")  # empty counts as unset
    assert settings.arch_list() is None


@pytest.mark.parametrize("value", ["foo", "7.0", "sm_999"])
def test_env_reports_a_bad_arch_list_and_fails(tmp_path, value):
    result = cutefi("env", env={"CUTEFI_CACHE_DIR": str(tmp_path), "CUTEFI_CUDA_ARCH_LIST": value})
    assert result.returncode == 2
    assert "CUTEFI_CUDA_ARCH_LIST=" in result.stderr and "Traceback" not in result.stderr
    assert f"cache: {tmp_path}" in result.stdout  # the rest is still reported


def test_aot_with_a_bad_arch_list_builds_nothing_and_fails(tmp_path):
    out = tmp_path / "pack"
    result = cutefi("aot", "--out", str(out), "--only", "fill", env={"CUTEFI_CUDA_ARCH_LIST": "sm_999"})
    assert result.returncode == 2, result.stdout
    assert one_line(result.stderr).startswith("cutefi aot: CUTEFI_CUDA_ARCH_LIST='sm_999'")
    assert not out.exists()


def test_aot_that_builds_nothing_fails(tmp_path, monkeypatch, capsys):
    from cutefi import cli
    from cutefi.jit import aot

    # every target dropped by the policy (here: a toolchain that builds none of them)
    monkeypatch.setattr(aot, "plan", lambda *args, **kwargs: ([], aot.AotReport()))
    code = cli.main(["aot", "--arch", "8.0", "--out", str(tmp_path / "pack"), "--only", "fill"])
    assert code == 2
    assert "nothing to build" in capsys.readouterr().err
    assert not (tmp_path / "pack").exists()


# -- 2. CUTEFI_LOCK_TIMEOUT -------------------------------------------------------------------
@pytest.mark.parametrize("value", ["abc", "-1", "nan", "inf", "1e999"])
def test_bad_lock_timeout_is_refused(tmp_path, monkeypatch, value):
    monkeypatch.setenv("CUTEFI_LOCK_TIMEOUT", value)
    with pytest.raises(ValueError, match=r"^CUTEFI_LOCK_TIMEOUT=.*finite number of seconds >= 0"):
        with ArtifactStore(tmp_path / "cache").lock("k" * 32):
            pass


def test_bad_lock_timeout_fails_on_a_warm_cache_too(fresh_cache, monkeypatch):
    lookup.find_artifact(SPEC, TARGET)  # warm: the next lookup needs no lock
    lookup.cache_store.cache_clear()  # a new process
    monkeypatch.setenv("CUTEFI_LOCK_TIMEOUT", "abc")
    with pytest.raises(ValueError, match="^CUTEFI_LOCK_TIMEOUT='abc'"):
        lookup.find_artifact(SPEC, TARGET)


def test_lock_timeout_values(monkeypatch):
    from cutefi.jit import settings

    for value, expected in [(None, 600.0), ("", 600.0), (" 30 ", 30.0), ("0.5", 0.5), ("0", 0.0)]:
        if value is None:
            monkeypatch.delenv("CUTEFI_LOCK_TIMEOUT", raising=False)
        else:
            monkeypatch.setenv("CUTEFI_LOCK_TIMEOUT", value)
        assert settings.lock_timeout() == expected


def test_zero_lock_timeout_does_not_wait(tmp_path, monkeypatch):
    store = ArtifactStore(tmp_path / "cache")
    (tmp_path / "cache").mkdir(mode=0o700)
    holder = os.open(tmp_path / "cache" / ("k" * 32 + ".lock"), os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(holder, fcntl.LOCK_EX)  # another "process" is building this key
    try:
        monkeypatch.setenv("CUTEFI_LOCK_TIMEOUT", "0")
        start = time.monotonic()
        with pytest.raises(TimeoutError, match="CUTEFI_LOCK_TIMEOUT"):
            with store.lock("k" * 32):
                pass
        assert time.monotonic() - start < 1
    finally:
        os.close(holder)


# -- 3. CUTEFI_CACHE_DIR ----------------------------------------------------------------------
def test_cache_dir_that_is_a_file_is_refused_naming_it(fresh_cache, monkeypatch):
    fresh_cache.write_text("not a directory")
    with pytest.raises(ValueError, match=f"^CUTEFI_CACHE_DIR='{fresh_cache}': {fresh_cache} is not a directory"):
        lookup.find_artifact(SPEC, TARGET)


def test_cache_dir_under_a_file_is_refused(fresh_cache, monkeypatch):
    fresh_cache.write_text("not a directory")
    monkeypatch.setenv("CUTEFI_CACHE_DIR", str(fresh_cache / "sub"))
    with pytest.raises(ValueError, match=f"^CUTEFI_CACHE_DIR=.*cannot be created: {fresh_cache} is not a directory"):
        lookup.find_artifact(SPEC, TARGET)


@pytest.mark.skipif(AS_ROOT, reason="root can write anywhere")
def test_unwritable_cache_dir_is_refused(fresh_cache, monkeypatch, tmp_path):
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    monkeypatch.setenv("CUTEFI_CACHE_DIR", str(locked / "cache"))
    try:
        with pytest.raises(ValueError, match=f"^CUTEFI_CACHE_DIR=.*{locked} is not writable"):
            lookup.find_artifact(SPEC, TARGET)
    finally:
        locked.chmod(0o700)


def test_packs_are_read_when_the_cache_dir_is_bad(fresh_cache, monkeypatch, tmp_path):
    """A GPU box with a pack and a read-only home must run."""
    built = lookup.find_artifact(SPEC, TARGET)
    fresh_cache.rename(tmp_path / "pack")  # the cache, moved, is a valid pack
    lookup.cache_store.cache_clear()
    fresh_cache.write_text("not a directory")
    monkeypatch.setenv("CUTEFI_PACK_PATH", str(tmp_path / "pack"))
    assert lookup.find_artifact(SPEC, TARGET).cubin == built.cubin


def test_env_flags_a_bad_cache_dir(tmp_path):
    bad = tmp_path / "file"
    bad.write_text("")
    result = cutefi("env", env={"CUTEFI_CACHE_DIR": str(bad), "CUTEFI_CUDA_ARCH_LIST": "9.0"})
    assert result.returncode == 2
    assert f"CUTEFI_CACHE_DIR='{bad}': {bad} is not a directory" in result.stderr
    assert "Traceback" not in result.stderr


def test_env_flags_a_cache_dir_others_can_write(tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    result = cutefi("env", env={"CUTEFI_CACHE_DIR": str(shared), "CUTEFI_CUDA_ARCH_LIST": "9.0"})
    assert result.returncode == 2
    assert "CUTEFI_CACHE_DIR=" in result.stderr and "writable by other users" in result.stderr


def test_after_a_failure_the_next_call_works(fresh_cache, monkeypatch):
    monkeypatch.setenv("CUTEFI_LOCK_TIMEOUT", "abc")
    with pytest.raises(ValueError, match="CUTEFI_LOCK_TIMEOUT"):
        lookup.find_artifact(SPEC, TARGET)
    assert not fresh_cache.exists()  # refused before anything was written
    monkeypatch.delenv("CUTEFI_LOCK_TIMEOUT")
    artifact = lookup.find_artifact(SPEC, TARGET)
    assert artifact.cubin and len(ArtifactStore(fresh_cache).entries()) == 1
    assert not list(fresh_cache.rglob("*.tmp"))


# -- 4. cutefi aot's options --------------------------------------------------------------------
def _aot_refused(result, option: str) -> str:
    assert result.returncode == 2, (result.stdout, result.stderr)
    line = one_line(result.stderr)
    assert line.startswith(f"cutefi aot: {option}"), line
    assert "built " not in result.stdout  # refused before building anything
    return line


def test_aot_out_is_a_file(tmp_path):
    out = tmp_path / "file"
    out.write_text("")
    line = _aot_refused(cutefi("aot", "--arch", "9.0", "--out", str(out), "--only", "fill"), "--out")
    assert "is not a directory" in line


def test_aot_out_writable_by_others(tmp_path):
    out = tmp_path / "shared"
    out.mkdir()
    out.chmod(0o777)
    line = _aot_refused(cutefi("aot", "--arch", "9.0", "--out", str(out), "--only", "fill"), "--out")
    assert "writable by other users" in line and "CUTEFI_CACHE_DIR" not in line
    assert not list(out.iterdir())


@pytest.mark.parametrize("jobs", ["-1", "0", "two"])
def test_aot_jobs_must_be_a_positive_integer(tmp_path, jobs):
    out = tmp_path / "pack"
    line = _aot_refused(cutefi("aot", "--arch", "9.0", "--out", str(out), "--only", "fill", "--jobs", jobs),
                        "--jobs")
    assert "integer >= 1" in line
    assert not out.exists()


@pytest.mark.parametrize("arch", ["7.0", "sm_999"])
def test_aot_arch_no_toolchain_builds_is_refused(tmp_path, arch):
    out = tmp_path / "pack"
    line = _aot_refused(cutefi("aot", "--arch", arch, "--out", str(out), "--only", "fill"), "--arch")
    assert "known targets" in line
    assert not out.exists()


# -- 5. CUTEFI_PACK_PATH ------------------------------------------------------------------------
def test_missing_pack_path_entry_warns_and_is_skipped(tmp_path, monkeypatch):
    from cutefi.jit import settings

    pack = tmp_path / "pack"
    pack.mkdir()
    missing = tmp_path / "missing"
    monkeypatch.setenv("CUTEFI_PACK_PATH", os.pathsep.join([str(missing), "", str(pack)]))
    with pytest.warns(settings.SettingsWarning, match=f"CUTEFI_PACK_PATH: {missing} is not a directory"):
        assert settings.pack_paths() == [pack]


def test_env_warns_about_a_missing_pack(tmp_path):
    missing = tmp_path / "missing"
    result = cutefi("env", env={"CUTEFI_CACHE_DIR": str(tmp_path / "c"), "CUTEFI_CUDA_ARCH_LIST": "9.0",
                                "CUTEFI_PACK_PATH": str(missing)})
    assert result.returncode == 0, result.stderr  # packs are optional: a warning, not an error
    assert f"CUTEFI_PACK_PATH: {missing} is not a directory" in result.stderr


def test_settings_errors_are_value_errors():
    from cutefi.jit import settings

    assert issubclass(settings.SettingsError, ValueError)


def test_an_out_dir_of_another_user_is_refused_without_naming_the_cache_variable(tmp_path, monkeypatch):
    """``cutefi aot --out`` is not the cache: its ownership error must not point at CUTEFI_CACHE_DIR."""
    from cutefi.jit import settings

    out = tmp_path / "pack"
    out.mkdir(mode=0o755)
    monkeypatch.setattr("os.getuid", lambda: os.stat(out).st_uid + 1)
    problem = settings.dir_problem(out)
    assert problem is not None and "belongs to another user" in problem and "use a directory you own" in problem
    assert "CUTEFI_CACHE_DIR" not in problem
