"""``flashinfer.decode``'s names in cutefi (decode attention over a paged KV cache), so
``from flashinfer.decode import ...`` becomes ``from cutefi.decode import ...``. They live in
the attention family (``cutefi/attention/api.py``) and are resolved on first use."""

from ._reexport import lazy_names

API = ("BatchDecodeWithPagedKVCacheWrapper", "CUDAGraphBatchDecodeWithPagedKVCacheWrapper",
       "single_decode_with_kv_cache", "fast_decode_plan")

__all__ = ["API", *API]

__getattr__, __dir__ = lazy_names(__name__, "cutefi.attention.api", API)
