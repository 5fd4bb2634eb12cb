"""CPU tier: the wrappers' plan methods take FlashInfer's arguments in FlashInfer's positional
order (servers pass them positionally: vLLM's decode plan call passes 15 after page_size), and
the prefill plan options cutefi does not take are refused by name, not ignored; the norm and
RoPE functions take FlashInfer's parameters, in its order, with its defaults."""

from __future__ import annotations

import ast
import inspect

import pytest
import torch

import cutefi
from cutefi.attention.decode_compat import DecodeWrapperCompat
from cutefi.prefill import compat
from cutefi.prefill.ops import _scales, rope_scales
from cutefi.prefill.wrapper import check_plan_extras

# FlashInfer (flashinfer/decode.py, flashinfer/prefill.py at fb28d72): the parameters after self,
# in order (decode's optional ones are its legacy positional list, then the keyword-only window_right)
DECODE_PLAN = ["indptr", "indices", "last_page_len", "num_qo_heads", "num_kv_heads", "head_dim", "page_size",
               "pos_encoding_mode", "window_left", "logits_soft_cap", "q_data_type", "kv_data_type", "o_data_type",
               "data_type", "sm_scale", "rope_scale", "rope_theta", "non_blocking", "block_tables", "seq_lens",
               "fixed_split_size", "disable_split_kv", "q_len_per_req", "window_right"]
RAGGED_PLAN = ["qo_indptr", "kv_indptr", "num_qo_heads", "num_kv_heads", "head_dim_qk", "head_dim_vo", "custom_mask",
               "packed_custom_mask", "causal", "pos_encoding_mode", "use_fp16_qk_reduction", "window_left",
               "logits_soft_cap", "sm_scale", "rope_scale", "rope_theta", "q_data_type", "kv_data_type",
               "o_data_type", "non_blocking", "prefix_len_ptr", "token_pos_in_items_ptr", "token_pos_in_items_len",
               "max_item_len_ptr", "fixed_split_size", "disable_split_kv", "seq_lens", "seq_lens_q",
               "max_token_per_sequence", "max_sequence_kv", "v_indptr", "o_indptr"]
PAGED_PLAN = ["qo_indptr", "paged_kv_indptr", "paged_kv_indices", "paged_kv_last_page_len", "num_qo_heads",
              "num_kv_heads", "head_dim_qk", "page_size", "head_dim_vo", "custom_mask", "packed_custom_mask", "causal",
              "pos_encoding_mode", "use_fp16_qk_reduction", "sm_scale", "window_left", "logits_soft_cap",
              "rope_scale", "rope_theta", "q_data_type", "kv_data_type", "o_data_type", "non_blocking",
              "prefix_len_ptr", "token_pos_in_items_ptr", "token_pos_in_items_len", "max_item_len_ptr", "seq_lens",
              "seq_lens_q", "block_tables", "max_token_per_sequence", "max_sequence_kv", "fixed_split_size",
              "disable_split_kv"]


@pytest.mark.parametrize("method, expected", [
    (cutefi.BatchDecodeWithPagedKVCacheWrapper.plan, DECODE_PLAN),
    (cutefi.BatchPrefillWithRaggedKVCacheWrapper.plan, RAGGED_PLAN),
    (cutefi.BatchPrefillWithPagedKVCacheWrapper.plan, PAGED_PLAN),
], ids=["decode", "ragged", "paged"])
def test_plan_takes_flashinfers_arguments_in_its_order(method, expected):
    params = [p for p in inspect.signature(inspect.unwrap(method)).parameters.values()
              if p.name != "self" and not p.name.startswith("_")]
    assert [p.name for p in params] == expected
    if expected is DECODE_PLAN:  # (window_right: keyword-only in FlashInfer too)
        assert params[-1].kind is inspect.Parameter.KEYWORD_ONLY
        assert all(p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD for p in params[:-1])


def test_prefill_plan_options_cutefi_does_not_take_are_refused():
    bf16 = torch.bfloat16
    check_plan_extras(bf16)
    check_plan_extras(bf16, o_data_type=torch.bfloat16)
    check_plan_extras(bf16, o_data_type="bfloat16")
    with pytest.raises(NotImplementedError, match="o_data_type"):
        check_plan_extras(bf16, o_data_type=torch.float32)
    with pytest.raises(NotImplementedError, match="multi-item scoring"):
        check_plan_extras(bf16, prefix_len_ptr=torch.zeros(2, dtype=torch.int32))
    with pytest.raises(NotImplementedError, match="multi-item scoring"):
        check_plan_extras(bf16, token_pos_in_items_len=4)
    for name in ("seq_lens", "seq_lens_q", "block_tables", "v_indptr", "o_indptr"):
        with pytest.raises(NotImplementedError, match=name):
            check_plan_extras(bf16, **{name: torch.zeros(2, dtype=torch.int32)})
    with pytest.raises(TypeError, match="o_data_type"):
        check_plan_extras(bf16, o_data_type=3)


