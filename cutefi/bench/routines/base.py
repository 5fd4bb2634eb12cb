"""What a benchmark routine is: shape flags, inputs, backends, a float32 reference, a cost model."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import torch

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


class BenchInputError(ValueError):
    """A routine cannot run this case (an impossible shape, an unsupported dtype)."""


@dataclass(frozen=True)
class ShapeFlag:
    """A ``--flag`` of sizes for one routine: its full sweep and the short default-suite list."""

    name: str
    default: tuple[int, ...]
    quick: tuple[int, ...]
    help: str
    minimum: int = 1


@dataclass(frozen=True)
class Cost:
    """What one call moves and computes: the bytes and FLOPs GB/s and TFLOP/s are made of."""

    bytes: int
    flops: int = 0


Backend = Callable[..., Any]  # called as fn(*inputs); returns the output(s) refcheck compares


class Routine:
    """One op to time: subclasses set the class attributes and fill in the methods."""

    name: str = ""
    help: str = ""
    flags: tuple[ShapeFlag, ...] = ()
    optional_backends: tuple[str, ...] = ()  # peers backends() adds only when they import
    bound: str = "memory"  # "memory": GB/s against copy bandwidth; "compute": TFLOP/s against matmul
    dtypes: tuple[str, ...] = tuple(DTYPES)  # the --dtype values it takes
    atol: float = 2e-2
    rtol: float = 2e-2

    def backends(self) -> dict[str, Backend]:
        """Backend name -> implementation (only those this routine has; availability checked apart)."""
        raise NotImplementedError

    def check_shape(self, shape: dict[str, int]) -> None:
        """Raise :class:`BenchInputError` for a shape this routine cannot form."""

    def make_inputs(self, shape: dict[str, int], dtype: torch.dtype) -> tuple[Any, ...]:
        raise NotImplementedError

    def reference(self, inputs: tuple[Any, ...], shape: dict[str, int]) -> tuple[torch.Tensor, ...]:
        """Float32 (or float64) outputs for ``inputs``, as the backends return them."""
        raise NotImplementedError

    def cost(self, shape: dict[str, int], dtype: torch.dtype) -> Cost:
        raise NotImplementedError

    def tolerance(self, shape: dict[str, int], dtype: torch.dtype) -> tuple[float, float]:
        """(atol, rtol) for an elementwise comparison with the reference."""
        return self.atol, self.rtol

    def shapes(self, sizes: dict[str, tuple[int, ...]]) -> Iterator[dict[str, int]]:
        """Every combination of the flag values (cartesian product, in flag order)."""
        names = [flag.name for flag in self.flags]
        for values in itertools.product(*(sizes[name] for name in names)):
            yield dict(zip(names, values))

    def label(self, shape: dict[str, int]) -> str:
        return " ".join(f"{key}={value}" for key, value in shape.items())


def check_attention_heads(shape: dict[str, int]) -> None:
    """The head counts and head_dim every attention routine takes (GQA groups, 64/128/256)."""
    if shape["qo_heads"] % shape["kv_heads"]:
        raise BenchInputError("qo_heads must be a multiple of kv_heads")
    if shape["head_dim"] not in (64, 128, 256):
        raise BenchInputError("head_dim must be 64, 128 or 256")


def as_outputs(result: Any) -> tuple[torch.Tensor, ...]:
    """A backend's return value as a tuple of tensors."""
    if isinstance(result, torch.Tensor):
        return (result,)
    return tuple(result)


def randn(*shape: int, dtype: torch.dtype, scale: float = 1.0) -> torch.Tensor:
    return torch.randn(*shape, device="cuda", dtype=torch.float32).mul_(scale).to(dtype)


def poisoned(*shape: int, dtype: torch.dtype) -> torch.Tensor:
    """An output buffer full of NaN, so an element a kernel never writes fails refcheck."""
    return torch.full(shape, float("nan"), device="cuda", dtype=dtype)


def flashinfer_module() -> Any:
    """FlashInfer when it imports, else None (the runner reports it as not installed)."""
    try:
        import flashinfer
    except Exception:  # not installed, or a build that fails to load
        return None
    return flashinfer


def compiled(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``torch.compile(fn)`` with one specialised graph per shape, as a fixed-shape server has.

    Without a higher limit dynamo silently falls back to eager after 8 shapes.
    """
    torch._dynamo.config.recompile_limit = 1024
    return torch.compile(fn, dynamic=False)
