"""The source fingerprint in a kernel's cache key covers the builder's import closure (CPU only).

Nothing is compiled. Module names come from the registry and the closures themselves; the
names below are the only ones to retarget when families or helpers move or are renamed.
"""

import ast
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cutefi.jit.closure import SourceTree, clear_caches, cutefi_tree, import_closure, substituted_sources
from cutefi.jit.registry import all_specs
from cutefi.jit.targets import Target

TARGET = Target.parse("sm_90a")
# A family whose kernel uses a shared helper, and one whose kernel does not (by spec name prefix).
USER_FAMILY, OTHER_FAMILY = "norm", "rope"
SHARED_HELPER_LEAF = "reduce"  # last name of that helper (cutefi.cute.reduce today)


def _module(path: str) -> str:
    return path.partition(":")[0]


def _family_spec(family: str):
    return next(spec for spec in all_specs() if spec.name.split(".")[0] == family)


def _shared_helper() -> str:
    """The shared helper (by its last name) outside the user family's package that only its kernel reaches."""
    user, other = _family_spec(USER_FAMILY), _family_spec(OTHER_FAMILY)
    package = _module(user.builder).rpartition(".")[0]
    only_user = set(import_closure(_module(user.builder))) - set(import_closure(_module(other.builder)))
    tree = cutefi_tree()
    (helper,) = {m for m in only_user if not m.startswith(package + ".") and not tree.is_package(m)
                 and m.rpartition(".")[2] == SHARED_HELPER_LEAF}
    return helper


@pytest.fixture(autouse=True)
def _cold_caches():
    clear_caches()
    yield
    clear_caches()


def test_closure_of_each_family_kernel():
    user, other = _family_spec(USER_FAMILY), _family_spec(OTHER_FAMILY)
    user_closure = import_closure(_module(user.builder))
    other_closure = import_closure(_module(other.builder))
    helper = _shared_helper()
    assert {helper, _module(user.contract), _module(user.builder)} <= set(user_closure)
    assert "cutefi" in user_closure and helper.rpartition(".")[0] in user_closure  # parent __init__s
    assert not any(m.startswith(f"cutefi.{OTHER_FAMILY}") for m in user_closure)
    assert helper not in other_closure and _module(other.contract) in other_closure
    assert list(user_closure) == sorted(user_closure)


def _keys() -> dict:
    return {spec: spec.lookup_key(TARGET) for spec in all_specs()}


def _changed_by(module: str, edit: bytes = b"\n# edited\n") -> set:
    before = _keys()
    with substituted_sources({module: cutefi_tree().source(module) + edit}):
        during = _keys()
    assert _keys() == before, "leaving the substitution must restore every key"
    return {spec for spec in before if during[spec] != before[spec]}


def test_editing_a_shared_helper_changes_exactly_its_dependents():
    helper = _shared_helper()
    specs = all_specs()
    changed = _changed_by(helper)
    dependents = {s for s in specs if helper in import_closure(_module(s.builder))}
    assert changed == dependents
    # every spec of the family, and nothing else: rope, copy and fill keep their keys
    assert changed == {s for s in specs if s.name.split(".")[0] == USER_FAMILY}
    assert len({s.name.split(".")[0] for s in specs if s not in changed}) >= 3


def test_editing_a_contract_module_changes_only_its_family():
    user = _family_spec(USER_FAMILY)
    changed = _changed_by(_module(user.contract))
    assert changed == {s for s in all_specs() if s.name.split(".")[0] == USER_FAMILY}


def test_editing_the_runtime_changes_no_key_and_the_build_pipeline_every_key():
    """The loader, the driver calls and the lookup only run kernels: a fix to them keeps every
    pack valid. The compile step builds every kernel: editing it re-keys them all."""
    for runtime in ("cutefi.jit.loader", "cutefi.jit.libcuda", "cutefi.jit.lookup", "cutefi.env"):
        assert not _changed_by(runtime), runtime
    specs = set(all_specs())
    for pipeline in ("cutefi.jit.compile", "cutefi.jit.nvrtc", "cutefi.jit.ptx"):
        assert _changed_by(pipeline) == specs, pipeline


