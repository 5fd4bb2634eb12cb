"""Prefill family: attention of many query tokens over a KV sequence (FlashInfer's
``single_prefill_with_kv_cache`` and its ragged and paged batch wrappers), on a Hopper CuTe DSL
kernel in FlashAttention-3's structure."""

API = ("single_prefill_with_kv_cache", "single_prefill_with_kv_cache_return_lse", "BatchPrefillWithRaggedKVCacheWrapper",
       "BatchPrefillWithPagedKVCacheWrapper")


def __getattr__(name: str):
    """FlashInfer's module path for the API names (``from cutefi.prefill import ...``), resolved on
    first use (the helper imported by name: it stays out of this family's kernel keys)."""
    import importlib

    return importlib.import_module("cutefi._reexport").resolve(__name__, API, name)