# FlashInfer's deprecated forward methods and the single form (fb28d72), parameters after self
RAGGED_FORWARD = ["q", "k", "v", "causal", "pos_encoding_mode", "use_fp16_qk_reduction", "window_left",
                  "logits_soft_cap", "sm_scale", "rope_scale", "rope_theta"]
PAGED_FORWARD = ["q", "paged_kv_cache", "causal", "pos_encoding_mode", "use_fp16_qk_reduction", "k_scale", "v_scale",
                 "window_left", "logits_soft_cap", "sm_scale", "rope_scale", "rope_theta"]
SINGLE_PREFILL = ["q", "k", "v", "scale_q", "scale_k", "scale_v", "o_dtype", "custom_mask", "packed_custom_mask",
                  "causal", "kv_layout", "pos_encoding_mode", "use_fp16_qk_reduction", "sm_scale", "window_left",
                  "logits_soft_cap", "rope_scale", "rope_theta", "backend", "return_lse", "kv_cache_sf", "k_scale",
                  "v_scale"]
RAGGED_RUN = {"q_scale", "k_scale", "v_scale", "o_scale", "out", "lse", "return_lse", "enable_pdl", "kv_cache_sf"}
PAGED_RUN = {"q_scale", "k_scale", "v_scale", "out", "lse", "return_lse", "enable_pdl", "window_left", "sinks",
             "kv_cache_sf", "skip_softmax_threshold_scale_factor", "use_fp16_softmax", "uses_spcompress"}


def _names(function) -> list[str]:
    return [p for p in inspect.signature(inspect.unwrap(function)).parameters if p != "self"]


@pytest.mark.parametrize("function, expected", [
    (cutefi.BatchPrefillWithRaggedKVCacheWrapper.forward, RAGGED_FORWARD),
    (cutefi.BatchPrefillWithRaggedKVCacheWrapper.forward_return_lse, RAGGED_FORWARD),
    (cutefi.BatchPrefillWithPagedKVCacheWrapper.forward, PAGED_FORWARD),
    (cutefi.BatchPrefillWithPagedKVCacheWrapper.forward_return_lse, PAGED_FORWARD),
    (cutefi.single_prefill_with_kv_cache, SINGLE_PREFILL),
], ids=["ragged-forward", "ragged-forward-lse", "paged-forward", "paged-forward-lse", "single"])
def test_prefill_forms_take_flashinfers_arguments_in_its_order(function, expected):
    assert _names(function) == expected


def test_prefill_run_takes_flashinfers_keywords():
    assert RAGGED_RUN <= set(_names(cutefi.BatchPrefillWithRaggedKVCacheWrapper.run))
    assert PAGED_RUN <= set(_names(cutefi.BatchPrefillWithPagedKVCacheWrapper.run))
    for wrapper in (cutefi.BatchPrefillWithRaggedKVCacheWrapper, cutefi.BatchPrefillWithPagedKVCacheWrapper):
        for name in ("begin_forward", "end_forward", "run_return_lse", "reset_workspace_buffer", "_causal",
                     "_window_left", "_logits_soft_cap", "_sm_scale"):
            assert hasattr(wrapper, name), (wrapper.__name__, name)
        # forward's options are the plan's parameters (it plans again with them)
        assert set(compat._PARTITION_OPTIONS + compat._SCORE_OPTIONS) <= set(_names(wrapper.plan))
    lse_form = cutefi.single_prefill_with_kv_cache_return_lse
    assert lse_form.func is cutefi.single_prefill_with_kv_cache and lse_form.keywords == {"return_lse": True}
    from cutefi.prefill import single_prefill_with_kv_cache_return_lse
    assert single_prefill_with_kv_cache_return_lse is lse_form


