"""The launch contract: a kernel's ABI and launch geometry, declared once by its author.

cutefi launches cubins itself (``cuLaunchKernelEx`` through :mod:`.libcuda`), not through
the DSL's host code, so everything about a launch is stated here, next to the kernel, and
everything else is derived from it:

- the kernel's parameter list: CuTe DSL kernels take one argument, the contract's
  :class:`~cutefi.cute.args.KernelArgs`, whose fields are these parameters in this order
  (so the body reads ``args.x``, ``args.eps``; nothing repeats the list by position);
- the fake arguments the build compiles against (dtype and alignment of each pointer);
- the DSL launch in the kernel's host function (grid, block, cluster, shared memory);
- the check of the PTX ``.entry`` (kind, size and alignment of each parameter) at build;
- the loader's packing of a launch's arguments, **by name**, and its ``cuKernelGetParamInfo``
  check of the cubin.

Kernel entries take raw pointers, explicit Int32/Int64/Float32 scalars and TMA descriptors
(encoded by the loader): never CuTe tensors with symbolic shapes, whose parameter structs
are DSL internals.
"""

from __future__ import annotations

import keyword
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

Problem = Mapping[str, Any]

# kind -> (size, alignment) in the PTX .entry and the launch's parameter buffer
PARAM_ABI: dict[str, tuple[int, int]] = {
    "ptr": (8, 8),
    "i32": (4, 4),
    "i64": (8, 8),
    "f32": (4, 4),
    "tma": (128, 64),
}
# element types a pointer parameter may point to (names shared with cutefi.dtypes)
POINTER_DTYPES = ("bf16", "fp16", "fp32", "i8", "u8", "i32", "i64", "fp8e4m3", "fp8e5m2")
# launch-method names a parameter may not shadow
_RESERVED = {"grid", "device", "stream", "pdl", "self", "args", "buffer"}


@dataclass(frozen=True)
class Param:
    """One kernel parameter.

    kind:  ``ptr`` (device address), ``i32``/``i64``/``f32`` (scalars) or ``tma`` (a
           128-byte descriptor the loader encodes from a tensor with the matching recipe).
    dtype: ``ptr`` only: the element type the kernel reads through it.
    align: ``ptr`` only: the byte alignment the kernel may assume (the API checks it).
    """

    name: str
    kind: str
    dtype: str = ""
    align: int = 16

    def __post_init__(self) -> None:
        if self.kind not in PARAM_ABI:
            raise ValueError(f"param {self.name!r}: kind must be one of {sorted(PARAM_ABI)}")
        if not self.name.isidentifier() or keyword.iskeyword(self.name) or self.name in _RESERVED:
            raise ValueError(f"param name {self.name!r} must be an identifier, not one of {sorted(_RESERVED)}")
        if self.kind == "ptr":
            if self.dtype not in POINTER_DTYPES:
                raise ValueError(f"param {self.name!r}: pointer dtype must be one of {POINTER_DTYPES}, "
                                 f"got {self.dtype!r}")
            if self.align not in (1, 2, 4, 8, 16, 32, 64, 128, 256):
                raise ValueError(f"param {self.name!r}: align must be a power of two <= 256")

    @property
    def size(self) -> int:
        return PARAM_ABI[self.kind][0]

    @property
    def abi_align(self) -> int:
        return PARAM_ABI[self.kind][1]


def pointers(*names: str, dtype: str, align: int = 16) -> tuple[Param, ...]:
    return tuple(Param(name, "ptr", dtype, align) for name in names)


def scalars(kind: str, *names: str) -> tuple[Param, ...]:
    return tuple(Param(name, kind) for name in names)


@dataclass(frozen=True)
class TmaRecipe:
    """How the loader encodes one TMA descriptor with ``cuTensorMapEncodeTiled``.

    The global shape and strides come from the tensor passed at launch; ``box`` is the
    shared-memory tile, innermost dimension first (the driver's order). ``placeholder`` is
    the static row-major shape the build compiles against (the kernel must not depend on it).
    """

    param: str
    dtype: str               # cutefi dtype name, e.g. "bf16"
    box: tuple[int, ...]     # innermost first
    placeholder: tuple[int, ...]
    swizzle: str = "none"    # none | 32B | 64B | 128B
    l2_promotion: str = "none"  # none | 64B | 128B | 256B
    oob_fill_nan: bool = False

    @property
    def rank(self) -> int:
        return len(self.box)


@dataclass(frozen=True)
class LaunchContract:
    """Kernel ABI and launch geometry.

    params:  the kernel's parameters, in entry order.
    block:   threads per CTA.
    grid:    problem → (x, y, z) CTAs. A problem maps parameter names to values; the same
             function runs on Python ints at launch and on the DSL's traced values in the
             kernel's host function, so keep it branch-free arithmetic.
    sample:  values of the scalar parameters the build compiles with (the kernel must not
             depend on them; they give the geometry check a concrete problem).
    cluster, smem_bytes (dynamic shared memory), min_ctas_per_sm (``.minnctapersm`` hint).
    tma:     one recipe per ``tma`` parameter.
    entry:   the PTX entry's name prefix (the DSL appends ``_0``); empty: the DSL's name.
    pdl:     the kernel waits on ``griddepcontrol.wait`` before reading its inputs, so it may
             be launched with programmatic dependent launch (sm_90+).
    """

    params: tuple[Param, ...]
    block: tuple[int, int, int]
    grid: Callable[[Problem], tuple[Any, Any, Any]] = field(compare=False)
    sample: Mapping[str, Any] = field(default_factory=dict)
    cluster: tuple[int, int, int] = (1, 1, 1)
    smem_bytes: int = 0
    min_ctas_per_sm: int = 0
    tma: tuple[TmaRecipe, ...] = ()
    entry: str = ""
    pdl: bool = False

    def __post_init__(self) -> None:
        names = [p.name for p in self.params]
        if len(set(names)) != len(names):
            raise ValueError(f"duplicate parameter names in {names}")
        tma_params = {p.name for p in self.params if p.kind == "tma"}
        if tma_params != {r.param for r in self.tma}:
            raise ValueError(f"TMA parameters {sorted(tma_params)} need exactly one recipe each; "
                             f"recipes for {sorted(r.param for r in self.tma)}")

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.params)

    def recipe(self, name: str) -> TmaRecipe:
        return next(r for r in self.tma if r.param == name)

    def sample_problem(self) -> dict[str, Any]:
        """Every parameter with a value: the sample's, else 1 for scalars, None otherwise."""
        return {p.name: self.sample.get(p.name, 1 if p.kind in ("i32", "i64", "f32") else None)
                for p in self.params}

    def describe(self) -> dict[str, Any]:
        """The JSON-able part, stored in each artifact's metadata."""
        return {
            "params": [{"name": p.name, "kind": p.kind, "size": p.size,
                        **({"dtype": p.dtype, "align": p.align} if p.kind == "ptr" else {})}
                       for p in self.params],
            "block": list(self.block),
            "cluster": list(self.cluster),
            "smem_bytes": self.smem_bytes,
            "min_ctas_per_sm": self.min_ctas_per_sm,
            "pdl": self.pdl,
            "sample_grid": [int(v) for v in self.grid(self.sample_problem())] if not self.tma else None,
            "tma": [
                {"param": t.param, "dtype": t.dtype, "box": list(t.box), "swizzle": t.swizzle,
                 "l2_promotion": t.l2_promotion, "oob_fill_nan": t.oob_fill_nan}
                for t in self.tma
            ],
        }


def ceil_div(a: Any, b: Any) -> Any:
    """Works on ints and on the DSL's traced integers."""
    return (a + b - 1) // b
