"""Host-to-device staging of a plan's int32 tables: one pinned buffer, filled from numpy and
sent with one ``cuMemcpyHtoDAsync`` on torch's current stream of the device.

Plans run once per decode step, so their host time counts. On the H200 host, torch's
``copy_`` of a 2 KB pinned table cost 8.9 us and ``Event.record`` 3 us (dispatcher, device
guard, caching-allocator bookkeeping); the driver calls through ctypes skip all of that. An
event recorded after each copy says when the pinned buffer may be refilled: the next plan
waits for it, usually long done, instead of racing the copy.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import torch

from . import libcuda

# int32 entries above which the pinned buffer is filled by torch's copy (it uses every core):
# on the H200 host numpy took 10 us for 71776 entries where torch took 27; they tie at 131072
THREADED_COPY = 1 << 17


class Int32Staging:
    """Pinned and device int32 buffers of one device, grown on demand; ``send`` returns
    device views of each array sent. ``fixed``: the device buffer keeps its address once
    made (CUDA-graph plans point kernels at it), so outgrowing it raises instead."""

    def __init__(self, device: int, fixed: bool = False) -> None:
        self.device = device
        self.fixed = fixed
        self._host: torch.Tensor | None = None
        self._host_array: np.ndarray | None = None  # numpy view of the pinned buffer
        self._device_buffer: torch.Tensor | None = None
        self._views: dict[tuple[int, ...], tuple] = {}  # (offsets, device views) by array sizes
        self._event = 0  # recorded after the last copy (0: none made yet)

    def __del__(self) -> None:
        if self._event:
            try:
                libcuda.event_destroy(self._event)
            except Exception:  # interpreter shutdown: the driver may be gone already
                pass

    def send(self, arrays: Sequence[np.ndarray], non_blocking: bool = True) -> list[torch.Tensor]:
        """Copy ``arrays`` (int32, 1-D) to the device in one transfer ordered on the current
        stream; ``non_blocking=False`` waits for it to land."""
        sizes = tuple(a.size for a in arrays)
        if self._event:  # the previous copy has left the pinned buffer
            libcuda.check(_event_synchronize(self._event), "cuEventSynchronize")
        total = sum(sizes)
        if self._host is None or self._host.numel() < total:
            self._grow(total)
        views = self._views.get(sizes)
        if views is None:  # tensor slicing costs microseconds: once per array layout
            views = self._views[sizes] = self._slices(sizes)
        offsets, device_views = views
        host = self._host_array
        for offset, array in zip(offsets, arrays):
            if array.size > THREADED_COPY:
                self._host[offset:offset + array.size].copy_(torch.from_numpy(array))
            else:
                host[offset:offset + array.size] = array
        self._copy(total * 4)
        if not non_blocking:
            libcuda.check(_event_synchronize(self._event), "cuEventSynchronize")
        return device_views

    def _grow(self, total: int) -> None:
        if self.fixed and self._device_buffer is not None:
            raise ValueError(f"a CUDA-graph plan's tables grew to {total} entries, past the "
                             f"{self._device_buffer.numel()} of its first plan")
        size = max(total, 4096)
        self._host = _pinned_ints(size)
        self._host_array = self._host.numpy()
        self._device_buffer = _device_ints(size, self.device)
        self._views.clear()

    def _slices(self, sizes: tuple[int, ...]) -> tuple[list[int], list[torch.Tensor]]:
        if len(self._views) > 64:
            self._views.clear()
        offsets = [sum(sizes[:i]) for i in range(len(sizes))]
        return offsets, [self._device_buffer[o:o + n] for o, n in zip(offsets, sizes)]

    def _copy(self, nbytes: int) -> None:
        """The transfer and its event, on torch's current stream of the device, in the
        device's context (another device may be current; a new thread may have none)."""
        if not self._event:
            self._event = libcuda.event_create(self.device)
        stream = _raw_stream(self.device)
        args = (self._device_buffer.data_ptr(), self._host.data_ptr(), nbytes, stream)
        if _current_device() == self.device:
            code = _memcpy(*args)
            if code != libcuda.CUDA_ERROR_INVALID_CONTEXT:
                libcuda.check(code, "cuMemcpyHtoDAsync")
                libcuda.check(_event_record(self._event, stream), "cuEventRecord")
                return
        with libcuda.on_device(self.device):
            libcuda.check(_memcpy(*args), "cuMemcpyHtoDAsync")
            libcuda.check(_event_record(self._event, stream), "cuEventRecord")


def _pinned_ints(size: int) -> torch.Tensor:
    return torch.empty(size, dtype=torch.int32, pin_memory=True)


def _device_ints(size: int, device: int) -> torch.Tensor:
    return torch.empty(size, dtype=torch.int32, device=f"cuda:{device}")


def _memcpy(device_ptr: int, host_ptr: int, nbytes: int, stream: int) -> int:
    return libcuda.lib().cuMemcpyHtoDAsync_v2(device_ptr, host_ptr, nbytes, stream)


def _event_record(event: int, stream: int) -> int:
    return libcuda.lib().cuEventRecord(event, stream)


def _event_synchronize(event: int) -> int:
    return libcuda.lib().cuEventSynchronize(event)


def _raw_stream(device: int) -> int:
    return torch._C._cuda_getCurrentRawStream(device)


def _current_device() -> int:
    return torch._C._cuda_getDevice()
