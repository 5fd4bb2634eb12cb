"""CPU tier: torch.compile support, API logging and capability queries of the public ops.

Dynamo traces public calls on fake CUDA tensors (no GPU needed) into one ``torch.ops.cutefi``
op each, with no graph break; every op's schema marks what it mutates. Logging is checked in
subprocesses (``CUTEFI_LOGLEVEL`` is read at import). The GPU tier (``test_gpu_compile.py``)
runs the compiled graphs and ``torch.library.opcheck``.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode

import cutefi

# op -> names of the arguments it writes
MUTATIONS = {
    "rmsnorm_out": {"out"}, "rmsnorm_inplace": {"input"}, "fused_add_rmsnorm": {"input", "residual"},
    "layernorm_out": {"out"}, "rope_inplace": {"q", "k"}, "rope_out": {"q_out", "k_out"},
    "rope_quantize_fp8": {"q_rope_out", "k_rope_out", "q_nope_out", "k_nope_out"},
    "rope_quantize_fp8_append_paged_kv_cache": {"cache_0", "cache_1", "q_rope_out", "q_nope_out"},
    "copy_into": {"dst"}, "tma_copy_into": {"dst"}, "fill_bits": {"tensor"},
    "rmsnorm_quant": {"out"}, "fused_add_rmsnorm_quant": {"out", "residual"}, "layernorm_quant": {"out"},
    "rmsnorm_silu": {"out"},
    "merge_state_out": {"v_out", "s_out"}, "merge_state_in_place": {"v", "s"}, "merge_states_out": {"v_out", "s_out"},
    "append_paged_kv_cache": {"k_cache", "v_cache"}, "append_paged_mla_kv_cache": {"ckv_cache", "kpe_cache"},
    "append_paged_kv_cache_fused": {"paged_kv_cache"},
    "batch_decode_out": {"out", "lse", "workspace", "counters"},
    "gemm_mm_into": {"out"}, "gemm_fp8_into": {"out"}, "gemm_fp8_groupwise_into": {"out"},
    "segment_gemm_into": {"out"}, "group_gemm_fp8_into": {"out"},
    "prefill_out": {"out", "lse", "counter"}, "single_prefill_out": {"out", "lse"},
    "paged_prefill_out": {"out", "lse", "counter"},
}


def decoder_block(x, residual, w, gamma, beta, q, k, pos, scratch, scale):
    """norm -> RoPE (both forms) -> fused add + norm -> layernorm -> copy -> poison."""
    h = cutefi.rmsnorm(x, w)
    q2, k2 = cutefi.apply_rope_pos_ids(q, k, pos)
    cutefi.apply_rope_pos_ids_inplace(q, k, pos)
    cutefi.fused_add_rmsnorm(h, residual, w, enable_pdl=True)
    cutefi.gemma_rmsnorm(h, w, out=h)
    y = cutefi.layernorm(h, gamma, beta)
    cutefi.copy_(scratch, y)
    cutefi.poison_(y)
    # FP8 outputs, float and tensor scales
    q8 = torch.empty(h.shape, dtype=torch.float8_e4m3fn, device=h.device)
    cutefi.rmsnorm_quant(q8, h, w, 0.5)
    cutefi.fused_add_rmsnorm_quant(q8, h, residual, w, scale)
    f8 = torch.empty(h.shape, dtype=torch.float8_e5m2, device=h.device)
    cutefi.layernorm_quant(f8, h, gamma, beta, 2.0)
    # RMSNorm + SiLU, into a new bf16 tensor and into an FP8 one
    a = cutefi.fused_rmsnorm_silu(h, w)
    cutefi.fused_rmsnorm_silu(h, w, 1e-5, out=q8)
    return q2 + q, k2 + k, scratch * 2 + q8.float() + f8.float() + a, residual


def _fake_inputs():
    cuda = dict(device="cuda")
    return (torch.randn(8, 256, dtype=torch.bfloat16, **cuda), torch.randn(8, 256, dtype=torch.bfloat16, **cuda),
            torch.randn(256, dtype=torch.bfloat16, **cuda), torch.randn(256, **cuda), torch.randn(256, **cuda),
            torch.randn(8, 4, 64, dtype=torch.bfloat16, **cuda), torch.randn(8, 2, 64, dtype=torch.bfloat16, **cuda),
            torch.arange(8, dtype=torch.int32, **cuda), torch.empty(8, 256, dtype=torch.bfloat16, **cuda),
            torch.full((1,), 0.25, **cuda))


def test_decoder_block_traces_into_cutefi_ops_without_a_graph_break():
    graphs = []

    def record(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    compiled = torch.compile(decoder_block, fullgraph=True, backend=record)  # fullgraph: a break raises
    with FakeTensorMode():
        outputs = compiled(*_fake_inputs())
    assert [tuple(t.shape) for t in outputs] == [(8, 4, 64), (8, 2, 64), (8, 256), (8, 256)]
    code = graphs[0].code
    for op in ("rmsnorm_out", "rope_out", "rope_inplace", "fused_add_rmsnorm", "rmsnorm_inplace", "layernorm_out",
               "copy_into", "fill_bits", "rmsnorm_quant", "fused_add_rmsnorm_quant", "layernorm_quant",
               "rmsnorm_silu"):
        assert f"torch.ops.cutefi.{op}" in code, f"{op} not recorded:\n{code}"
    assert code.count("torch.ops.cutefi.rmsnorm_silu") == 2
    assert "data_ptr" not in code


def attention_merges(v_a, s_a, v_b, s_b, stacked_v, stacked_s, mask):
    """Every merge op, in place and into new outputs (the index helpers are torch ops: traced as
    they are, run by the GPU tier)."""
    v, s = cutefi.merge_state(v_a, s_a, v_b, s_b)
    cutefi.merge_state_in_place(v_a, s_a, v_b, s_b, mask)
    v_all, s_all = cutefi.merge_states(stacked_v, stacked_s)
    # the appended rows into a paged cache, both cache forms ([pages, 2, page_size, heads, dim]
    # and a (k, v) pair), at the positions of the first tokens of one request
    cache = torch.zeros(2, 2, 4, v_a.shape[1], v_a.shape[2], dtype=v_a.dtype, device=v_a.device)
    index = torch.zeros(v_a.shape[0], dtype=torch.int32, device=v_a.device)
    positions = torch.arange(v_a.shape[0], dtype=torch.int32, device=v_a.device)
    pages = torch.arange(2, dtype=torch.int32, device=v_a.device)
    indptr = torch.arange(0, 3, 2, dtype=torch.int32, device=v_a.device)  # [0, 2]
    last = torch.full((1,), 4, dtype=torch.int32, device=v_a.device)
    cutefi.append_paged_kv_cache(v_b, v_b, index, positions, cache, pages, indptr, last)
    pair = tuple(torch.zeros(2, 4, v_a.shape[1], v_a.shape[2], dtype=v_a.dtype, device=v_a.device) for _ in "kv")
    cutefi.append_paged_kv_cache(v_b, v_b, index, positions, pair, pages, indptr, last)
    latent = [torch.zeros(2, 4, width, dtype=v_a.dtype, device=v_a.device) for width in (64, 16)]  # MLA's caches
    rows = [torch.randn(v_a.shape[0], width, dtype=v_a.dtype, device=v_a.device) for width in (64, 16)]
    cutefi.append_paged_mla_kv_cache(*rows, index, positions, *latent, pages, indptr, last)
    return v, s, v_all, s_all, cache, pair[0], latent[0]


def test_attention_merges_trace_without_a_graph_break():
    graphs = []

    def record(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    compiled = torch.compile(attention_merges, fullgraph=True, backend=record)
    cuda = dict(device="cuda")
    with FakeTensorMode():
        v = torch.randn(8, 4, 64, dtype=torch.bfloat16, **cuda)
        s = torch.randn(8, 4, **cuda)
        outputs = compiled(v, s, v.clone(), s.clone(), torch.randn(8, 3, 4, 64, dtype=torch.bfloat16, **cuda),
                           torch.randn(8, 3, 4, **cuda), torch.ones(8, dtype=torch.bool, **cuda))
    assert [tuple(t.shape) for t in outputs][:4] == [(8, 4, 64), (8, 4), (8, 4, 64), (8, 4)]
    code = graphs[0].code
    for op in ("merge_state_out", "merge_state_in_place", "merge_states_out", "append_paged_kv_cache",
               "append_paged_kv_cache_fused", "append_paged_mla_kv_cache"):
        assert f"torch.ops.cutefi.{op}" in code, f"{op} not recorded:\n{code}"


@pytest.mark.parametrize("op", sorted(MUTATIONS))
def test_schema_marks_what_the_op_writes(op):
    for name in cutefi.__all__:  # (each family defines its ops when its API module is imported)
        getattr(cutefi, name)
    schema = getattr(torch.ops.cutefi, op).default._schema
    written = {a.name for a in schema.arguments if a.alias_info is not None and a.alias_info.is_write}
    assert written == MUTATIONS[op]
    assert not schema.returns  # outputs are written in place: no aliasing return values


def test_fake_implementations_run_on_fake_tensors():
    with FakeTensorMode():
        x, residual, w, gamma, beta, q, k, pos, scratch, scale = _fake_inputs()
        torch.ops.cutefi.rmsnorm_out(scratch, x, w, 1e-6, False, None)
        torch.ops.cutefi.fused_add_rmsnorm(x, residual, w, 1e-6, True, False)
        torch.ops.cutefi.layernorm_out(scratch, x, gamma, beta, 1e-6)
        q8 = torch.empty(x.shape, dtype=torch.float8_e4m3fn, device=x.device)
        torch.ops.cutefi.rmsnorm_quant(q8, x, w, None, 0.5, 1e-6, None)
        torch.ops.cutefi.fused_add_rmsnorm_quant(q8, x, residual, w, scale, 0.0, 1e-6, True)
        torch.ops.cutefi.layernorm_quant(q8, x, gamma, beta, None, 2.0, 1e-6)
        torch.ops.cutefi.rmsnorm_silu(scratch, x, w, 1e-6, None)
        torch.ops.cutefi.rmsnorm_silu(q8, x, w, 1e-6, True)
        torch.ops.cutefi.rope_inplace(q, k, "pos_ids", pos, None, None, None, False, [1.0, 13.3, 0.0, 0.0], "q", "k")
        torch.ops.cutefi.copy_into(scratch, x)
        torch.ops.cutefi.fill_bits(scratch, 0x7FFF)
        s_q = torch.randn(q.shape[:2], device=q.device)
        torch.ops.cutefi.merge_state_out(q, s_q, q, s_q, torch.empty_like(q), torch.empty_like(s_q))
        torch.ops.cutefi.merge_state_in_place(q, s_q, q.clone(), s_q.clone(), None)
        torch.ops.cutefi.merge_states_out(q.unsqueeze(1), s_q.unsqueeze(1), torch.empty_like(q), torch.empty_like(s_q))
        pages = torch.zeros(3, 2, 16, 4, 64, dtype=q.dtype, device=q.device)
        index = torch.zeros(8, dtype=torch.int32, device=q.device)
        small = [torch.zeros(n, dtype=torch.int32, device=q.device) for n in (3, 2, 1)]  # indices, indptr, last
        torch.ops.cutefi.append_paged_kv_cache_fused(q, q, index, index, pages, *small, "NHD")


def test_capability_queries():
    for name in cutefi.__all__:
        if name == "__version__":
            continue
        function = getattr(cutefi, name)
        assert callable(function.is_compute_capability_supported), name
        assert function.is_compute_capability_supported(90) and function.is_compute_capability_supported((9, 0))
        assert function.supported_dtypes
    assert cutefi.rmsnorm.is_compute_capability_supported(80)
    assert not cutefi.tma_copy_.is_compute_capability_supported(89)  # TMA and clusters: sm_90+
    assert not cutefi.rmsnorm.is_compute_capability_supported(70)
    with pytest.raises(TypeError, match="cc must be"):
        cutefi.rmsnorm.is_compute_capability_supported("9.0")


def _run(code: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={**os.environ, **env}, timeout=120)


_CALL = ("import torch, cutefi\n"
         "x = torch.randn(3, 64, dtype=torch.bfloat16); w = torch.ones(64, dtype=torch.bfloat16)\n"
         "try:\n    cutefi.rmsnorm(x, w, eps=1e-5)\nexcept ValueError as e:\n    print('refused:', e)\n")


@pytest.mark.parametrize("level, expected, absent", [
    ("1", ["[cutefi] cutefi.rmsnorm"], ["shape="]),
    ("3", ["cutefi.rmsnorm(input=Tensor(shape=(3, 64), dtype=bfloat16, stride=(64, 1), device=cpu)", "eps=1e-05"],
     ["min="]),
    ("5", ["min=", "nan=0 inf=0"], []),
])
def test_log_levels_write_before_the_call(tmp_path, level, expected, absent):
    log = tmp_path / "cutefi.log"
    done = _run(_CALL, CUTEFI_LOGLEVEL=level, CUTEFI_LOGDEST=str(log))
    assert "refused: input must be on a CUDA device" in done.stdout, done.stderr
    text = log.read_text()  # written before the call failed
    for fragment in expected:
        assert fragment in text, text
    for fragment in absent:
        assert fragment not in text, text


def test_level_zero_leaves_the_functions_undecorated():
    done = _run("import cutefi, cutefi.norm.api as api\n"
                "print(cutefi.rmsnorm is api.rmsnorm, hasattr(cutefi.rmsnorm, '__wrapped__'))",
                CUTEFI_LOGLEVEL="0")
    assert done.stdout.split() == ["True", "False"], done.stderr


def test_a_bad_log_level_names_the_variable():
    done = _run("import cutefi; cutefi.rmsnorm", CUTEFI_LOGLEVEL="verbose")
    assert done.returncode != 0 and "CUTEFI_LOGLEVEL must be one of (0, 1, 3, 5)" in done.stderr
