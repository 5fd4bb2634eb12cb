"""Attention family: decode attention over a paged KV cache (FlashInfer's decode wrappers),
merging attention states (its cascade merge ops), appending to a paged KV cache and its index
helpers."""

API = ("merge_state", "merge_state_in_place", "merge_states", "append_paged_kv_cache", "get_seq_lens",
       "get_batch_indices_positions", "BatchDecodeWithPagedKVCacheWrapper",
       "CUDAGraphBatchDecodeWithPagedKVCacheWrapper", "single_decode_with_kv_cache", "fast_decode_plan")

# FlashInfer's module path for these names (``from cutefi.attention import ...``), resolved on first use
from .._reexport import lazy_names  # noqa: E402

__getattr__, __dir__ = lazy_names(__name__, f"{__name__}.api", API)
