"""Input checks shared by the public ops: each failure names the argument and what is accepted."""

from __future__ import annotations

import math
import numbers
import operator
from typing import Iterable

import torch


def require_tensor(name: str, value: object) -> torch.Tensor:
    if not isinstance(value, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(value).__name__}")
    return value


def require_cuda(name: str, tensor: torch.Tensor) -> int:
    """The CUDA device index of ``tensor``; raises for CPU (or other) tensors."""
    require_tensor(name, tensor)
    if not tensor.is_cuda:
        raise ValueError(f"{name} must be on a CUDA device, got {tensor.device}")
    return tensor.get_device()


def require_dtype(name: str, tensor: torch.Tensor, accepted: Iterable[torch.dtype]) -> None:
    accepted = tuple(accepted)
    if tensor.dtype not in accepted:
        names = ", ".join(str(d).replace("torch.", "") for d in accepted)
        raise TypeError(f"{name} must have dtype {names}; got {str(tensor.dtype).replace('torch.', '')}")


def require_contiguous(name: str, tensor: torch.Tensor) -> None:
    if not tensor.is_contiguous():
        raise ValueError(f"{name} must be contiguous (got strides {tuple(tensor.stride())}); call .contiguous()")


def require_aligned(name: str, tensor: torch.Tensor, alignment: int = 16) -> None:
    if tensor.data_ptr() % alignment:
        raise ValueError(f"{name} must start at a {alignment}-byte aligned address (a view at an odd offset?)")


def require_same_device(*named: tuple[str, torch.Tensor]) -> None:
    first = named[0][1].get_device()
    if any(tensor.get_device() != first for _, tensor in named[1:]):
        listed = ", ".join(f"{name} on {tensor.device}" for name, tensor in named)
        raise ValueError(f"tensors must be on one device: {listed}")



# ---- Python scalars ------------------------------------------------------------------------
# Each op calls these only when its cheap check (``type(x) is float and lo <= x <= hi``) fails,
# so a valid call pays for one or two comparisons; these say what is wrong, naming the argument.
F32_MAX = 3.4028234663852886e38  # the largest finite float32


def _describe(value: object) -> str:
    """``type value`` for a message, on one line and short."""
    if isinstance(value, torch.Tensor):
        return f"Tensor of shape {tuple(value.shape)}"
    kind = type(value)
    kind = kind.__name__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__name__}"
    text = repr(value).replace("\n", " ")
    return f"{kind} {text[:40] + '...' if len(text) > 43 else text}"


def require_real(name: str, value: object) -> float:
    """``value`` as a finite float: int, float or a NumPy real; not bool, str, None or a tensor."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or isinstance(value, torch.Tensor):
        raise TypeError(f"{name} must be a real number (int or float); got {_describe(value)}")
    try:
        result = float(value)
    except OverflowError:  # an int too large for a float
        result = math.inf
    if not math.isfinite(result):
        raise ValueError(f"{name} must be finite; got {value!r}")
    return result


def require_int(name: str, value: object, accepted: str = "an int") -> int:
    """``value`` as an int: int or a NumPy integer; not bool, float, str, None or a tensor."""
    if type(value) is int:  # the common case, without the abstract-class checks (plan's hot path)
        return value
    if isinstance(value, bool) or isinstance(value, torch.Tensor) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be {accepted}; got {_describe(value)}")
    return operator.index(value)


def require_flag(name: str, value: object, optional: bool = False) -> bool | None:
    """``value`` if it is a bool (or None where ``optional``); a truthy str or int is not taken as one."""
    if isinstance(value, bool) or (optional and value is None):
        return value
    if type(value).__module__ == "numpy" and type(value).__name__ in ("bool", "bool_"):
        return bool(value)
    raise TypeError(f"{name} must be a bool{' or None' if optional else ''}; got {_describe(value)}")


def require_pdl(value: object) -> bool | None:
    """An ``enable_pdl``: a bool, None, or an int taken by its truth (as FlashInfer's C++ ops
    take it); a str or anything else is refused."""
    if value is None or value is True or value is False:
        return value
    if isinstance(value, numbers.Integral) and not isinstance(value, torch.Tensor):
        return bool(value)
    return require_flag("enable_pdl", value, optional=True)


def require_eps(value: object) -> float:
    """A norm's ``eps``: a finite real number >= 0 that fits in float32."""
    eps = require_real("eps", value)
    if eps < 0:
        raise ValueError(f"eps must be a finite number >= 0; got {value!r}")
    if eps > F32_MAX:
        raise ValueError(f"eps must fit in float32 (at most {F32_MAX:.4g}); got {value!r}")
    return eps
