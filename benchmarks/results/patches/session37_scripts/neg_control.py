"""Negative control: the eviction test with the keep-alive disabled must fail (or crash)."""
import sys, pytest
from cutefi import _graph_cache

def drop(self):
    oldest = next(iter(self._entries))
    self._entries.pop(oldest)
    self._captured.discard(oldest)

_graph_cache.GraphSafeCache._evict_oldest = drop
sys.exit(pytest.main(["-q", "-p", "no:cacheprovider", "tests/test_gpu_prefill.py", "-k", "outlive"]))
