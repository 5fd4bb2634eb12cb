"""The `cutefi` and `cutefi-bench` commands on a machine without a GPU."""

import json
import subprocess
import sys

import pytest

from conftest import HAS_GPU, requires_dsl


def cutefi(*args, env=None):
    import os

    return subprocess.run([sys.executable, "-m", "cutefi.cli", *args], capture_output=True, text=True,
                          env=dict(os.environ, **(env or {})))


@pytest.mark.skipif(HAS_GPU, reason="checks the no-GPU report")
def test_env_without_gpu_says_so(tmp_path):
    result = cutefi("env", env={"CUTEFI_CACHE_DIR": str(tmp_path), "CUTEFI_CUDA_ARCH_LIST": "8.0 9.0a 12.1a"})
    assert result.returncode == 0, result.stderr
    assert "GPU: none" in result.stdout
    assert "toolchain: NVRTC" in result.stdout
    assert "wgmma        build sm_90a" in result.stdout
    assert "mma_sync_fp8 build sm_90 sm_121a" in result.stdout
    assert "sm_80 dropped: the wgmma family" in result.stdout
    assert f"cache: {tmp_path}" in result.stdout


@pytest.mark.skipif(HAS_GPU, reason="checks the no-GPU report")
def test_env_without_gpu_or_arch_list_explains(tmp_path):
    result = cutefi("env", env={"CUTEFI_CACHE_DIR": str(tmp_path), "CUTEFI_CUDA_ARCH_LIST": ""})
    assert result.returncode == 0
    assert "CUTEFI_CUDA_ARCH_LIST" in result.stdout


def test_cache_path_ls_clear(tmp_path):
    env = {"CUTEFI_CACHE_DIR": str(tmp_path / "c")}
    assert cutefi("cache", "path", env=env).stdout.strip() == str(tmp_path / "c")
    from cutefi.jit.cache import ArtifactStore, Artifact

    ArtifactStore(tmp_path / "c").write("a" * 32, "b" * 16, Artifact(b"\x7fELF", {"spec": "x()", "target": "sm_90"}))
    assert "x()" in cutefi("cache", "ls", env=env).stdout
    assert "removed 1" in cutefi("cache", "clear", env=env).stdout
    assert cutefi("cache", "ls", env=env).stdout.strip() == ""


def test_unknown_subcommand_and_bad_arch_fail_cleanly(tmp_path):
    result = cutefi("frobnicate")
    assert result.returncode == 2 and "invalid choice" in result.stderr
    result = cutefi("aot", "--arch", "ampere", "--out", str(tmp_path / "p"))
    assert result.returncode == 2
    assert "accepted forms" in result.stderr and "Traceback" not in result.stderr


@requires_dsl
def test_aot_builds_a_pack_and_lookup_uses_it(tmp_path, monkeypatch):
    pack = tmp_path / "pack"
    result = cutefi("aot", "--arch", "8.0 9.0a 12.0a", "--out", str(pack), "--jobs", "2", "--only", "copy", "fill")
    assert result.returncode == 0, result.stderr
    assert "0 failed" in result.stdout
    metas = [json.loads(p.read_text()) for p in pack.rglob("*.json")]
    targets = {(m["name"], m["target"]) for m in metas}
    assert ("copy.vector_copy", "sm_120a") in targets
    assert ("copy.tma_copy", "sm_90") in targets and ("copy.tma_copy", "sm_80") not in targets
    assert "sm_80 dropped: the tma family" in result.stdout

    from cutefi.copy.launch import COPY_SPEC
    from cutefi.jit import lookup
    from cutefi.jit.targets import Target

    monkeypatch.setenv("CUTEFI_PACK_PATH", str(pack))
    monkeypatch.setenv("CUTEFI_CACHE_DIR", str(tmp_path / "empty-cache"))
    lookup.cache_store.cache_clear()
    monkeypatch.setattr(lookup, "can_build", lambda kind: False)  # a GPU box without CuTe DSL
    artifact = lookup.find_artifact(COPY_SPEC, Target(12, 0, "a"))
    assert artifact.metadata["target"] == "sm_120a"
    lookup.cache_store.cache_clear()

    # a rebuild with --prune leaves exactly what it built (earlier kernels, targets and specs go)
    result = cutefi("aot", "--arch", "8.0", "--out", str(pack), "--jobs", "2", "--only", "copy.vector", "--prune")
    assert result.returncode == 0, result.stderr
    metas = [json.loads(p.read_text()) for p in pack.rglob("*.json")]
    assert {(m["name"], m["target"]) for m in metas} == {("copy.vector_copy", "sm_80")}
    assert "pruned" in result.stdout and not list(pack.glob("*/*.cubin"))[1:]
