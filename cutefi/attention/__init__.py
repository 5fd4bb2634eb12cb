"""Attention family: merging attention states (FlashInfer's cascade merge ops), appending to a
paged KV cache and its index helpers; decode and prefill kernels build on them."""

API = ("merge_state", "merge_state_in_place", "merge_states", "append_paged_kv_cache", "get_seq_lens",
       "get_batch_indices_positions")
