"""Bad input is refused with a clear exception before anything reaches a GPU."""

import pytest
import torch

import cutefi


def test_cpu_tensors_are_refused():
    x = torch.randn(64)
    with pytest.raises(ValueError, match="src must be on a CUDA device"):
        cutefi.copy_(torch.empty_like(x), x)
    with pytest.raises(ValueError, match="src must be on a CUDA device"):
        cutefi.tma_copy_(torch.empty(8, 8), torch.randn(8, 8))
    with pytest.raises(ValueError, match="tensor must be on a CUDA device"):
        cutefi.fill_(x, 0)


def _cpu_calls():
    """One otherwise valid call of every public op, on CPU tensors, and the argument it must name."""
    bf16, i32 = torch.bfloat16, torch.int32
    x, w, r = torch.randn(4, 64).to(bf16), torch.randn(64).to(bf16), torch.randn(4, 64).to(bf16)
    q, k, pos = torch.randn(8, 4, 64).to(bf16), torch.randn(8, 2, 64).to(bf16), torch.arange(8, dtype=i32)
    indptr, offsets = torch.tensor([0, 3, 8], dtype=i32), torch.tensor([0, 5], dtype=i32)
    cache = torch.randn(128, 64)
    return {
        "copy_": (lambda: cutefi.copy_(torch.empty(64), torch.randn(64)), "src"),
        "tma_copy_": (lambda: cutefi.tma_copy_(torch.empty(8, 8), torch.randn(8, 8)), "src"),
        "fill_": (lambda: cutefi.fill_(torch.empty(16, dtype=torch.uint8), 0xFF), "tensor"),
        "poison_": (lambda: cutefi.poison_(torch.empty(16, dtype=bf16)), "tensor"),
        "rmsnorm": (lambda: cutefi.rmsnorm(x, w, eps=1e-5, out=torch.empty_like(x), enable_pdl=False), "input"),
        "gemma_rmsnorm": (lambda: cutefi.gemma_rmsnorm(x, w), "input"),
        "fused_add_rmsnorm": (lambda: cutefi.fused_add_rmsnorm(x, r, w), "input"),
        "gemma_fused_add_rmsnorm": (lambda: cutefi.gemma_fused_add_rmsnorm(x, r, w), "input"),
        "rmsnorm-3d": (lambda: cutefi.rmsnorm(torch.randn(8, 4, 64).to(bf16), w), "input"),
        "layernorm": (lambda: cutefi.layernorm(x, torch.randn(64), torch.randn(64)), "input"),
        "rmsnorm_quant": (lambda: cutefi.rmsnorm_quant(torch.empty(x.shape, dtype=torch.float8_e4m3fn), x, w, 0.5),
                          "input"),
        "fused_add_rmsnorm_quant": (lambda: cutefi.fused_add_rmsnorm_quant(
            torch.empty(x.shape, dtype=torch.float8_e5m2), x, r, w, torch.tensor([2.0])), "input"),
        "layernorm_quant": (lambda: cutefi.layernorm_quant(
            torch.empty(x.shape, dtype=torch.float8_e4m3fn), x, torch.randn(64), torch.randn(64), 1.0), "input"),
        "fused_rmsnorm_silu": (lambda: cutefi.fused_rmsnorm_silu(x, w, 1e-6, out=torch.empty_like(x)), "input"),
        "apply_rope": (lambda: cutefi.apply_rope(q, k, indptr, offsets), "q"),
        "apply_rope_inplace": (lambda: cutefi.apply_rope_inplace(q, k, indptr, offsets, 32, True, 2.0, 5e5), "q"),
        "apply_rope_pos_ids": (lambda: cutefi.apply_rope_pos_ids(q, k, pos), "q"),
        "apply_rope_pos_ids_inplace": (lambda: cutefi.apply_rope_pos_ids_inplace(q, k, pos, rope_scale=1), "q"),
        "apply_llama31_rope": (lambda: cutefi.apply_llama31_rope(q, k, indptr, offsets), "q"),
        "apply_llama31_rope_inplace": (lambda: cutefi.apply_llama31_rope_inplace(q, k, indptr, offsets), "q"),
        "apply_llama31_rope_pos_ids": (lambda: cutefi.apply_llama31_rope_pos_ids(q, k, pos), "q"),
        "apply_llama31_rope_pos_ids_inplace": (lambda: cutefi.apply_llama31_rope_pos_ids_inplace(q, k, pos), "q"),
        "apply_rope_with_cos_sin_cache": (
            lambda: cutefi.apply_rope_with_cos_sin_cache(pos, q.flatten(1), k.flatten(1), 64, cache), "query"),
        "apply_rope_with_cos_sin_cache_inplace": (
            lambda: cutefi.apply_rope_with_cos_sin_cache_inplace(pos, q, k, 64, cache, is_neox=False), "query"),
        "merge_state": (lambda: cutefi.merge_state(q, q[..., 0].float(), q, q[..., 1].float()), "v_a"),
        "merge_state_in_place": (lambda: cutefi.merge_state_in_place(
            q, q[..., 0].float(), q, q[..., 1].float(), torch.ones(8, dtype=torch.bool)), "v"),
        "merge_states": (lambda: cutefi.merge_states(q[:, None], q[:, None, :, 0].float()), "v"),
        "append_paged_kv_cache": (lambda: cutefi.append_paged_kv_cache(
            k, k, pos, pos, torch.zeros(4, 2, 16, 2, 64, dtype=bf16), pos[:4], torch.tensor([0, 4], dtype=i32),
            torch.tensor([8], dtype=i32)), "append_key"),
        "append_paged_mla_kv_cache": (lambda: cutefi.append_paged_mla_kv_cache(
            k[:, 0], k[:, 1, :16], pos, pos, torch.zeros(4, 16, 64, dtype=bf16), torch.zeros(4, 16, 16, dtype=bf16),
            pos[:4], torch.tensor([0, 4], dtype=i32), torch.tensor([8], dtype=i32)), "append_ckv"),
        "BatchDecodeWithPagedKVCacheWrapper": (
            lambda: cutefi.BatchDecodeWithPagedKVCacheWrapper(torch.empty(1024, dtype=torch.uint8)),
            "float_workspace_buffer"),
        "CUDAGraphBatchDecodeWithPagedKVCacheWrapper": (lambda: cutefi.CUDAGraphBatchDecodeWithPagedKVCacheWrapper(
            torch.empty(1024, dtype=torch.uint8), indptr, pos, pos[:2]), "workspace_buffer"),
        "single_decode_with_kv_cache": (lambda: cutefi.single_decode_with_kv_cache(q[0], k, k), "q"),
        "rope_quantize_fp8": (lambda: cutefi.rope_quantize_fp8(q, k, None, None, cache, pos), "q_rope"),
        "mla_rope_quantize_fp8": (lambda: cutefi.mla_rope_quantize_fp8(
            q[..., :16], k[:, 0, :16], q, k[:, 0], torch.randn(64, 16), pos), "q_rope"),
        "rope_quantize_fp8_append_paged_kv_cache": (lambda: cutefi.rope_quantize_fp8_append_paged_kv_cache(
            q, k, None, None, k, cache, pos, tuple(torch.empty(3, 16, 2, 64, dtype=torch.float8_e4m3fn)
                                                    for _ in range(2)), pos[:3], torch.tensor([0, 3], dtype=i32),
            torch.zeros(8, dtype=i32), pos), "q_rope"),
        "mm_bf16": (lambda: cutefi.mm_bf16(x, torch.randn(128, 64).to(bf16).t(), bias=torch.randn(128).to(bf16),
                                           out=torch.empty(4, 128, dtype=bf16)), "a"),
        "mm_fp16": (lambda: cutefi.mm_fp16(x.half(), torch.randn(64, 128).half()), "a"),
        "bmm_bf16": (lambda: cutefi.bmm_bf16(q, torch.randn(8, 64, 16).to(bf16)), "A"),
        "bmm_fp16": (lambda: cutefi.bmm_fp16(q.half(), torch.randn(8, 16, 64).half().transpose(1, 2),
                                             out_dtype=torch.bfloat16), "A"),
        "mm_fp8": (lambda: cutefi.mm_fp8(x.to(torch.float8_e4m3fn), torch.randn(128, 64).to(torch.float8_e4m3fn).t(),
                                         torch.ones(1), out=torch.empty(4, 128, dtype=bf16)), "a"),
        "bmm_fp8": (lambda: cutefi.bmm_fp8(torch.randn(2, 4, 64).to(torch.float8_e5m2),
                                           torch.randn(2, 32, 64).to(torch.float8_e5m2).transpose(1, 2),
                                           torch.ones(1), torch.ones(1), torch.float16), "A"),
        "gemm_fp8_nt_groupwise": (lambda: cutefi.gemm_fp8_nt_groupwise(
            x.to(torch.float8_e4m3fn), torch.randn(128, 64).to(torch.float8_e4m3fn), torch.ones(4, 1),
            torch.ones(1, 1), "K"), "a"),
        "gemm_fp8_nt_blockscaled": (lambda: cutefi.gemm_fp8_nt_blockscaled(
            x.to(torch.float8_e5m2), torch.randn(128, 64).to(torch.float8_e5m2), torch.ones(1, 1), torch.ones(1, 1),
            out=torch.empty(4, 128, dtype=torch.float16)), "a"),
        "group_gemm_fp8_nt_groupwise": (lambda: cutefi.group_gemm_fp8_nt_groupwise(
            x.to(torch.float8_e4m3fn), torch.randn(2, 128, 64).to(torch.float8_e4m3fn), torch.ones(4, 1),
            torch.ones(2, 1, 1), torch.tensor([0, 1, 4], dtype=i32), scale_major_mode="K"), "a"),
        "single_prefill_with_kv_cache": (lambda: cutefi.single_prefill_with_kv_cache(q, k, k, causal=True), "q"),
        "single_prefill_with_kv_cache_return_lse": (
            lambda: cutefi.single_prefill_with_kv_cache_return_lse(q, k, k, causal=True), "q"),
        "BatchPrefillWithRaggedKVCacheWrapper": (
            lambda: cutefi.BatchPrefillWithRaggedKVCacheWrapper(torch.empty(1024, dtype=torch.uint8)),
            "float_workspace_buffer"),
        "BatchPrefillWithPagedKVCacheWrapper": (
            lambda: cutefi.BatchPrefillWithPagedKVCacheWrapper(torch.empty(1024, dtype=torch.uint8), "HND"),
            "float_workspace_buffer"),
        "SegmentGEMMWrapper": (lambda: cutefi.SegmentGEMMWrapper(torch.empty(16, dtype=torch.int8)).run(
            x, torch.randn(2, 32, 64).to(bf16), 2, True, seg_lens=torch.tensor([1, 3])), "x"),
    }


