"""API logging, FlashInfer's model: ``CUTEFI_LOGLEVEL`` and ``CUTEFI_LOGDEST``, read at import.

Levels: 0 off (the public functions are the undecorated ones: zero cost), 1 function names,
3 inputs and outputs (shapes, dtypes, strides, devices) and the kernels chosen (target, and
whether the cubin came from a pack, the cache or a build), 5 also min/max/mean and NaN/Inf
counts of tensors (skipped while a CUDA graph is being captured: they would synchronise).
``CUTEFI_LOGDEST``: ``stdout``, ``stderr`` (default) or a file path (appended to). A call's
lines are written and flushed before it launches, so the last line before a crash names it.
"""

from __future__ import annotations

import functools
import inspect
import os
import sys
import threading
from typing import Any, Callable, TextIO, TypeVar

LEVEL_ENV = "CUTEFI_LOGLEVEL"
DEST_ENV = "CUTEFI_LOGDEST"
LEVELS = (0, 1, 3, 5)

F = TypeVar("F", bound=Callable[..., Any])


def _read_level() -> int:
    raw = os.environ.get(LEVEL_ENV, "0").strip() or "0"
    try:
        level = int(raw)
    except ValueError:
        raise ValueError(f"{LEVEL_ENV} must be one of {LEVELS}; got {raw!r}") from None
    if level not in LEVELS:
        raise ValueError(f"{LEVEL_ENV} must be one of {LEVELS}; got {level}")
    return level


LEVEL = _read_level()
_lock = threading.Lock()
_stream: TextIO | None = None


def _destination() -> TextIO:
    global _stream
    if _stream is None:
        dest = os.environ.get(DEST_ENV, "stderr")
        _stream = {"stdout": sys.stdout, "stderr": sys.stderr}.get(dest) or open(dest, "a", buffering=1)
    return _stream


def log(level: int, message: str) -> None:
    """Write one line if ``CUTEFI_LOGLEVEL`` is at least ``level`` (flushed at once)."""
    if LEVEL >= level:
        with _lock:
            stream = _destination()
            stream.write(f"[cutefi] {message}\n")
            stream.flush()


def describe(value: Any, stats: bool = False) -> str:
    """A tensor as shape, dtype, strides and device (and its statistics at level 5)."""
    import torch

    if isinstance(value, torch.Tensor):
        text = (f"Tensor(shape={tuple(value.shape)}, dtype={str(value.dtype).replace('torch.', '')}, "
                f"stride={tuple(value.stride())}, device={value.device})")
        if stats:
            text += " " + _statistics(value)
        return text
    if isinstance(value, (tuple, list)):
        inner = ", ".join(describe(v, stats) for v in value)
        return f"({inner})" if isinstance(value, tuple) else f"[{inner}]"
    return repr(value)


def _statistics(tensor: Any) -> str:
    import torch

    if tensor.is_cuda and torch.cuda.is_current_stream_capturing():
        return "[statistics skipped: CUDA graph capture]"
    if tensor.numel() == 0 or not (tensor.is_floating_point() or tensor.dtype in (torch.int32, torch.int64)):
        return ""
    values = tensor.detach().float()
    finite = values[torch.isfinite(values)]
    nan, inf = int(torch.isnan(values).sum()), int(torch.isinf(values).sum())
    if finite.numel() == 0:
        return f"[nan={nan} inf={inf}]"
    return (f"[min={finite.min().item():.4g} max={finite.max().item():.4g} "
            f"mean={finite.mean().item():.4g} nan={nan} inf={inf}]")


def api_log(function: F) -> F:
    """Log calls of a public function at ``CUTEFI_LOGLEVEL`` >= 1; at 0 return it unchanged."""
    if LEVEL == 0:
        return function
    name = f"cutefi.{function.__qualname__}"  # methods: cutefi.Class.method
    signature = inspect.signature(function)

    @functools.wraps(function)
    def logged(*args: Any, **kwargs: Any) -> Any:
        if LEVEL >= 3:
            bound = signature.bind_partial(*args, **kwargs)
            described = ", ".join(f"{key}={describe(value, LEVEL >= 5)}" for key, value in bound.arguments.items()
                                  if key != "self")
            log(3, f"{name}({described})")
        else:
            log(1, name)
        result = function(*args, **kwargs)
        if LEVEL >= 3 and result is not None:
            log(3, f"{name} -> {describe(result, LEVEL >= 5)}")
        return result

    return logged  # type: ignore[return-value]
