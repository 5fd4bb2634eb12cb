"""Norm family: RMSNorm (plain, fused add, Gemma, + SiLU) and LayerNorm, and their FP8-quantising
variants, on one CuTe DSL row-norm kernel."""

API = ("rmsnorm", "fused_add_rmsnorm", "gemma_rmsnorm", "gemma_fused_add_rmsnorm", "layernorm",
       "rmsnorm_quant", "fused_add_rmsnorm_quant", "layernorm_quant", "fused_rmsnorm_silu")

# the packed-rows RMSNorm builds and the long-row builds register with the row-norm ones
# (registry.all_specs imports this package's launch module, so this package first)
from . import long_rows, packed  # noqa: E402,F401

__all__ = ["API", "long_rows", "packed", *API]


def __getattr__(name: str):
    """FlashInfer's module path for the API names (``from cutefi.norm import ...``), resolved on
    first use (the helper imported by name: it stays out of this family's kernel keys)."""
    import importlib

    return importlib.import_module("cutefi._reexport").resolve(__name__, API, name)