def test_memoised_fingerprint_stays_until_caches_are_cleared():
    spec, helper = _family_spec(USER_FAMILY), _shared_helper()
    before = spec.fingerprint()
    tree = cutefi_tree()
    tree.overrides[helper] = tree.source(helper) + b"\n# edited\n"
    try:
        assert spec.fingerprint() == before  # memoised: an edit mid-process is not re-read
        clear_caches()
        assert spec.fingerprint() != before
    finally:
        del tree.overrides[helper]
        clear_caches()
    assert spec.fingerprint() == before


def _write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


SYNTHETIC = '''"""A module with every import form the closure must see."""
from __future__ import annotations
import os, pkg.b.plain as p  # an outside module and an aliased dotted one
from . import (
    sibling,  # trailing comment inside the list
    helper as h,
)
from ..c import deep_attr, deepmod
from .. import d
from .missing import x
from cutlass import cute
from pkg.h import \\
    cont


def lazy():
    from pkg.e import lazy_target
    import pkg.f.g


if TYPE_CHECKING:
    from ..typing_only import T
'''


def test_import_forms_in_a_tmp_package(tmp_path):
    empty = ["__init__.py", "a/sibling.py", "a/helper.py", "b/__init__.py", "b/plain.py",
             "c/deepmod.py", "d.py", "e/__init__.py", "e/lazy_target.py", "f/g.py",
             "typing_only.py", "h/__init__.py", "h/cont.py", "unused.py", "a/unused.py"]
    _write(tmp_path / "pkg", {name: "" for name in empty} | {
        "a/__init__.py": "from .sub import thing\n",  # relative import inside a package __init__
        "a/sub.py": "",
        "a/mod.py": SYNTHETIC,
        "c/__init__.py": "deep_attr = 1\n",
    })
    tree = SourceTree("pkg", [tmp_path / "pkg"])
    assert set(tree.closure("pkg.a.mod")) == {
        "pkg", "pkg.a", "pkg.a.mod", "pkg.a.sub", "pkg.a.sibling", "pkg.a.helper",
        "pkg.b", "pkg.b.plain", "pkg.c", "pkg.c.deepmod", "pkg.d", "pkg.e", "pkg.e.lazy_target",
        "pkg.f.g",  # pkg/f has no __init__.py: nothing to hash for the namespace package
        "pkg.typing_only", "pkg.h", "pkg.h.cont",
    }
    # the substitution hook: "edit" a module without touching disk
    tree.overrides["pkg.d"] = b"if True:\n    from .unused import z\n"
    before = tree.fingerprint(["pkg.d"])
    tree.clear()
    assert "pkg.unused" in tree.closure("pkg.a.mod")
    assert tree.fingerprint(["pkg.d"]) != before


def _ast_imports(tree: SourceTree, module: str) -> set[str]:
    """Reference parser: cutefi modules named by import statements, via ``ast``."""
    found = set()
    package = module if tree.is_package(module) else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(tree.source(module))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1])
                base = f"{anchor}.{base}" if base else anchor
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
    return {m for m in found if tree.file(m)}


def _all_modules(tree: SourceTree) -> list[str]:
    root = tree.dirs[0]
    names = []
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root).with_suffix("").parts
        names.append(".".join((tree.package,) + (parts[:-1] if parts[-1] == "__init__" else parts)))
    return names


def test_regex_parser_sees_every_import_ast_sees():
    tree = cutefi_tree()
    for module in _all_modules(tree):
        assert _ast_imports(tree, module) <= set(tree.closure(module)), module


def test_closures_do_not_import_cutlass_or_torch():
    code = """if True:
        import sys
        from cutefi.jit.closure import cutefi_tree, import_closure
        root = cutefi_tree().dirs[0]
        for path in root.rglob("*.py"):
            parts = path.relative_to(root).with_suffix("").parts
            import_closure(".".join(("cutefi",) + (parts[:-1] if parts[-1] == "__init__" else parts)))
        assert not {"cutlass", "torch"} & set(sys.modules), sorted(sys.modules)
    """
    subprocess.run([sys.executable, "-c", code], check=True)


def test_cold_fingerprints_of_every_spec_are_fast():
    specs = all_specs()
    clear_caches()
    start = time.perf_counter()
    for spec in specs:
        spec.fingerprint()
    elapsed = time.perf_counter() - start
    print(f"\ncold closure + fingerprint of {len(specs)} specs: {elapsed * 1e3:.2f} ms")
    assert elapsed < 0.05
