"""Attention family: merging attention states (FlashInfer's cascade merge ops) and paged-KV
index helpers; decode and prefill kernels build on them."""

API = ("merge_state", "merge_state_in_place", "merge_states", "get_seq_lens", "get_batch_indices_positions")
