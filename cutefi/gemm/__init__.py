"""Dense GEMM family: FlashInfer's ``mm_bf16`` / ``bmm_bf16`` (and fp16 twins) on a CuTe DSL
Hopper TMA + wgmma kernel."""

API = ("mm_bf16", "mm_fp16", "bmm_bf16", "bmm_fp16")
