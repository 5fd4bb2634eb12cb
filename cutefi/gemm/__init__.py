"""Dense GEMM family: FlashInfer's ``mm_bf16`` / ``bmm_bf16`` (and fp16 twins) and, with
per-tensor scales, ``bmm_fp8`` / ``mm_fp8``, with DeepSeek-style block scales,
``gemm_fp8_nt_groupwise`` / ``gemm_fp8_nt_blockscaled`` (and ``quantize_fp8`` to make their
inputs), grouped GEMMs in one launch (``SegmentGEMMWrapper``, ``group_gemm_fp8_nt_groupwise``), on CuTe DSL kernels (Hopper TMA + wgmma; mma.sync
elsewhere for 16-bit inputs)."""

API = ("mm_bf16", "mm_fp16", "bmm_bf16", "bmm_fp16", "bmm_fp8", "mm_fp8", "gemm_fp8_nt_groupwise",
       "gemm_fp8_nt_blockscaled", "quantize_fp8", "SegmentGEMMWrapper", "group_gemm_fp8_nt_groupwise")


def __getattr__(name: str):
    """FlashInfer's module path for the API names (``from cutefi.gemm import ...``), resolved on
    first use (the helper imported by name: it stays out of this family's kernel keys)."""
    import importlib

    return importlib.import_module("cutefi._reexport").resolve(__name__, API, name)
