"""Attention family: decode attention over a paged KV cache (FlashInfer's decode wrappers),
merging attention states (its cascade merge ops), appending to a paged KV cache and its index
helpers."""

API = ("merge_state", "merge_state_in_place", "merge_states", "append_paged_kv_cache", "append_paged_mla_kv_cache",
       "get_seq_lens", "get_batch_indices_positions", "BatchDecodeWithPagedKVCacheWrapper",
       "CUDAGraphBatchDecodeWithPagedKVCacheWrapper", "single_decode_with_kv_cache", "fast_decode_plan")


def __getattr__(name: str):
    """FlashInfer's module path for the API names (``from cutefi.attention import ...``), resolved on
    first use (the helper imported by name: it stays out of this family's kernel keys)."""
    import importlib

    return importlib.import_module("cutefi._reexport").resolve(__name__, API, name)