class _Planned(compat.PrefillWrapperCompat):
    """compat's forward logic on a stand-in wrapper: plan counts its calls, run returns the plan."""

    def __init__(self) -> None:
        self._plan, self.plans, self._launches = None, 0, {}

    @compat.remember_plan
    def plan(self, qo_indptr, num_heads, causal=False, pos_encoding_mode="NONE", window_left=-1,
             logits_soft_cap=None, sm_scale=None, rope_scale=None, rope_theta=None):
        self.plans += 1
        self._plan = dict(head_dim=128, head_dim_vo=128, causal=causal, window_left=window_left,
                          scales=list(_scales(sm_scale, 128, logits_soft_cap)),
                          rope=rope_scales(pos_encoding_mode, rope_scale, rope_theta, 128, 128))

    def run(self, *args, **kwargs):
        return dict(self._plan), kwargs


def _options(**given):
    return {**dict(causal=False, window_left=-1, logits_soft_cap=None, sm_scale=None, rope_scale=None,
                   rope_theta=None), **given}


def test_forward_replaces_the_plans_options_as_flashinfer_does():
    wrapper = _Planned()
    with pytest.raises(RuntimeError, match="no plan yet"):
        wrapper._forward((), {}, _options())
    wrapper.plan([0, 4], 8, causal=False, window_left=16, sm_scale=0.5)
    assert (wrapper._causal, wrapper._window_left, wrapper._sm_scale, wrapper._logits_soft_cap) == (False, 16, 0.5, 0.0)
    # SGLang: planned non-causal, forward causal (and forward's default window -1): planned again, once
    plan, kwargs = wrapper._forward((), {"return_lse": True}, _options(causal=True, sm_scale=0.25))
    assert wrapper.plans == 2 and plan["causal"] and plan["window_left"] == -1 and kwargs == {"return_lse": True}
    assert plan["scales"] == list(_scales(0.25, 128, None))
    arguments = wrapper._planned_arguments()
    assert arguments["qo_indptr"] == [0, 4] and arguments["num_heads"] == 8
    wrapper._forward((), {}, _options(causal=True, sm_scale=0.25))
    assert wrapper.plans == 2  # (the next layer: the same options, no new plan)
    # the scores' options only rescale (and drop the launches kept with the old scales)
    wrapper._launches["kept"] = object()
    plan, _ = wrapper._forward((), {}, _options(causal=True, sm_scale=0.1, logits_soft_cap=30.0))
    assert wrapper.plans == 2 and plan["causal"] and not wrapper._launches
    assert plan["scales"] == list(_scales(0.1, 128, 30.0))
    assert (wrapper._sm_scale, wrapper._logits_soft_cap) == (0.1, 30.0)
    # the position encoding stays the plan's (FlashInfer's kernel is built with it); RoPE's theta rescales
    wrapper.plan([0, 4], 8, causal=True, pos_encoding_mode="ROPE_LLAMA")
    plan, _ = wrapper._forward((), {}, _options(causal=True, rope_theta=5e5))
    assert wrapper.plans == 3 and plan["rope"] == rope_scales("ROPE_LLAMA", None, 5e5, 128, 128)
    assert wrapper._pos_encoding_mode == "ROPE_LLAMA"


def test_decode_run_takes_flashinfers_positional_extras_and_refuses_them_by_name():
    """FlashInfer's ``run(q, paged_kv_cache, *args, ...)``: the extras (a JIT module's tensors,
    FP8 queries' scales) reach a TypeError that says what they are, not Python's."""
    params = inspect.signature(inspect.unwrap(cutefi.BatchDecodeWithPagedKVCacheWrapper.run)).parameters
    names = list(params)
    assert names[1:4] == ["q", "paged_kv_cache", "args"]
    assert params["args"].kind is inspect.Parameter.VAR_POSITIONAL
    wrapper = object.__new__(cutefi.BatchDecodeWithPagedKVCacheWrapper)  # (no plan: the extras fail first)
    with pytest.raises(TypeError, match="1 positional arguments after paged_kv_cache"):
        wrapper.run(torch.zeros(1), torch.zeros(1), torch.ones(1))


class _Runs:
    def run(self, *args, **kwargs):
        return args, kwargs


@pytest.mark.parametrize("compat_class", [DecodeWrapperCompat, compat.PrefillWrapperCompat], ids=["decode", "prefill"])
def test_run_return_lse_is_flashinfers_partialmethod(compat_class):
    """``run_return_lse = partialmethod(run, return_lse=True)``: True unless the caller passes it."""
    stub = type("Stub", (compat_class, _Runs), {})()
    assert stub.run_return_lse(1, 2, out=3) == ((1, 2), {"out": 3, "return_lse": True})
    assert stub.run_return_lse(1, 2, return_lse=False) == ((1, 2), {"return_lse": False})


