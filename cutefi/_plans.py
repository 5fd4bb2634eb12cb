"""Checked launch plans, memoised by the layout of a call's tensors.

Public ops check every argument once per distinct call layout (dtypes, shapes, strides,
devices) and keep the result, so the calls a server repeats pay only for a signature and a
dict lookup; data pointers, which change every call, are still read and checked each time.
"""

from __future__ import annotations

from typing import Any

import torch

_LIMIT = 4096


def signature(tensor: torch.Tensor | None) -> tuple | None:
    """What a plan may depend on; raises AttributeError for non-tensors."""
    if tensor is None:
        return None
    return tensor.dtype, tensor.shape, tensor.stride(), tensor.get_device()


class PlanCache(dict):
    """A bounded dict of plans (cleared when full: plans are cheap to rebuild).

    A dict subclass so that ``get`` is the C lookup (it runs on every call); a ``None`` key
    (arguments that are not tensors) is never stored, so it always misses.
    """

    def __init__(self, limit: int = _LIMIT) -> None:
        super().__init__()
        self._limit = limit

    def put(self, key: tuple | None, plan: Any) -> Any:
        if key is not None:
            if len(self) >= self._limit:
                self.clear()
            self[key] = plan
        return plan
