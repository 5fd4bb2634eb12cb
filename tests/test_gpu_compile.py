"""GPU tier: compiled graphs with cutefi ops match eager, and ``torch.library.opcheck`` passes.

The decoder block is the CPU tier's (``test_compile.py``); here it runs, eager and compiled
with inductor and ``fullgraph=True``, on the same fresh inputs.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch

import cutefi


from test_compile import MUTATIONS, decoder_block

pytestmark = pytest.mark.gpu


@pytest.fixture(autouse=True, scope="module")
def _ops_registered():
    """Each family defines its torch.ops.cutefi ops on import: import them all (a test run
    alone must not depend on other tests having called the public functions first)."""
    import cutefi

    for name in cutefi.__all__:
        getattr(cutefi, name)


def _inputs(seed: int = 0):
    torch.manual_seed(seed)
    cuda = dict(device="cuda")
    return [torch.randn(64, 1024, dtype=torch.bfloat16, **cuda), torch.randn(64, 1024, dtype=torch.bfloat16, **cuda),
            torch.rand(1024, dtype=torch.bfloat16, **cuda) + 0.5, torch.rand(1024, **cuda) + 0.5,
            torch.randn(1024, **cuda), torch.randn(64, 8, 128, dtype=torch.bfloat16, **cuda),
            torch.randn(64, 2, 128, dtype=torch.bfloat16, **cuda), torch.arange(64, dtype=torch.int32, **cuda) * 7,
            torch.empty(64, 1024, dtype=torch.bfloat16, **cuda), torch.full((1,), 0.25, **cuda)]


def test_compiled_decoder_block_matches_eager():
    eager_inputs = _inputs()
    compiled_inputs = [t.clone() for t in eager_inputs]
    expected = decoder_block(*eager_inputs)
    compiled = torch.compile(decoder_block, fullgraph=True)
    got = compiled(*compiled_inputs)
    torch.cuda.synchronize()
    for name, want, have in zip(("q", "k", "scratch", "residual"), expected, got):
        assert torch.equal(want, have), f"{name}: compiled differs from eager"
    # the in-place ops also wrote the compiled graph's inputs as they do in eager
    for want, have in zip(eager_inputs, compiled_inputs):
        assert torch.equal(want, have)


def test_compiled_attention_merges_match_eager():
    from test_compile import attention_merges

    def merges_and_index_helpers(*args):
        merged = attention_merges(*args)
        indptr = torch.arange(0, 9, 2, device=args[0].device, dtype=torch.int32)
        lens = cutefi.get_seq_lens(indptr, torch.full((4,), 3, device=indptr.device, dtype=torch.int32), 16)
        batch, positions = cutefi.get_batch_indices_positions(indptr, lens, 8)
        return (*merged, batch, positions)

    torch.manual_seed(2)
    cuda = dict(device="cuda")
    inputs = [torch.randn(8, 4, 64, dtype=torch.bfloat16, **cuda), torch.randn(8, 4, **cuda),
              torch.randn(8, 4, 64, dtype=torch.bfloat16, **cuda), torch.randn(8, 4, **cuda),
              torch.randn(8, 3, 4, 64, dtype=torch.bfloat16, **cuda), torch.randn(8, 3, 4, **cuda),
              torch.arange(8, **cuda) % 2 == 0]
    copies = [t.clone() for t in inputs]
    expected = merges_and_index_helpers(*inputs)
    got = torch.compile(merges_and_index_helpers, fullgraph=True)(*copies)
    for want, have in zip(expected, got):
        assert torch.equal(want, have)
    for want, have in zip(inputs, copies):  # the in-place merge wrote the graph's inputs too
        assert torch.equal(want, have)


def test_compiled_fp8_and_grouped_gemms_match_eager():
    """quantize_fp8 -> gemm_fp8_nt_groupwise, group_gemm_fp8_nt_groupwise and a segment GEMM in
    one torch.compile(fullgraph=True) graph, against eager on the same inputs."""
    if torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("FP8 and grouped GEMMs: Hopper only")
    seg = cutefi.SegmentGEMMWrapper(torch.empty(1 << 20, dtype=torch.int8, device="cuda"))

    def moe_block(x, w, experts, indptr):
        a, a_scale = cutefi.quantize_fp8(x, group_shape=(1, 128))
        b, b_scale = cutefi.quantize_fp8(w, group_shape=(128, 128))
        dense = cutefi.gemm_fp8_nt_groupwise(a, b, a_scale, b_scale, "K")
        grouped = cutefi.group_gemm_fp8_nt_groupwise(a, torch.stack([b, b]), a_scale, torch.stack([b_scale, b_scale]),
                                                     indptr, scale_major_mode="K")
        lora = seg.run(x.to(torch.bfloat16), experts, 2, True, seg_indptr=indptr)
        return dense, grouped, lora

    gen = torch.Generator(device="cuda").manual_seed(9)
    x = torch.randn(96, 256, device="cuda", generator=gen)
    w = torch.randn(128, 256, device="cuda", generator=gen)
    experts = torch.randn(2, 64, 256, device="cuda", dtype=torch.bfloat16, generator=gen)
    indptr = torch.tensor([0, 40, 96], dtype=torch.int32, device="cuda")
    expected = moe_block(x, w, experts, indptr)
    got = torch.compile(moe_block, fullgraph=True)(x, w, experts, indptr)
    for want, have in zip(expected, got):
        assert torch.equal(want, have)


def _samples():
    x, residual, w, gamma, beta, q, k, pos, scratch, scale = _inputs(1)
    scalars = [1.0, 13.287712379549449, 0.0, 0.0]
    s_q = torch.randn(q.shape[:2], device=q.device)  # the log-sum-exps of q as attention states
    w2 = torch.randn(32, x.shape[1], dtype=x.dtype, device=x.device)  # an nn.Linear weight [N, K]
    return {
        "rmsnorm_out": (scratch, x, w, 1e-6, False, None),
        "rmsnorm_inplace": (x.clone(), w, 1e-6, True, True),
        "fused_add_rmsnorm": (x.clone(), residual.clone(), w, 1e-6, False, False),
        "layernorm_out": (scratch.clone(), x, gamma, beta, 1e-6),
        "rope_inplace": (q.clone(), k.clone(), "pos_ids", pos, None, None, None, False, scalars, "q", "k"),
        "rope_out": (q, k, torch.empty_like(q), torch.empty_like(k), "pos_ids", pos, None, None, 64, True, scalars,
                     "q", "k"),
        "copy_into": (scratch.clone(), x),
        "tma_copy_into": (scratch.clone(), x),
        "fill_bits": (scratch.clone(), 0x7FFF),
        "rmsnorm_quant": (torch.empty(x.shape, dtype=torch.float8_e4m3fn, device=x.device), x, w, None, 0.5, 1e-6,
                          None),
        "fused_add_rmsnorm_quant": (torch.empty(x.shape, dtype=torch.float8_e5m2, device=x.device), x,
                                    residual.clone(), w, scale, 0.0, 1e-6, True),
        "layernorm_quant": (torch.empty(x.shape, dtype=torch.float8_e4m3fn, device=x.device), x, gamma, beta, None,
                            2.0, 1e-6),
        "rmsnorm_silu": (torch.empty(x.shape, dtype=torch.float8_e4m3fn, device=x.device), x, w, 1e-6, None),
        "merge_state_out": (q, s_q, q * 2, s_q + 1, torch.empty_like(q), torch.empty_like(s_q)),
        "merge_state_in_place": (q.clone(), s_q.clone(), q * 2, s_q - 1, (pos % 3 == 0)),
        "merge_states_out": (torch.stack([q, q * 2, -q], 1), torch.stack([s_q, s_q + 1, s_q - 2], 1),
                             torch.empty_like(q), torch.empty_like(s_q)),
        "append_paged_kv_cache": (k, k * 2, *_append_indices(k), torch.zeros(8, 16, 2, 128, dtype=k.dtype, device=k.device),
                                  torch.zeros(8, 16, 2, 128, dtype=k.dtype, device=k.device),
                                  *_append_pages(k), "NHD"),
        "append_paged_mla_kv_cache": (k[:, 0], k[:, 1, :64], *_append_indices(k),
                                      torch.zeros(8, 16, 128, dtype=k.dtype, device=k.device),
                                      torch.zeros(8, 16, 64, dtype=k.dtype, device=k.device), *_append_pages(k)),
        "append_paged_kv_cache_fused": (k, k * 2, *_append_indices(k),
                                        torch.zeros(8, 2, 2, 16, 128, dtype=k.dtype, device=k.device),
                                        *_append_pages(k), "HND"),
        "batch_decode_out": _decode_args(k.device),
        "gemm_mm_into": (x[:16], w2.t(), None, False, torch.empty(16, 32, dtype=x.dtype, device=x.device), "bf16"),
        "gemm_fp8_into": (x[:16].to(torch.float8_e4m3fn), w2.to(torch.float8_e4m3fn).t(), scale, None,
                          torch.empty(16, 32, dtype=x.dtype, device=x.device)),
        "gemm_fp8_groupwise_into": (x[:16].to(torch.float8_e4m3fn), w2.to(torch.float8_e4m3fn),
                                    torch.rand(16, -(-x.shape[1] // 128), device=x.device) + 0.5,
                                    torch.rand(-(-x.shape[1] // 128), 1, device=x.device) + 0.5,
                                    None, 1, torch.empty(16, w2.shape[0], dtype=x.dtype, device=x.device)),
        "segment_gemm_into": (x[:24], torch.stack([w2, -w2]), torch.tensor([0, 5, 24], dtype=torch.int32,
                                                                            device=x.device),
                              torch.tensor([1, 0], dtype=torch.int32, device=x.device), True,
                              torch.empty(24, w2.shape[0], dtype=x.dtype, device=x.device)),
        "group_gemm_fp8_into": (x[:24].to(torch.float8_e4m3fn), torch.stack([w2, -w2]).to(torch.float8_e4m3fn),
                                torch.rand(24, -(-x.shape[1] // 128), device=x.device) + 0.5,
                                torch.rand(2, 1, -(-x.shape[1] // 128), device=x.device) + 0.5,
                                torch.tensor([0, 5, 24], dtype=torch.int32, device=x.device), "K",
                                torch.empty(24, w2.shape[0], dtype=x.dtype, device=x.device)),
        "rope_quantize_fp8": (q[..., :64], k[..., :64], q[..., 64:], k[..., 64:],
                              torch.randn(512, 64, device=q.device), pos,
                              *(torch.empty(t.shape[:2] + (64,), dtype=torch.float8_e4m3fn, device=q.device)
                                for t in (q, k, q, k)), False, 0.5, 2.0, False),
        "rope_quantize_fp8_append_paged_kv_cache": (
            q[..., :64], k[..., :64], q[..., 64:], k[..., 64:], k, torch.randn(512, 64, device=q.device), pos,
            *(torch.empty(8, 16, 2, 128, dtype=torch.float8_e4m3fn, device=q.device) for _ in "kv"),
            *_append_pages(k)[:2], torch.zeros(64, dtype=torch.int32, device=q.device),
            torch.arange(64, dtype=torch.int32, device=q.device),
            *(torch.empty(64, 8, 64, dtype=torch.float8_e4m3fn, device=q.device) for _ in "qn"),
            True, 0.5, 2.0, 16, "NHD", False),
        **_prefill_args(),
    }


def _op_args(module, op_name: str, call) -> tuple:
    """The arguments a public call hands its torch op, as torch.compile records them: ``call()``
    runs with ``module``'s ``compiling()`` true and the op replaced by a recorder."""
    seen = {}
    op, compiling = getattr(module, op_name), module.compiling
    setattr(module, op_name, lambda *args: seen.setdefault("args", args))
    module.compiling = lambda: True
    try:
        call()
    finally:
        setattr(module, op_name, op)
        module.compiling = compiling
    return seen["args"]