@pytest.mark.parametrize("wrapper", [cutefi.BatchPrefillWithRaggedKVCacheWrapper,
                                     cutefi.BatchPrefillWithPagedKVCacheWrapper], ids=["ragged", "paged"])
def test_prefill_wrappers_take_jit_kwargs(wrapper):
    assert _names(wrapper.__init__)[-2:] == ["jit_args", "jit_kwargs"]
    with pytest.raises(NotImplementedError, match="jit_kwargs"):  # (checked before the workspace's device)
        wrapper(torch.empty(16, dtype=torch.uint8), jit_kwargs={"x": 1})


GEMMS_WITH_SKIP_CHECK = [cutefi.mm_bf16, cutefi.mm_fp16, cutefi.bmm_bf16, cutefi.bmm_fp16, cutefi.bmm_fp8,
                         cutefi.gemm_fp8_nt_groupwise, cutefi.gemm_fp8_nt_blockscaled,
                         cutefi.group_gemm_fp8_nt_groupwise]


@pytest.mark.parametrize("function", GEMMS_WITH_SKIP_CHECK, ids=lambda f: f.__name__)
def test_gemms_take_flashinfers_skip_check(function):
    """FlashInfer's backend-requirement decorator adds a keyword ``skip_check`` to these; cutefi
    takes it (keyword-only, default False) and still checks its inputs."""
    param = inspect.signature(inspect.unwrap(function)).parameters["skip_check"]
    assert param.kind is inspect.Parameter.KEYWORD_ONLY and param.default is False
    assert not any(p.kind is inspect.Parameter.VAR_KEYWORD
                   for p in inspect.signature(inspect.unwrap(function)).parameters.values())


def test_skip_check_still_checks():
    a = torch.randn(4, 8)  # fp32 on the CPU: refused with or without skip_check
    for skip in (False, True):
        with pytest.raises((TypeError, ValueError)) as caught:
            cutefi.mm_bf16(a, a.t(), skip_check=skip)
        assert "skip_check" not in str(caught.value)


@pytest.mark.parametrize("method, plan_names", [
    (cutefi.BatchDecodeWithPagedKVCacheWrapper.workspace_size, DECODE_PLAN),
    (cutefi.BatchPrefillWithPagedKVCacheWrapper.workspace_size, PAGED_PLAN),
], ids=["decode", "paged"])
def test_workspace_size_takes_plans_arguments_as_flashinfer(method, plan_names):
    """FlashInfer's ``workspace_size``: plan's arguments in plan's order, less ``non_blocking``
    (and decode's keyword-only ``window_right``)."""
    assert _names(method) == [name for name in plan_names if name not in ("non_blocking", "window_right")]


def test_paged_prefill_needs_no_caller_workspace():
    wrapper = object.__new__(cutefi.BatchPrefillWithPagedKVCacheWrapper)
    assert wrapper.workspace_size(None, None, None, None, 32, 8, 128, 16) == (0, 0)


# FlashInfer's norm functions (flashinfer/norm/__init__.py, 2026-12): parameters and defaults
NORM_SIGNATURES = {
    "rmsnorm": "(input, weight, eps=1e-06, out=None, enable_pdl=None)",
    "gemma_rmsnorm": "(input, weight, eps=1e-06, out=None, enable_pdl=None)",
    "fused_add_rmsnorm": "(input, residual, weight, eps=1e-06, enable_pdl=None)",
    "gemma_fused_add_rmsnorm": "(input, residual, weight, eps=1e-06, enable_pdl=None)",
    "layernorm": "(input, gemma, beta, eps=1e-06)",
    "rmsnorm_quant": "(out, input, weight, scale, eps=1e-06, enable_pdl=None)",
    "fused_add_rmsnorm_quant": "(out, input, residual, weight, scale, eps=1e-06, enable_pdl=None)",
    "layernorm_quant": "(out, input, gemma, beta, scale, eps=1e-06)",
    "fused_rmsnorm_silu": "(input, weight, eps=1e-06, out=None, block_scale=None)",
}


@pytest.mark.parametrize("name", NORM_SIGNATURES)
def test_norms_take_flashinfers_parameters_and_defaults(name):
    parameters = inspect.signature(inspect.unwrap(getattr(cutefi, name))).parameters.values()
    shown = ", ".join(p.name if p.default is inspect.Parameter.empty else f"{p.name}={p.default!r}"
                      for p in parameters)
    assert f"({shown})" == NORM_SIGNATURES[name]


