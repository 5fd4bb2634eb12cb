"""CPU tier: the wrappers' plan methods take FlashInfer's arguments in FlashInfer's positional
order (servers pass them positionally: vLLM's decode plan call passes 15 after page_size), and
the prefill plan options cutefi does not take are refused by name, not ignored."""

from __future__ import annotations

import inspect

import pytest
import torch

import cutefi
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
