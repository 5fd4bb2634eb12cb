"""CPU tier: the plan tables' host-to-device staging (``cutefi/jit/staging.py``) with its driver
calls recorded instead of made: one copy a send of every array back to back, the previous copy
waited for before the pinned buffer is refilled, views reused per array layout, large arrays
through torch's copy, and a CUDA-graph (fixed) buffer that refuses to grow."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from cutefi.jit import libcuda, staging


@pytest.fixture
def driver(monkeypatch):
    calls = []
    monkeypatch.setattr(staging, "_pinned_ints", lambda size: torch.full((size,), -7, dtype=torch.int32))
    monkeypatch.setattr(staging, "_device_ints", lambda size, device: torch.zeros(size, dtype=torch.int32))
    monkeypatch.setattr(staging, "_raw_stream", lambda device: 1234)
    monkeypatch.setattr(staging, "_current_device", lambda: 0)
    monkeypatch.setattr(staging, "_memcpy", lambda dst, src, nbytes, stream: calls.append(("copy", nbytes, stream)) or 0)
    monkeypatch.setattr(staging, "_event_record", lambda event, stream: calls.append(("record", event, stream)) or 0)
    monkeypatch.setattr(staging, "_event_synchronize", lambda event: calls.append(("sync", event)) or 0)
    monkeypatch.setattr(libcuda, "event_create", lambda device: 99)
    monkeypatch.setattr(libcuda, "event_destroy", lambda event: None)
    return calls


def test_one_copy_of_every_array_back_to_back(driver):
    stage = staging.Int32Staging(0)
    rng = np.random.default_rng(0)
    arrays = [rng.integers(-5, 5, n).astype(np.int32) for n in (448, 65, 3)]
    views = stage.send(arrays)
    assert [v.numel() for v in views] == [448, 65, 3]
    assert np.array_equal(stage._host_array[:516], np.concatenate(arrays))
    assert driver == [("copy", 516 * 4, 1234), ("record", 99, 1234)]
    # the same layout again: the previous copy waited for first, the same views returned
    driver.clear()
    again = stage.send([a + 1 for a in arrays], non_blocking=False)
    assert [v.data_ptr() for v in again] == [v.data_ptr() for v in views]
    assert driver == [("sync", 99), ("copy", 516 * 4, 1234), ("record", 99, 1234), ("sync", 99)]
    assert np.array_equal(stage._host_array[:516], np.concatenate(arrays) + 1)


def test_large_arrays_and_growth(driver):
    stage = staging.Int32Staging(0)
    big = np.arange(staging.THREADED_COPY + 5, dtype=np.int32)  # (through torch's threaded copy)
    stage.send([np.array([1, 2], dtype=np.int32), big])
    assert np.array_equal(stage._host_array[2:2 + big.size], big)
    assert driver[0] == ("copy", (big.size + 2) * 4, 1234)


def test_a_fixed_buffer_refuses_to_grow(driver):
    stage = staging.Int32Staging(0, fixed=True)
    stage.send([np.zeros(100, dtype=np.int32)])
    stage.send([np.zeros(4096, dtype=np.int32)])  # (within the first allocation's 4096 entries)
    with pytest.raises(ValueError, match="grew to 5000 entries"):
        stage.send([np.zeros(5000, dtype=np.int32)])
