"""Bounded caches of device arrays that a captured CUDA graph may point into.

A graph replays the addresses it captured. If a cache evicted such an array and its memory
went to another tensor, every replay would read (or write) that tensor. ``GraphSafeCache``
marks what is handed out during a capture and keeps it alive when it is evicted; what was
never captured is simply dropped, oldest first, one at a time.
"""

from __future__ import annotations

from typing import Callable, Generic, Hashable, TypeVar

import torch

Value = TypeVar("Value")


class GraphSafeCache(Generic[Value]):
    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError(f"limit must be >= 1; got {limit}")
        self.limit = limit
        self._entries: dict[Hashable, Value] = {}  # insertion order = age
        self._captured: set[Hashable] = set()
        self._kept: list[Value] = []  # evicted, but a captured graph may still use them

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: Hashable, make: Callable[[], Value]) -> Value:
        """The value under ``key``, made by ``make()`` when absent (evicting the oldest entry
        when full); marked as captured when asked for during a CUDA graph capture."""
        found = self._entries.get(key)
        if found is None:
            found = make()  # (first: a refused make evicts nothing)
            if len(self._entries) >= self.limit:
                self._evict_oldest()
            self._entries[key] = found
        if torch.cuda.is_current_stream_capturing():  # (used on CUDA builds of torch only)
            self._captured.add(key)
        return found

    def _evict_oldest(self) -> None:
        oldest = next(iter(self._entries))
        evicted = self._entries.pop(oldest)
        if oldest in self._captured:
            self._captured.discard(oldest)
            self._kept.append(evicted)
