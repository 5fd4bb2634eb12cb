"""Collect CUPTI activity records (through ``cupti-python``) around a block of host code."""

from __future__ import annotations

from types import ModuleType
from typing import Any

from .cupti_records import ApiCall, GpuActivity

_BUFFER_BYTES = 8 << 20


class CuptiUnavailable(RuntimeError):
    """CUPTI cannot trace here: cupti-python is missing, or another profiler holds CUPTI."""


def load_cupti() -> ModuleType:
    try:
        from cupti import cupti
    except Exception as exc:  # ImportError, or a libcupti that fails to load
        raise CuptiUnavailable(f"cupti-python is not importable ({type(exc).__name__}: {exc}); "
                               f"install it with `pip install 'cutefi[bench]'`") from exc
    return cupti


class ActivityTrace:
    """``with ActivityTrace() as trace:`` records API calls and GPU work until the block ends.

    Callbacks are registered once per process (CUPTI keeps one pair); each trace swaps in its
    own lists, so records from an earlier trace never leak into a later one.
    """

    _registered = False
    _current: "ActivityTrace | None" = None

    def __init__(self) -> None:
        self.cupti = load_cupti()
        kind = self.cupti.ActivityKind
        self._api_kinds = {int(kind.RUNTIME), int(kind.DRIVER)}
        self._work_kinds = {int(kind.CONCURRENT_KERNEL), int(kind.MEMCPY), int(kind.MEMSET)}
        self._kinds = [kind.RUNTIME, kind.DRIVER, kind.CONCURRENT_KERNEL, kind.MEMCPY, kind.MEMSET]
        self.api_calls: list[ApiCall] = []
        self.activities: list[GpuActivity] = []

    def timestamp(self) -> int:
        """CUPTI's clock (ns), the one its records use."""
        return int(self.cupti.get_timestamp())

    def _completed(self, records: list[Any]) -> None:
        for record in records:
            kind = int(record.kind)
            if kind in self._api_kinds:
                self.api_calls.append(ApiCall(int(record.start), int(record.end), int(record.correlation_id)))
            elif kind in self._work_kinds:
                name = getattr(record, "name", None) if kind == int(self.cupti.ActivityKind.CONCURRENT_KERNEL) else None
                self.activities.append(GpuActivity(int(record.start), int(record.end), int(record.correlation_id),
                                                   str(name) if name else "memcpy/memset"))

    def __enter__(self) -> "ActivityTrace":
        cupti = self.cupti
        enabled: list[Any] = []
        try:
            if not ActivityTrace._registered:
                cupti.activity_register_callbacks(
                    lambda: (_BUFFER_BYTES, 0),
                    lambda records: ActivityTrace._current._completed(records) if ActivityTrace._current else None)
                ActivityTrace._registered = True
            ActivityTrace._current = self
            for kind in self._kinds:
                cupti.activity_enable(kind)
                enabled.append(kind)
        except Exception as exc:  # e.g. CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED under ncu/nsys
            for kind in enabled:
                cupti.activity_disable(kind)
            ActivityTrace._current = None
            raise CuptiUnavailable(f"CUPTI activity tracing failed to start ({type(exc).__name__}: {exc})") from exc
        return self

    def __exit__(self, *exc_info: object) -> None:
        try:
            self.cupti.activity_flush_all(1)
        finally:
            for kind in self._kinds:
                self.cupti.activity_disable(kind)
            ActivityTrace._current = None
