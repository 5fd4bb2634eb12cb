"""RoPE family: FlashInfer's rotary-embedding API (pos_ids, ragged indptr/offsets, Llama 3.1,
cos/sin cache) on one CuTe DSL kernel."""

API = ("apply_rope", "apply_rope_inplace", "apply_rope_pos_ids", "apply_rope_pos_ids_inplace",
       "apply_llama31_rope", "apply_llama31_rope_inplace", "apply_llama31_rope_pos_ids",
       "apply_llama31_rope_pos_ids_inplace", "apply_rope_with_cos_sin_cache",
       "apply_rope_with_cos_sin_cache_inplace")

# FlashInfer's module path for these names (``from cutefi.rope import ...``), resolved on first use
from .._reexport import lazy_names  # noqa: E402

__getattr__, __dir__ = lazy_names(__name__, f"{__name__}.api", API)
