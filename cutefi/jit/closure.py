"""The import closure of a kernel's modules, for the source fingerprint in its cache key.

A kernel's code depends on every ``cutefi`` module its builder reaches by import, so the key
hashes that whole set instead of a hand-kept list. Pure python and cheap (it runs at the first
kernel call of a process): modules are found on disk from the package directory, never
imported, and their imports are read with a regex over import statements, not ``ast``.

What counts as an import (conservative: an extra module only makes a key more sensitive):

* ``import cutefi.a.b``, ``from cutefi.a import b`` (``cutefi.a.b`` too when it is a module),
  relative imports, parenthesised and backslash-continued name lists;
* imports at any indentation: inside functions (a lazy import still changes the code) and
  under ``if TYPE_CHECKING:``;
* every package ``__init__`` above an imported module (importing it runs them), except
  that the root package's own imports are not followed: its ``__init__`` only dispatches at
  run time (the public API, ``env``), and following it put the whole runtime (``jit.loader``,
  ``jit.libcuda``, ``jit.lookup``) into every kernel's key, so a fix to the loader re-keyed
  every pack. What builds a cubin besides the builder and the contract is named explicitly
  (``jit.spec.BUILD_PIPELINE``).

Not seen: ``importlib.import_module("...")`` strings, and an import after ``;`` or ``:`` on
the same line. Import-looking lines inside strings are counted (harmless over-inclusion).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import re
from pathlib import Path
from typing import Callable, Iterable, Iterator, Mapping, Sequence, TypeVar

# `from X import names` (names possibly parenthesised over several lines) or `import a, b.c`
_IMPORT = re.compile(
    rb"^[ \t]*(?:from[ \t]+(\.*[\w.]*)[ \t]+import[ \t]*(\([^)]*\)|[^\n;#]*)|import[ \t]+([^\n;#]*))",
    re.MULTILINE,
)
_COMMENT = re.compile(rb"#[^\n]*")


class SourceTree:
    """The modules of one package on disk, with their direct imports parsed once.

    ``overrides`` maps a module name to source text used instead of its file (tests "edit" a
    module this way); it may only name modules that exist on disk.
    """

    def __init__(self, package: str, dirs: Sequence[str | Path]) -> None:
        self.package = package
        self.dirs = [Path(d) for d in dirs]
        self.overrides: dict[str, bytes] = {}
        self._files: dict[str, Path | None] = {}
        self._parsed: dict[str, tuple[tuple[str, ...], bytes]] = {}  # imports, source digest
        self._closures: dict[str, tuple[str, ...]] = {}

    def clear(self) -> None:
        self._files.clear()
        self._parsed.clear()
        self._closures.clear()

    # ---- files ---------------------------------------------------------------------------
    def file(self, module: str) -> Path | None:
        """``<dir>/a/b.py`` or ``<dir>/a/b/__init__.py`` for ``package.a.b``; None if absent."""
        if module not in self._files:
            self._files[module] = self._find(module)
        return self._files[module]

    def _find(self, module: str) -> Path | None:
        if module != self.package and not module.startswith(self.package + "."):
            return None
        parts = module.split(".")[1:]
        for root in self.dirs:
            base = root.joinpath(*parts)
            for path in (base / "__init__.py", base.with_suffix(".py")) if parts else (base / "__init__.py",):
                if path.is_file():
                    return path
        return None

    def is_package(self, module: str) -> bool:
        path = self.file(module)
        return path is not None and path.name == "__init__.py"

    def source(self, module: str) -> bytes:
        path = self.file(module)
        if path is None:
            raise ImportError(f"module {module!r} not found under {self.package!r}")
        override = self.overrides.get(module)
        return override if override is not None else path.read_bytes()

    # ---- imports -------------------------------------------------------------------------
    def _parse(self, module: str) -> tuple[tuple[str, ...], bytes]:
        parsed = self._parsed.get(module)
        if parsed is None:
            source = self.source(module)
            parsed = (tuple(sorted(self._imports(module, source))), hashlib.sha256(source).digest())
            self._parsed[module] = parsed
        return parsed

    def _imports(self, module: str, source: bytes) -> set[str]:
        """Modules of this package that ``module`` imports directly (plus its own parents)."""
        found = set(self._with_parents(module)) - {module}
        if b"\\\n" in source:  # rare: join backslash continuations so one regex line sees all
            source = source.replace(b"\\\n", b" ")
        for base, names, plain in _IMPORT.findall(source):
            if plain:
                for item in plain.split(b","):
                    target = _first_word(item)
                    if target and self.file(target):
                        found.update(self._with_parents(target))
                continue
            target = self._absolute(module, base.decode())
            if target is None or self.file(target) is None:
                continue
            found.update(self._with_parents(target))
            for item in _COMMENT.sub(b"", names).strip(b"()").split(b","):
                name = _first_word(item)
                if name and name != "*" and self.file(f"{target}.{name}"):
                    found.add(f"{target}.{name}")  # a submodule, not just an attribute
        return found

    def _absolute(self, module: str, base: str) -> str | None:
        """Resolves ``from <base> import`` as seen from ``module`` (None if it leaves the tree)."""
        level = len(base) - len(base.lstrip("."))
        if not level:
            return base
        package = module if self.is_package(module) else module.rpartition(".")[0]
        parts = package.split(".")
        if level - 1 >= len(parts):
            return None
        anchor = ".".join(parts[: len(parts) - (level - 1)])
        rest = base[level:]
        return f"{anchor}.{rest}" if rest else anchor

    def _with_parents(self, module: str) -> Iterator[str]:
        """``module`` and each enclosing package that has an ``__init__.py`` on disk."""
        parts = module.split(".")
        for i in range(1, len(parts) + 1):
            name = ".".join(parts[:i])
            if self.file(name):
                yield name

    # ---- closure and digest --------------------------------------------------------------
    def closure(self, module: str) -> tuple[str, ...]:
        cached = self._closures.get(module)
        if cached is None:
            if self.file(module) is None:
                raise ImportError(f"module {module!r} not found under {self.package!r}")
            seen, stack = {module}, [module]
            while stack:
                current = stack.pop()
                if current == self.package and module != self.package:
                    continue  # (the root package: its source counts, its run-time imports do not)
                for dep in self._parse(current)[0]:
                    if dep not in seen:
                        seen.add(dep)
                        stack.append(dep)
            cached = self._closures[module] = tuple(sorted(seen))
        return cached

    def fingerprint(self, modules: Iterable[str]) -> str:
        digest = hashlib.sha256()
        for module in sorted(set(modules)):
            # name and the source's own sha256: fixed-size fields, so no two sets collide
            digest.update(module.encode() + b"\0" + self._parse(module)[1])
        return digest.hexdigest()[:16]


def _first_word(item: bytes) -> str:
    """``b" a.b as c "`` -> ``"a.b"``."""
    words = item.split()
    return words[0].decode() if words else ""


# ---- the cutefi tree, and caches built on it ---------------------------------------------
_T = TypeVar("_T", bound=Callable[..., object])
_CLEAR_HOOKS: list[Callable[[], None]] = []


@functools.lru_cache(maxsize=1)
def cutefi_tree() -> SourceTree:
    import cutefi  # already imported (this module is inside it); gives the package's dirs

    return SourceTree("cutefi", list(cutefi.__path__))


def import_closure(module: str) -> tuple[str, ...]:
    """Sorted names of the ``cutefi`` modules reachable from ``module`` by import, itself included."""
    return cutefi_tree().closure(module)


def fingerprint_modules(modules: Iterable[str]) -> str:
    """sha256 over (name, source) of each module, sorted; 16 hex chars."""
    return cutefi_tree().fingerprint(modules)


def memoised(fn: _T) -> _T:
    """``functools.lru_cache`` that :func:`clear_caches` also clears (for fingerprint callers)."""
    cached = functools.lru_cache(maxsize=None)(fn)
    _CLEAR_HOOKS.append(cached.cache_clear)
    return cached  # type: ignore[return-value]


def clear_caches() -> None:
    cutefi_tree().clear()
    for hook in _CLEAR_HOOKS:
        hook()


@contextlib.contextmanager
def substituted_sources(sources: Mapping[str, str | bytes]) -> Iterator[None]:
    """Within the block, fingerprints see ``sources`` in place of those modules' files."""
    tree = cutefi_tree()
    saved = dict(tree.overrides)
    missing = [m for m in sources if tree.file(m) is None]
    if missing:
        raise ImportError(f"cannot substitute modules not on disk: {missing}")
    tree.overrides.update({m: s.encode() if isinstance(s, str) else s for m, s in sources.items()})
    clear_caches()
    try:
        yield
    finally:
        tree.overrides = saved
        clear_caches()