def _prefill_args() -> dict[str, tuple]:
    """The three prefill ops' arguments: a single request (77 q over 333 kv tokens), a ragged
    batch and a paged one (16-token pages), causal, 4 q heads on 2 kv heads, head_dim 128."""
    from cutefi.prefill import api, paged
    from test_gpu_prefill import _qkv, _ragged
    from test_gpu_prefill_paged import _paged

    q, k, v = _qkv(77, 333, 4, 2, 128, torch.bfloat16, seed=5)
    single = _op_args(api, "_SINGLE_OP", lambda: cutefi.single_prefill_with_kv_cache(q, k, v, causal=True,
                                                                                     return_lse=True))
    rq, rk, rv, qo_indptr, kv_indptr = _ragged([40, 37], [150, 183], 4, 2, 128, torch.bfloat16, seed=6)
    ragged = cutefi.BatchPrefillWithRaggedKVCacheWrapper(torch.empty(1 << 20, dtype=torch.uint8, device="cuda"))
    ragged.plan(qo_indptr, kv_indptr, 4, 2, 128, causal=True, q_data_type=torch.bfloat16)
    ragged_args = _op_args(api, "RAGGED_OP", lambda: ragged.run(rq, rk, rv, return_lse=True))
    pq, _, _, qo_indptr, _, cache, page_indptr, indices, last = _paged([17, 30], [40, 301], 4, 2, 128, 16, "NHD", 7)
    wrapper = cutefi.BatchPrefillWithPagedKVCacheWrapper(torch.empty(1 << 20, dtype=torch.uint8, device="cuda"))
    wrapper.plan(qo_indptr, page_indptr, indices, last, 4, 2, 128, 16, causal=True, q_data_type=torch.bfloat16)
    paged_args = _op_args(paged, "PAGED_OP", lambda: wrapper.run(pq, cache, return_lse=True))
    return {"single_prefill_out": single, "prefill_out": ragged_args, "paged_prefill_out": paged_args}


