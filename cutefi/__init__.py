"""cutefi: GPU kernels for LLM inference, written in CuTe DSL, launched from cuda-python.

Importing cutefi imports neither the CuTe DSL compiler nor the CUDA driver; kernels are
found (pack → cache → build) and loaded on first use.
"""

from __future__ import annotations

import importlib
from typing import Any

from ._version import __version__

# public name -> "module:attribute", resolved on first access (keeps import cheap)
_EXPORTS = {
    "copy_": "cutefi.copy.copy:copy_",
    "tma_copy_": "cutefi.copy.tma_copy:tma_copy_",
    "fill_": "cutefi.utils.fill:fill_",
    "poison_": "cutefi.utils.fill:poison_",
    "rmsnorm": "cutefi.norm.rmsnorm:rmsnorm",
    "fused_add_rmsnorm": "cutefi.norm.rmsnorm:fused_add_rmsnorm",
    "gemma_rmsnorm": "cutefi.norm.rmsnorm:gemma_rmsnorm",
    "gemma_fused_add_rmsnorm": "cutefi.norm.rmsnorm:gemma_fused_add_rmsnorm",
    "layernorm": "cutefi.norm.layernorm:layernorm",
    "apply_rope": "cutefi.rope.rope:apply_rope",
    "apply_rope_inplace": "cutefi.rope.rope:apply_rope_inplace",
    "apply_rope_pos_ids": "cutefi.rope.rope:apply_rope_pos_ids",
    "apply_rope_pos_ids_inplace": "cutefi.rope.rope:apply_rope_pos_ids_inplace",
    "apply_llama31_rope": "cutefi.rope.rope:apply_llama31_rope",
    "apply_llama31_rope_inplace": "cutefi.rope.rope:apply_llama31_rope_inplace",
    "apply_llama31_rope_pos_ids": "cutefi.rope.rope:apply_llama31_rope_pos_ids",
    "apply_llama31_rope_pos_ids_inplace": "cutefi.rope.rope:apply_llama31_rope_pos_ids_inplace",
    "apply_rope_with_cos_sin_cache": "cutefi.rope.rope:apply_rope_with_cos_sin_cache",
    "apply_rope_with_cos_sin_cache_inplace": "cutefi.rope.rope:apply_rope_with_cos_sin_cache_inplace",
}

__all__ = ["__version__", *_EXPORTS]


def __getattr__(name: str) -> Any:
    target = _EXPORTS.get(name)
    if target is None:
        raise AttributeError(f"module 'cutefi' has no attribute {name!r}")
    module_name, _, attr = target.partition(":")
    value = getattr(importlib.import_module(module_name), attr)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
