"""The launch contract: what a kernel's author declares next to the kernel.

cutefi launches cubins itself (cuda-python, ``cuLaunchKernelEx``), not through the DSL's
host code, so the author states the kernel ABI and launch geometry here and the build checks
them against the PTX ``.entry`` and the lowered host module for a sample problem
(``cutefi.jit.compile``); the loader checks parameter sizes against the cubin again.

Kernel entries take raw pointers, explicit Int32/Int64/Float32 scalars and TMA descriptors
(encoded by the loader): never CuTe tensors with symbolic shapes, whose parameter structs
are DSL internals.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

Problem = Mapping[str, int]

# kind -> (size, alignment) in the PTX .entry
PARAM_ABI: dict[str, tuple[int, int]] = {
    "ptr": (8, 8),
    "i32": (4, 4),
    "i64": (8, 8),
    "f32": (4, 4),
    "tma": (128, 64),
}


@dataclass(frozen=True)
class Param:
    """One kernel parameter: ``ptr`` (device address), ``i32``/``i64``/``f32`` or ``tma``."""

    name: str
    kind: str

    def __post_init__(self) -> None:
        if self.kind not in PARAM_ABI:
            raise ValueError(f"param {self.name!r}: kind must be one of {sorted(PARAM_ABI)}")

    @property
    def size(self) -> int:
        return PARAM_ABI[self.kind][0]

    @property
    def align(self) -> int:
        return PARAM_ABI[self.kind][1]


@dataclass(frozen=True)
class TmaRecipe:
    """How the loader encodes one TMA descriptor with ``cuTensorMapEncodeTiled``.

    The global shape and strides come from the tensor passed at launch; ``box`` is the
    shared-memory tile, innermost dimension first (the driver's order).
    """

    param: str
    dtype: str               # torch dtype name, e.g. "bfloat16"
    box: tuple[int, ...]     # innermost first
    swizzle: str = "none"    # none | 32B | 64B | 128B
    l2_promotion: str = "none"  # none | 64B | 128B | 256B
    oob_fill_nan: bool = False

    @property
    def rank(self) -> int:
        return len(self.box)


@dataclass(frozen=True)
class LaunchContract:
    """Kernel ABI and launch geometry; ``grid`` maps a problem (named sizes) to (x, y, z)."""

    params: tuple[Param, ...]
    block: tuple[int, int, int]
    grid: Callable[[Problem], tuple[int, int, int]]
    sample: Problem
    cluster: tuple[int, int, int] = (1, 1, 1)
    smem_bytes: int = 0
    tma: tuple[TmaRecipe, ...] = ()
    # Values of the DSL host function's arguments for ``sample`` (None for pointers), used
    # to evaluate the lowered host module; default: each param looked up by name.
    host_args: Callable[[Problem], Sequence[Any]] | None = field(default=None, compare=False)

    def host_arg_values(self, problem: Problem) -> list[Any]:
        if self.host_args is not None:
            return list(self.host_args(problem))
        return [None if p.kind in ("ptr", "tma") else problem.get(p.name) for p in self.params]

    def describe(self) -> dict[str, Any]:
        """The JSON-able part, stored in each artifact's metadata."""
        return {
            "params": [{"name": p.name, "kind": p.kind, "size": p.size} for p in self.params],
            "block": list(self.block),
            "cluster": list(self.cluster),
            "smem_bytes": self.smem_bytes,
            "sample": dict(self.sample),
            "sample_grid": list(self.grid(self.sample)),
            "tma": [
                {"param": t.param, "dtype": t.dtype, "box": list(t.box), "swizzle": t.swizzle,
                 "l2_promotion": t.l2_promotion, "oob_fill_nan": t.oob_fill_nan}
                for t in self.tma
            ],
        }


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)
