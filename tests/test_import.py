"""`import cutefi` and a cached lookup never import the CuTe DSL compiler."""

import subprocess
import sys


def _run(code: str, env_extra: dict | None = None) -> str:
    import os

    env = dict(os.environ, **(env_extra or {}))
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env).stdout


def test_import_does_not_import_cutlass():
    out = _run("import sys, cutefi; print(any(m == 'cutlass' or m.startswith('cutlass.') for m in sys.modules))")
    assert out.strip() == "False"


def test_import_does_not_import_torch_or_the_driver():
    out = _run("import sys, cutefi; print('torch' in sys.modules, 'cuda.bindings.driver' in sys.modules)")
    assert out.strip() == "False False"


def test_cached_lookup_does_not_import_cutlass(tmp_path):
    code = (
        "import sys\n"
        "from cutefi.jit.lookup import find_artifact\n"
        "from cutefi.jit.targets import Target\n"
        "from cutefi.copy.launch import COPY_SPEC\n"
        "find_artifact(COPY_SPEC, Target(9, 0))\n"
        "print('cutlass' in sys.modules)\n"
    )
    env = {"CUTEFI_CACHE_DIR": str(tmp_path)}
    from cutefi.jit.toolchain import dsl_version

    if dsl_version() is None:
        import pytest

        pytest.skip("needs CuTe DSL to fill the cache first")
    assert _run(code, env).strip() == "True"   # cold: this process had to build
    assert _run(code, env).strip() == "False"  # warm: loaded from the cache only


def test_public_names_resolve_lazily():
    out = _run("import sys, cutefi; f = cutefi.copy_; print(callable(f), 'cutlass' in sys.modules)")
    assert out.strip() == "True False"
