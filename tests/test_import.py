"""`import cutefi` and a cached lookup never import the CuTe DSL compiler."""

import subprocess
import sys


def _run(code: str, env_extra: dict | None = None) -> str:
    import os

    env = dict(os.environ, **(env_extra or {}))
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env).stdout


def test_import_does_not_import_cutlass():
    out = _run("import sys, cutefi; print(any(m == 'cutlass' or m.startswith('cutlass.') for m in sys.modules))")
    assert out.strip() == "False"


def test_import_does_not_import_torch_or_the_driver():
    out = _run("import sys, cutefi; print('torch' in sys.modules, 'cuda.bindings.driver' in sys.modules)")
    assert out.strip() == "False False"


def test_cached_lookup_does_not_import_cutlass(tmp_path):
    code = (
        "import sys\n"
        "from cutefi.jit.lookup import find_artifact\n"
        "from cutefi.jit.targets import Target\n"
        "from cutefi.copy.launch import COPY_SPEC\n"
        "find_artifact(COPY_SPEC, Target(9, 0))\n"
        "print('cutlass' in sys.modules)\n"
    )
    env = {"CUTEFI_CACHE_DIR": str(tmp_path)}
    from cutefi.jit.toolchain import dsl_version

    if dsl_version() is None:
        import pytest

        pytest.skip("needs CuTe DSL to fill the cache first")
    assert _run(code, env).strip() == "True"   # cold: this process had to build
    assert _run(code, env).strip() == "False"  # warm: loaded from the cache only


def test_public_names_resolve_lazily():
    out = _run("import sys, cutefi; f = cutefi.copy_; print(callable(f), 'cutlass' in sys.modules)")
    assert out.strip() == "True False"


# FlashInfer's module of each of its names that cutefi provides: servers import them from there
FLASHINFER_MODULES = {
    "norm": ("rmsnorm", "fused_add_rmsnorm", "gemma_rmsnorm", "gemma_fused_add_rmsnorm", "layernorm",
             "rmsnorm_quant", "fused_add_rmsnorm_quant", "layernorm_quant", "fused_rmsnorm_silu"),
    "rope": ("apply_rope", "apply_rope_inplace", "apply_rope_pos_ids", "apply_rope_pos_ids_inplace",
             "apply_llama31_rope", "apply_llama31_rope_inplace", "apply_llama31_rope_pos_ids",
             "apply_llama31_rope_pos_ids_inplace", "apply_rope_with_cos_sin_cache",
             "apply_rope_with_cos_sin_cache_inplace", "rope_quantize_fp8", "mla_rope_quantize_fp8",
             "rope_quantize_fp8_append_paged_kv_cache"),
    "decode": ("BatchDecodeWithPagedKVCacheWrapper", "CUDAGraphBatchDecodeWithPagedKVCacheWrapper",
               "single_decode_with_kv_cache", "fast_decode_plan"),
    "cascade": ("merge_state", "merge_state_in_place", "merge_states"),
    "page": ("append_paged_kv_cache", "append_paged_mla_kv_cache", "get_batch_indices_positions", "get_seq_lens"),
    "prefill": ("single_prefill_with_kv_cache", "BatchPrefillWithRaggedKVCacheWrapper",
                "BatchPrefillWithPagedKVCacheWrapper"),
    "gemm": ("mm_bf16", "bmm_bf16", "bmm_fp8", "mm_fp8", "gemm_fp8_nt_groupwise", "group_gemm_fp8_nt_groupwise",
             "SegmentGEMMWrapper"),
}


def test_names_import_from_flashinfers_module_paths():
    """``from flashinfer.norm import fused_add_rmsnorm`` (SGLang's form) works with cutefi in
    place of flashinfer, for every module and name, giving the top-level objects, and importing
    the modules loads no CuTe DSL."""
    imports = "\n".join(f"from cutefi.{module} import {', '.join(names)}" for module, names in FLASHINFER_MODULES.items())
    checks = " and ".join(f"{name} is cutefi.{name}" for names in FLASHINFER_MODULES.values() for name in names)
    code = (f"import sys, cutefi\n{imports}\n"
            f"print({checks}, any(m == 'cutlass' or m.startswith('cutlass.') for m in sys.modules))\n")
    assert _run(code).strip() == "True False"


def test_unknown_names_in_the_alias_modules_raise_attribute_errors():
    import importlib

    import pytest

    for module in FLASHINFER_MODULES:
        with pytest.raises((AttributeError, ImportError)):
            getattr(importlib.import_module(f"cutefi.{module}"), "MultiLevelCascadeAttentionWrapper")
