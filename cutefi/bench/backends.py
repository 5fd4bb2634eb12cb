"""The implementations a routine can be timed with, and whether each is installed here."""

from __future__ import annotations

import importlib.util
from functools import cache

BACKENDS: dict[str, str] = {
    "cutefi": "cutefi's CuTe DSL kernels",
    "torch": "PyTorch eager",
    "torch.compile": "PyTorch inductor (torch.compile, one graph per shape)",
    "cudnn": "cuDNN, through torch's scaled_dot_product_attention",
    "flash": "FlashAttention-2, torch's own build (scaled_dot_product_attention's flash backend)",
    "cublas": "cuBLAS, through torch.matmul",
    "flashinfer": "FlashInfer (when importable)",
}


@cache
def missing_reason(backend: str) -> str | None:
    """Why ``backend`` cannot run on this machine, or None when it can."""
    import torch

    if backend not in BACKENDS:
        return f"unknown backend {backend!r}; known: {', '.join(BACKENDS)}"
    if backend == "torch.compile" and importlib.util.find_spec("triton") is None:
        return "torch.compile needs triton for GPU code, and triton is not installed"
    if backend == "cudnn":
        from torch.nn.attention import SDPBackend

        if not hasattr(SDPBackend, "CUDNN_ATTENTION") or not torch.backends.cudnn.is_available():
            return "this torch build has no cuDNN attention"
    if backend == "flash" and not torch.backends.cuda.is_flash_attention_available():
        return "this torch build has no flash attention"
    if backend == "flashinfer" and importlib.util.find_spec("flashinfer") is None:
        return "flashinfer is not installed (pip install flashinfer-python)"
    return None