def _decode_args(device):
    """A planned decode (two requests, 37 and 3000 tokens, 8 q heads on 2 kv heads, split over
    the SMs) as the op's arguments."""
    from test_gpu_decode import make_batch

    kv, k_cache, v_cache, indptr, indices, last = make_batch([37, 3000], 16, 2, 128, torch.bfloat16)
    wrapper = cutefi.BatchDecodeWithPagedKVCacheWrapper(torch.empty(8 << 20, dtype=torch.uint8, device=device))
    wrapper.plan(indptr, indices, last, 8, 2, 128, 16, q_data_type=torch.bfloat16)
    plan = wrapper._plan
    from cutefi.attention.decode_ops import SIZES

    q = torch.randn(2, 8, 128, device=device, dtype=torch.bfloat16)
    return (q, k_cache, v_cache, torch.empty_like(q), torch.empty(2, 8, device=device), None, wrapper._workspace,
            plan["work"], plan["state_indptr"], plan["kv_indices"], plan["counters"], "NHD",
            [plan[key] for key in SIZES], [0.1275, 0.0, 1.0, 1.0, 0.0], False)


def _append_indices(k):
    """batch_indices, positions: the 64 tokens of k appended to one request."""
    return (torch.zeros(k.shape[0], dtype=torch.int32, device=k.device),
            torch.arange(k.shape[0], dtype=torch.int32, device=k.device))


