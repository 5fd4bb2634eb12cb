"""CPU tier: the FlashInfer call forms decode takes without a GPU to check them on: page-size-1
caches (SGLang's token-granular K/V, ``plan.split_cache``), FlashInfer's backend names, and the
plan/run options of FlashInfer's other backends (``decode_compat``), refused by name."""

from __future__ import annotations

import pytest
import torch

from cutefi.attention.decode_compat import check_backend, check_jit_args, check_plan_extras, check_run_extras
from cutefi.attention.plan import split_cache


@pytest.mark.parametrize("layout, shape", [("NHD", (7, 1, 4, 64)), ("HND", (7, 4, 1, 64))])
def test_page_size_one_caches_gain_their_page_dimension(layout, shape):
    k, v = torch.randn(7, 4, 64), torch.randn(7, 4, 64)
    k4, v4 = split_cache((k, v), layout)
    assert k4.shape == v4.shape == shape
    assert torch.equal(k4.reshape(7, 4, 64), k) and torch.equal(v4.reshape(7, 4, 64), v)
    fused = torch.randn(7, 2, 4, 64)
    k5, v5 = split_cache(fused, layout)
    assert k5.shape == v5.shape == shape
    assert torch.equal(k5.reshape(7, 4, 64), fused[:, 0]) and torch.equal(v5.reshape(7, 4, 64), fused[:, 1])
    # the paged forms pass through; without a layout the 3-D pair is the caller's to refuse
    paged = (torch.randn(3, *shape[1:]), torch.randn(3, *shape[1:]))
    assert split_cache(paged, layout)[0] is paged[0]
    assert split_cache((k, v))[0].dim() == 3
    with pytest.raises(TypeError, match="page size 1"):
        split_cache(torch.randn(7, 4, 64), layout)


def test_flashinfer_backend_names():
    for name in ("auto", "cutefi", "fa2", "fa3"):
        check_backend(name)
    for name in ("trtllm-gen", "cute-dsl", "cudnn", "FA2"):
        with pytest.raises(ValueError, match="backend must be one of"):
            check_backend(name)
    check_jit_args(None)
    check_jit_args(None, None)
    with pytest.raises(NotImplementedError, match="jit_args"):
        check_jit_args(["x"])
    with pytest.raises(NotImplementedError, match="jit_kwargs"):
        check_jit_args(None, {"x": 1})


def test_other_backends_options_are_refused_by_name():
    check_plan_extras(None, None, 1, 0)
    check_plan_extras(None, None, None, -1)
    for args, pattern in (((torch.zeros(2), None, 1, 0), "block_tables"), ((None, torch.ones(2), 1, 0), "seq_lens"),
                          ((None, None, 2, 0), "q_len_per_req"), ((None, None, 1, 4), "window_right")):
        with pytest.raises(NotImplementedError, match=pattern):
            check_plan_extras(*args)
    check_run_extras((), None, None, None)
    check_run_extras((), 1, None, None)
    for args, pattern in ((((), 3, None, None), "q_len_per_req"), (((), None, 0.5, None), "skip_softmax"),
                          (((), None, None, torch.zeros(1)), "kv_cache_sf")):
        with pytest.raises(NotImplementedError, match=pattern):
            check_run_extras(*args)
    # FlashInfer's positional extras after paged_kv_cache (JIT tensors, FP8-query scales)
    with pytest.raises(TypeError, match="2 positional arguments after paged_kv_cache"):
        check_run_extras((torch.ones(1), torch.ones(1)), None, None, None)


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64])
def test_batch_indices_positions_with_spare_tokens(dtype):
    """FlashInfer takes an ``nnz`` above ``append_indptr[-1]`` (a padded CUDA-graph buffer) and
    leaves the extra entries unset; cutefi indexed seq_lens past its end (a device-side assert).
    The real tokens against a loop written here; the spare ones get the last request and
    position -1 (the append kernel skips a negative position). torch ops: CPU tensors serve."""
    import cutefi

    append_indptr = torch.tensor([0, 3, 3, 7], dtype=dtype)
    seq_lens = torch.tensor([10, 4, 7], dtype=dtype)
    batch, positions = cutefi.get_batch_indices_positions(append_indptr, seq_lens, 12)
    want_batch, want_pos = [], []
    for b in range(3):
        first, end = int(append_indptr[b]), int(append_indptr[b + 1])
        for t in range(first, end):
            want_batch.append(b)
            want_pos.append(int(seq_lens[b]) - (end - t))
    assert batch.dtype == positions.dtype == torch.int32
    assert batch[:7].tolist() == want_batch and positions[:7].tolist() == want_pos
    assert batch[7:].tolist() == [2] * 5 and positions[7:].tolist() == [-1] * 5
    # nnz exactly the tokens, and no request at all
    assert cutefi.get_batch_indices_positions(append_indptr, seq_lens, 7)[1].tolist() == want_pos
    none_batch, none_pos = cutefi.get_batch_indices_positions(torch.zeros(1, dtype=dtype),
                                                              torch.zeros(0, dtype=dtype), 3)
    assert none_batch.tolist() == [0, 0, 0] and none_pos.tolist() == [-1, -1, -1]
    # FlashInfer's preallocated outputs: written (from a poisoned start) and returned, one or both
    given_batch, given_pos = torch.full((12,), 77, dtype=torch.int32), torch.full((12,), 77, dtype=torch.int32)
    got = cutefi.get_batch_indices_positions(append_indptr, seq_lens, 12, given_batch, given_pos)
    assert got[0] is given_batch and got[1] is given_pos
    assert given_batch.tolist() == batch.tolist() and given_pos.tolist() == positions.tolist()
    given_pos.fill_(77)
    got = cutefi.get_batch_indices_positions(append_indptr, seq_lens, 12, positions=given_pos)
    assert got[1] is given_pos and given_pos.tolist() == positions.tolist() and got[0].tolist() == batch.tolist()
    for bad, pattern in ((torch.zeros(11, dtype=torch.int32), r"\[nnz\] = \[12\]"),
                         (torch.zeros(12, dtype=torch.int64), "int32"), ([0] * 12, "positions")):
        with pytest.raises((ValueError, TypeError), match=pattern):
            cutefi.get_batch_indices_positions(append_indptr, seq_lens, 12, positions=bad)
