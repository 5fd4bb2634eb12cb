"""``flashinfer.page``'s names in cutefi (appending to a paged KV cache and its index helpers),
so ``from flashinfer.page import ...`` becomes ``from cutefi.page import ...``. They live in
the attention family (``cutefi/attention/api.py``) and are resolved on first use."""

from ._reexport import lazy_names

API = ("append_paged_kv_cache", "append_paged_mla_kv_cache", "get_batch_indices_positions", "get_seq_lens")

__all__ = ["API", *API]

__getattr__, __dir__ = lazy_names(__name__, "cutefi.attention.api", API)