def _append_pages(k):
    """kv_indices, kv_indptr, kv_last_page_len: one request over pages 7, 6, 5, 4 of 8 (16 entries)."""
    cuda = dict(dtype=torch.int32, device=k.device)
    return torch.arange(7, 3, -1, **cuda), torch.tensor([0, 4], **cuda), torch.tensor([16], **cuda)


@pytest.mark.parametrize("op", sorted(MUTATIONS))
def test_opcheck(op):
    if op == "tma_copy_into" and torch.cuda.get_device_capability()[0] < 9:
        pytest.skip("TMA needs sm_90+")
    args = _samples()[op]
    if op.endswith("_quant") or op.startswith(("gemm_fp8", "rope_quantize_fp8")) or op in ("group_gemm_fp8_into",
                                                                                                   "rmsnorm_silu"):
        # opcheck's schema test compares outputs with torch ops that have no FP8 kernels; the
        # mutation annotations are checked by hand instead: what is not marked is not written
        torch.library.opcheck(getattr(torch.ops.cutefi, op).default, args,
                              test_utils=("test_faketensor", "test_autograd_registration", "test_aot_dispatch_dynamic"))
        written = MUTATIONS[op]
        names = [a.name for a in getattr(torch.ops.cutefi, op).default._schema.arguments]
        before = {n: a.clone() for n, a in zip(names, args) if isinstance(a, torch.Tensor)}
        for name, tensor in zip(names, args):  # (FP8 outputs poisoned: a written one must change)
            if name == "out" or (name.endswith("_out") or name.startswith("cache_")) and tensor.element_size() == 1:
                tensor.view(torch.uint8).fill_(0x7F)
                before[name] = tensor.clone()
        getattr(torch.ops.cutefi, op)(*args)
        torch.cuda.synchronize()
        for name, tensor in zip(names, args):
            if isinstance(tensor, torch.Tensor):
                same = torch.equal(tensor.view(torch.uint8), before[name].view(torch.uint8)) \
                    if tensor.element_size() == 1 else torch.equal(tensor, before[name])
                assert same == (name not in written), f"{op}: {name} {'unchanged' if same else 'written'}"
        return
    torch.library.opcheck(getattr(torch.ops.cutefi, op).default, args)


