"""Prefill family: attention of many query tokens over a KV sequence (FlashInfer's
``single_prefill_with_kv_cache`` and its ragged and paged batch wrappers), on a Hopper CuTe DSL
kernel in FlashAttention-3's structure."""

API = ("single_prefill_with_kv_cache", "BatchPrefillWithRaggedKVCacheWrapper", "BatchPrefillWithPagedKVCacheWrapper")

# FlashInfer's module path for these names (``from cutefi.prefill import ...``), resolved on first use
from .._reexport import lazy_names  # noqa: E402

__getattr__, __dir__ = lazy_names(__name__, f"{__name__}.api", API)
