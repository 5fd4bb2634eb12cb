"""Prefill family: attention of many query tokens over a KV sequence (FlashInfer's
``single_prefill_with_kv_cache`` and its ragged and paged batch wrappers), on a Hopper CuTe DSL
kernel in FlashAttention-3's structure."""

API = ("single_prefill_with_kv_cache", "BatchPrefillWithRaggedKVCacheWrapper", "BatchPrefillWithPagedKVCacheWrapper")