def test_opcheck_rmsnorm_silu_into_bf16():
    """RMSNorm + SiLU into a bf16 ``out`` (test_opcheck's sample writes FP8): every opcheck test."""
    x, _, w, *_, scratch, _ = _inputs(1)
    torch.library.opcheck(torch.ops.cutefi.rmsnorm_silu.default, (scratch.clone(), x, w, 1e-6, True))


def test_opcheck_layernorm_with_16bit_gamma_and_beta():
    """LayerNorm's 16-bit gamma/beta (run on fp32 copies): the op's schema, fake and mutation checks."""
    _, _, _, gamma, beta, _, _, _, scratch, _ = _inputs(1)
    x = torch.randn(scratch.shape, device="cuda").to(scratch.dtype)
    torch.library.opcheck(torch.ops.cutefi.layernorm_out.default,
                          (scratch.clone(), x, gamma.to(torch.bfloat16), beta.to(torch.float16), 1e-6))


def test_level_five_skips_statistics_during_graph_capture():
    code = ("import torch, cutefi\n"
            "x = torch.randn(4, 256, device='cuda', dtype=torch.bfloat16); w = torch.ones(256, device='cuda', dtype=torch.bfloat16)\n"
            "y = torch.empty_like(x); cutefi.rmsnorm(x, w, out=y); torch.cuda.synchronize()\n"
            "g = torch.cuda.CUDAGraph()\n"
            "with torch.cuda.graph(g):\n    cutefi.rmsnorm(x, w, out=y)\n"
            "g.replay(); torch.cuda.synchronize(); print('ok')\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "CUTEFI_LOGLEVEL": "5", "CUTEFI_LOGDEST": "stdout"})
    assert done.returncode == 0, done.stderr
    assert "min=" in done.stdout and "statistics skipped: CUDA graph capture" in done.stdout
    assert "cubin from" in done.stdout  # level 3+: where the kernel came from
