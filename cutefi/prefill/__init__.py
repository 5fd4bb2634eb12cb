"""Prefill family: attention of many query tokens over a KV sequence (FlashInfer's
``single_prefill_with_kv_cache`` and ``BatchPrefillWithRaggedKVCacheWrapper``), on a Hopper
CuTe DSL kernel in FlashAttention-3's structure."""

API = ("single_prefill_with_kv_cache", "BatchPrefillWithRaggedKVCacheWrapper")
