"""RoPE family: FlashInfer's rotary-embedding API (pos_ids, ragged indptr/offsets, Llama 3.1,
cos/sin cache) on one CuTe DSL kernel, and RoPE + FP8 quantisation (``rope_quantize_fp8``, also
appending K/V to a paged cache) on another."""

API = ("apply_rope", "apply_rope_inplace", "apply_rope_pos_ids", "apply_rope_pos_ids_inplace",
       "apply_llama31_rope", "apply_llama31_rope_inplace", "apply_llama31_rope_pos_ids",
       "apply_llama31_rope_pos_ids_inplace", "apply_rope_with_cos_sin_cache",
       "apply_rope_with_cos_sin_cache_inplace", "rope_quantize_fp8", "mla_rope_quantize_fp8",
       "rope_quantize_fp8_append_paged_kv_cache")


def __getattr__(name: str):
    """FlashInfer's module path for the API names (``from cutefi.rope import ...``), resolved on
    first use (the helper imported by name: it stays out of this family's kernel keys)."""
    import importlib

    return importlib.import_module("cutefi._reexport").resolve(__name__, API, name)