# torch ops that run wherever their tensors are (as FlashInfer's do): no device check; and
# fast_decode_plan, which plans a wrapper whose constructor checked the device; quantize_fp8
# (torch operations, a helper to make FP8 inputs: CPU tensors are fine)
DEVICE_AGNOSTIC = {"get_seq_lens", "get_batch_indices_positions", "fast_decode_plan", "quantize_fp8"}


@pytest.mark.parametrize("op", list(_cpu_calls()))
def test_valid_cpu_arguments_get_the_device_error(op):
    """Every check of types, values, shapes and layouts passes on CPU tensors; the device check,
    which comes last, still refuses them."""
    call, name = _cpu_calls()[op]
    with pytest.raises(ValueError, match=f"^{name} must be on a CUDA device, got cpu$"):
        call()


def test_every_public_op_has_a_cpu_device_check():
    ops = {name.split("-")[0] for name in _cpu_calls()}
    assert ops == set(cutefi.__all__) - {"__version__"} - DEVICE_AGNOSTIC


def test_fast_decode_plan_needs_a_cutefi_wrapper():
    with pytest.raises(TypeError, match="first argument must be a cutefi decode wrapper"):
        cutefi.fast_decode_plan(object(), torch.tensor([0, 1], dtype=torch.int32), torch.zeros(1, dtype=torch.int32),
                                torch.ones(1, dtype=torch.int32), 8, 8, 128, 16)