# FlashInfer's RoPE functions (flashinfer/rope.py at fb28d72), as written there: parameters in
# order and defaults, compared by value (FlashInfer writes rope_scale=1 where cutefi has 1.0)
_ROPE = "q, k, indptr, offsets, rotary_dim=None, interleave=False, rope_scale=1, rope_theta=10000.0"
_ROPE_POS = "q, k, pos_ids, rotary_dim=None, interleave=False, rope_scale=1, rope_theta=10000.0"
_LLAMA31 = ("rotary_dim=None, interleave=False, rope_scale=8, rope_theta=500000.0, low_freq_factor=1, "
            "high_freq_factor=4, old_context_len=8192")
_COS_SIN = "positions, query, key, head_size, cos_sin_cache, is_neox=True"
_QUANT = ("q_rope, k_rope, q_nope, k_nope, cos_sin_cache, pos_ids, is_neox=True, quantize_dtype=None, "
          "quant_scale_q=1.0, quant_scale_kv=1.0, q_rope_out=None, k_rope_out=None, q_nope_out=None, "
          "k_nope_out=None, enable_pdl=False")
ROPE_SIGNATURES = {
    "apply_rope": _ROPE, "apply_rope_inplace": _ROPE,
    "apply_rope_pos_ids": _ROPE_POS, "apply_rope_pos_ids_inplace": _ROPE_POS,
    "apply_llama31_rope": f"q, k, indptr, offsets, {_LLAMA31}",
    "apply_llama31_rope_inplace": f"q, k, indptr, offsets, {_LLAMA31}",
    "apply_llama31_rope_pos_ids": f"q, k, pos_ids, {_LLAMA31}",
    "apply_llama31_rope_pos_ids_inplace": f"q, k, pos_ids, {_LLAMA31}",
    "apply_rope_with_cos_sin_cache": _COS_SIN, "apply_rope_with_cos_sin_cache_inplace": _COS_SIN,
    "mla_rope_quantize_fp8": _QUANT,
    "rope_quantize_fp8": f"{_QUANT}, backend='cuda'",
    "rope_quantize_fp8_append_paged_kv_cache": (
        "q_rope, k_rope, q_nope, k_nope, v, cos_sin_cache, pos_ids, paged_kv_cache, kv_indices, kv_indptr, "
        "batch_indices, positions, is_neox=True, quantize_dtype=None, quant_scale_q=1.0, quant_scale_kv=1.0, "
        "page_size=16, kv_layout='NHD', q_rope_out=None, q_nope_out=None, enable_pdl=False"),
}


def _written(parameters: str) -> list[tuple[str, object]]:
    """(name, default) of a parameter list as written in Python (``inspect.Parameter.empty``
    where there is no default)."""
    args = ast.parse(f"def f({parameters}): pass").body[0].args
    defaults = [inspect.Parameter.empty] * (len(args.args) - len(args.defaults)) + \
        [ast.literal_eval(d) for d in args.defaults]
    return [(a.arg, d) for a, d in zip(args.args, defaults)]


@pytest.mark.parametrize("name", ROPE_SIGNATURES)
def test_rope_functions_take_flashinfers_parameters_and_defaults(name):
    """Each RoPE function: FlashInfer's parameter names in its order, positional like its own,
    with defaults of the same value; all importable from ``cutefi`` and ``cutefi.rope``."""
    import cutefi.rope

    function = getattr(cutefi, name)
    assert getattr(cutefi.rope, name) is function
    parameters = list(inspect.signature(inspect.unwrap(function)).parameters.values())
    assert all(p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD for p in parameters)
    ours = [(p.name, p.default) for p in parameters]
    theirs = _written(ROPE_SIGNATURES[name])
    assert [n for n, _ in ours] == [n for n, _ in theirs]
    for (parameter, default), (_, expected) in zip(ours, theirs):
        assert _same_default(default, expected), parameter


def _same_default(ours: object, theirs: object) -> bool:
    """No default or None: the same; otherwise the same value of a like type (an int and a float
    are alike, a bool is not a number here)."""
    if theirs is inspect.Parameter.empty or theirs is None:
        return ours is theirs
    numbers = (int, float)
    return (type(ours) is type(theirs) or (type(ours) in numbers and type(theirs) in numbers)) and ours == theirs
