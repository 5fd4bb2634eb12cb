"""Norm family: RMSNorm (plain, fused add, Gemma) and LayerNorm on one CuTe DSL row-norm kernel."""

API = ("rmsnorm", "fused_add_rmsnorm", "gemma_rmsnorm", "gemma_fused_add_rmsnorm", "layernorm")