def test_index_helpers_run_on_cpu_tensors():
    indptr, last = torch.tensor([0, 2, 2, 5]), torch.tensor([3, 1, 16])
    assert cutefi.get_seq_lens(indptr, last, 16).tolist() == [19, 1, 48]
    batch, positions = cutefi.get_batch_indices_positions(torch.tensor([0, 1, 1, 3]), torch.tensor([4, 9, 2]), 3)
    assert batch.tolist() == [0, 2, 2] and positions.tolist() == [3, 0, 1]


def test_non_tensor_is_refused():
    with pytest.raises(TypeError, match="src must be a torch.Tensor"):
        cutefi.copy_(torch.empty(4), [1, 2, 3, 4])
    with pytest.raises(TypeError, match="dst must be a torch.Tensor"):
        cutefi.copy_([0.0] * 4, torch.empty(4))
    with pytest.raises(TypeError, match="tensor must be a torch.Tensor"):
        cutefi.poison_(None)


def test_bug_report_cases():
    """The reported cases: each a TypeError/ValueError naming the argument (CPU tensors: these
    come before the device check)."""
    q, k, pos = torch.randn(8, 4, 64).to(torch.bfloat16), torch.randn(8, 2, 64).to(torch.bfloat16), torch.arange(8)
    with pytest.raises(ValueError, match="^q must be 3-D"):
        cutefi.apply_rope_pos_ids(torch.tensor(1.0, dtype=torch.bfloat16), k, pos)
    with pytest.raises(TypeError, match="^rope_scale must be a real number"):
        cutefi.apply_rope_pos_ids(q, k, pos, rope_scale=None)
    with pytest.raises(TypeError, match="^rope_theta must be a real number"):
        cutefi.apply_rope_pos_ids(q, k, pos, rope_theta="1e4")
    with pytest.raises(TypeError, match="^head_size must be an int"):
        cutefi.apply_rope_with_cos_sin_cache(pos, q, k, "64", torch.randn(128, 64))
    with pytest.raises(TypeError, match="^bits must be an int"):
        cutefi.fill_(torch.empty(16, dtype=torch.uint8), bits="8")
    x = torch.randn(4, 12).to(torch.bfloat16)
    with pytest.raises(ValueError, match=r"^input hidden size \(last dimension\) must be in \[1, 2147483647\]; got 0$"):
        cutefi.rmsnorm(x[:, :0], torch.randn(0).to(torch.bfloat16))
    for eps in ("1e-6", None):
        with pytest.raises(TypeError, match="^eps must be a real number"):
            cutefi.rmsnorm(x[:, :8], torch.randn(8).to(torch.bfloat16), eps=eps)
    for eps in (-1e-6, float("nan")):
        with pytest.raises(ValueError, match="^eps must be"):
            cutefi.rmsnorm(x[:, :8], torch.randn(8).to(torch.bfloat16), eps=eps)


def test_unknown_public_name():
    with pytest.raises(AttributeError, match="no attribute 'rmsnrom'"):
        cutefi.rmsnrom  # noqa: B018


def test_unknown_builder_kind():
    from cutefi.jit.toolchain import toolchain_for

    with pytest.raises(ValueError, match="accepted: 'cute', 'nvrtc'"):
        toolchain_for("triton")


def test_param_kind_is_checked():
    from cutefi.jit.contract import Param

    with pytest.raises(ValueError, match="kind must be one of"):
        Param("x", "u8")


def test_missing_kernel_explains_how_to_get_cubins(monkeypatch, isolated_cache):
    from cutefi.copy.launch import COPY_SPEC
    from cutefi.jit import lookup
    from cutefi.jit.targets import Target

    monkeypatch.setattr(lookup, "can_build", lambda kind: False)
    with pytest.raises(lookup.KernelNotAvailableError, match="cutefi aot --arch 9.0 --out DIR"):
        lookup.find_artifact(COPY_SPEC, Target(9, 0))
