"""GraphSafeCache: bounded, oldest first, and what a CUDA graph captured stays alive (CPU)."""

from __future__ import annotations

import gc
import weakref

import pytest
import torch

from cutefi._graph_cache import GraphSafeCache


class _Array:  # a stand-in for a device tensor: weak-referenceable
    def __init__(self, name: str) -> None:
        self.name = name


@pytest.fixture
def capturing(monkeypatch):
    state = {"on": False}
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: state["on"])
    return state


def test_evicts_oldest_one_at_a_time(capturing):
    cache = GraphSafeCache(3)
    made = []
    for key in "abcd":
        cache.get(key, lambda key=key: made.append(key) or _Array(key))
    assert len(cache) == 3 and made == list("abcd")
    cache.get("b", lambda: pytest.fail("b was evicted"))  # only the oldest ("a") went
    cache.get("a", lambda: _Array("a2"))
    assert len(cache) == 3


def test_captured_entries_stay_alive_after_eviction(capturing):
    cache = GraphSafeCache(2)
    capturing["on"] = True
    captured = weakref.ref(cache.get("graph", lambda: _Array("graph")))
    capturing["on"] = False
    plain = weakref.ref(cache.get("plain", lambda: _Array("plain")))
    for key in range(4):  # both evicted
        cache.get(key, lambda key=key: _Array(str(key)))
    gc.collect()
    assert captured() is not None, "an array a graph captured was freed"
    assert plain() is None, "an array no graph captured was kept"


def test_made_before_and_used_during_capture_is_kept(capturing):
    cache = GraphSafeCache(1)
    first = weakref.ref(cache.get("x", lambda: _Array("x")))
    capturing["on"] = True
    cache.get("x", lambda: pytest.fail("x was cached"))
    capturing["on"] = False
    cache.get("y", lambda: _Array("y"))
    gc.collect()
    assert first() is not None


def test_limit_must_be_positive():
    with pytest.raises(ValueError, match="limit"):
        GraphSafeCache(0)


def test_a_refused_make_evicts_nothing(capturing):
    cache = GraphSafeCache(1)
    cache.get("kept", lambda: _Array("kept"))

    def refuse():
        raise RuntimeError("no plan during capture")

    with pytest.raises(RuntimeError, match="no plan"):
        cache.get("new", refuse)
    cache.get("kept", lambda: pytest.fail("kept was evicted by a refused make"))
