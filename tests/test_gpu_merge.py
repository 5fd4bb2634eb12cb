"""GPU tier: merging attention states (merge_state, merge_state_in_place, merge_states) against a
float64 reference written here, and the paged-KV index helpers against loops over requests.

A state is (v, s): v the normalised partial attention output, s the base-2 log-sum-exp of its
scores (FlashInfer's convention). Outputs are poisoned (NaN) before each call.
"""

from __future__ import annotations

import pytest
import torch

import cutefi

pytestmark = pytest.mark.gpu

DTYPES = (torch.bfloat16, torch.float16)
REL = {torch.bfloat16: 8e-3, torch.float16: 1e-3}  # relative L2 error bound of the merged v


def reference(v: torch.Tensor, s: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """v [n, k, h, d], s [n, k, h] -> merged (float64): weights 2^(s - max), normalised; an
    all-empty row (every s = -inf, or k = 0) merges to 0 with s = -inf."""
    s64 = s.double()
    if s.shape[1] == 0:
        return (torch.zeros(v.shape[0], v.shape[2], v.shape[3], dtype=torch.float64, device=v.device),
                torch.full((s.shape[0], s.shape[2]), float("-inf"), dtype=torch.float64, device=s.device))
    m = s64.max(dim=1).values
    m = torch.where(torch.isneginf(m), torch.zeros_like(m), m)
    w = torch.exp2(s64 - m[:, None])
    d = w.sum(dim=1)
    merged = (w[..., None] * v.double()).sum(dim=1) / torch.where(d > 0, d, 1)[..., None]
    lse = torch.where(d > 0, m + torch.log2(torch.where(d > 0, d, 1)), float("-inf"))
    return merged, lse


def assert_merged(v_out, s_out, v_ref, s_ref, dtype):
    assert not torch.isnan(v_out).any() and not torch.isnan(s_out).any(), "NaN: an element was never written"
    scale = v_ref.norm()
    rel = ((v_out.double() - v_ref).norm() / scale).item() if scale > 0 else v_out.double().norm().item()
    assert rel < REL[dtype], f"relative error {rel:.2e}"
    torch.testing.assert_close(v_out.double(), v_ref, rtol=2e-2, atol=2e-2)
    finite = torch.isfinite(s_ref)
    assert torch.equal(torch.isneginf(s_out), torch.isneginf(s_ref))
    torch.testing.assert_close(s_out.double()[finite], s_ref[finite], rtol=1e-5, atol=1e-4)


def states(n, k, h, d, dtype, spread=4.0, device="cuda"):
    v = torch.randn(n, k, h, d, device=device, dtype=torch.float32).to(dtype)
    s = torch.randn(n, k, h, device=device) * spread + 3.0
    return v, s


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("head_dim", [8, 64, 128, 200, 256, 512])
@pytest.mark.parametrize("n, heads", [(1, 1), (7, 3), (1000, 32)])
def test_merge_state_pairs(dtype, head_dim, n, heads):
    torch.manual_seed(head_dim * 7 + n)
    v, s = states(n, 2, heads, head_dim, dtype)
    v_a, v_b = v[:, 0].clone(), v[:, 1].clone()
    s_a, s_b = s[:, 0].clone(), s[:, 1].clone()
    v_out, s_out = cutefi.merge_state(v_a, s_a, v_b, s_b)
    assert v_out.dtype == dtype and s_out.dtype == torch.float32
    assert v_out.shape == (n, heads, head_dim) and s_out.shape == (n, heads)
    assert_merged(v_out, s_out, *reference(v, s), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("num_states", [0, 1, 2, 5, 33])
@pytest.mark.parametrize("head_dim", [64, 128, 256])
def test_merge_states(dtype, num_states, head_dim):
    torch.manual_seed(num_states)
    v, s = states(77, num_states, 8, head_dim, dtype, spread=10.0)
    v_out, s_out = cutefi.merge_states(v, s)
    assert_merged(v_out, s_out, *reference(v, s), dtype)
    if num_states == 1:  # one state: itself (weight exactly 1)
        assert torch.equal(v_out, v[:, 0]) and torch.equal(s_out, s[:, 0])


def test_extreme_and_empty_log_sum_exps():
    """Far-apart scores (one state's weight underflows), equal ones, an empty state (-inf) on
    either side, both empty (0 and -inf, not NaN), and large magnitudes."""
    dtype = torch.bfloat16
    v, _ = states(6, 2, 4, 128, dtype)
    inf = float("inf")
    s = torch.tensor([[100.0, 0.0], [0.0, 100.0], [5.0, 5.0], [-inf, 2.0], [3.0, -inf], [-inf, -inf]],
                     device="cuda")[:, :, None].expand(6, 2, 4).contiguous()
    s[:, :, 1] += 1e4  # the same rows at large log-sum-exps
    v_out, s_out = cutefi.merge_state(v[:, 0].clone(), s[:, 0].clone(), v[:, 1].clone(), s[:, 1].clone())
    assert_merged(v_out, s_out, *reference(v, s), dtype)
    assert torch.equal(v_out[5], torch.zeros_like(v_out[5])) and torch.isneginf(s_out[5]).all()
    assert torch.equal(v_out[3], v[3, 1]) and torch.equal(v_out[4], v[4, 0])  # the non-empty state, exactly


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("mask_dtype", [None, torch.bool, torch.uint8])
def test_merge_state_in_place(dtype, mask_dtype):
    torch.manual_seed(3)
    v, s = states(300, 2, 8, 128, dtype)
    target_v, target_s = v[:, 0].clone(), s[:, 0].clone()
    v_ref, s_ref = reference(v, s)
    mask = None
    if mask_dtype is not None:
        mask = (torch.rand(300, device="cuda") < 0.5).to(mask_dtype)
        keep = ~mask.bool()
        v_ref[keep], s_ref[keep] = v[keep, 0].double(), s[keep, 0].double()
    assert cutefi.merge_state_in_place(target_v, target_s, v[:, 1], s[:, 1], mask) is None
    assert_merged(target_v, target_s, v_ref, s_ref, dtype)
    if mask is not None:  # masked-off positions are bitwise untouched
        assert torch.equal(target_v[keep], v[keep, 0]) and torch.equal(target_s[keep], s[keep, 0])


def test_strided_and_sliced_views():
    """Views into wider buffers (aligned rows: the kernel reads them in place) and a transposed
    log-sum-exp tensor."""
    dtype = torch.bfloat16
    torch.manual_seed(5)
    wide = torch.randn(50, 2, 8, 160, device="cuda", dtype=dtype)
    v = wide[..., 16:144]  # head_dim 128 at a 32-byte offset, row stride 160
    s = torch.randn(50, 8, 2, device="cuda").transpose(1, 2)  # [n, states, heads], non-contiguous
    v_out, s_out = cutefi.merge_states(v, s)
    assert_merged(v_out, s_out, *reference(v, s), dtype)
    v_m, s_m = cutefi.merge_state(v[:, 0], s[:, 0], v[:, 1], s[:, 1])
    assert_merged(v_m, s_m, *reference(v, s), dtype)


def test_misaligned_and_differently_laid_out_states_are_merged_through_copies():
    dtype = torch.float16
    torch.manual_seed(6)
    v, s = states(40, 2, 4, 64, dtype)
    flat = torch.empty(40 * 4 * 64 + 1, device="cuda", dtype=dtype)
    v_a = flat[1:].view(40, 4, 64)  # 2 bytes past a 16-byte boundary
    v_a.copy_(v[:, 0])
    v_b = v[:, 1].transpose(0, 1).contiguous().transpose(0, 1)  # other strides than v_a
    v_out, s_out = cutefi.merge_state(v_a, s[:, 0], v_b, s[:, 1])
    assert_merged(v_out, s_out, *reference(v, s), dtype)
    target_s = s[:, 0].clone()
    cutefi.merge_state_in_place(v_a, target_s, v_b, s[:, 1])  # in place on the misaligned view
    assert_merged(v_a, target_s, *reference(v, s), dtype)


def test_inside_a_cuda_graph():
    dtype = torch.bfloat16
    v, s = states(64, 2, 8, 128, dtype)
    target_v, target_s = v[:, 0].clone(), s[:, 0].clone()
    other_v, other_s = v[:, 1].clone(), s[:, 1].clone()
    cutefi.merge_state_in_place(target_v.clone(), target_s.clone(), other_v, other_s)  # warm (load the kernel)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        cutefi.merge_state_in_place(target_v, target_s, other_v, other_s)
    target_v.copy_(v[:, 0])
    target_s.copy_(s[:, 0])
    graph.replay()
    torch.cuda.synchronize()
    assert_merged(target_v, target_s, *reference(v, s), dtype)


def test_bad_inputs_are_refused_clearly():
    v = torch.randn(4, 2, 64, device="cuda", dtype=torch.bfloat16)
    s = torch.randn(4, 2, device="cuda")
    with pytest.raises(TypeError, match="s_a .*must be float32"):
        cutefi.merge_state(v, s.int(), v, s)
    with pytest.raises(ValueError, match="s_b must have shape \\(4, 2\\)"):
        cutefi.merge_state(v, s, v, s[:3])
    with pytest.raises(ValueError, match="head_dim must be a multiple of 8"):
        cutefi.merge_state(v[..., :60], s, v[..., :60], s)
    with pytest.raises(TypeError, match="v_b dtype"):
        cutefi.merge_state(v, s, v.half(), s)
    with pytest.raises(ValueError, match="mask must be \\[seq_len\\]"):
        cutefi.merge_state_in_place(v.clone(), s.clone(), v, s, torch.ones(3, device="cuda", dtype=torch.bool))
    with pytest.raises(ValueError, match="one device"):
        cutefi.merge_state(v, s, v, s.cpu())
    with pytest.raises(ValueError, match="v must be 4-D"):
        cutefi.merge_states(v, s)


# ---- paged-KV index helpers ---------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [torch.int32, torch.int64])
def test_get_seq_lens_and_batch_indices_positions(dtype):
    torch.manual_seed(8)
    page_size = 16
    pages = torch.tensor([3, 0, 1, 7, 2], dtype=dtype)
    kv_indptr = torch.cat([torch.zeros(1, dtype=dtype), pages.cumsum(0)]).to(dtype)
    last = torch.tensor([5, 4, 16, 1, 9], dtype=dtype)
    lens = cutefi.get_seq_lens(kv_indptr.cuda(), last.cuda(), page_size).cpu()
    expected = [max(p - 1, 0) * page_size + lp for p, lp in zip(pages.tolist(), last.tolist())]
    assert lens.tolist() == expected
    appended = torch.tensor([2, 0, 1, 5, 1], dtype=dtype)
    append_indptr = torch.cat([torch.zeros(1, dtype=dtype), appended.cumsum(0)]).to(dtype)
    nnz = int(appended.sum())
    batch, positions = cutefi.get_batch_indices_positions(append_indptr.cuda(), lens.cuda(), nnz)
    assert batch.dtype == positions.dtype == torch.int32
    want_batch, want_pos = [], []
    for b, (count, length) in enumerate(zip(appended.tolist(), lens.tolist())):
        want_batch += [b] * count
        want_pos += list(range(length - count, length))
    assert batch.cpu().tolist() == want_batch and positions.cpu().tolist() == want_pos


@pytest.mark.parametrize("s_dtype", [torch.bfloat16, torch.float16, torch.float64])
def test_log_sum_exps_of_other_float_dtypes(s_dtype):
    """FlashInfer converts s to float32 first: merged against the reference of the converted
    values; the in-place form writes the merged s back in s's own dtype."""
    torch.manual_seed(5)
    v, s = states(33, 3, 4, 128, torch.bfloat16)
    s = s.to(s_dtype)
    ref_v, ref_s = reference(v[:, :2], s[:, :2].float())
    v_out, s_out = cutefi.merge_state(v[:, 0].clone(), s[:, 0].clone(), v[:, 1].clone(), s[:, 1].clone())
    assert s_out.dtype == torch.float32
    assert_merged(v_out, s_out, ref_v, ref_s, torch.bfloat16)
    v_in, s_in = v[:, 0].clone(), s[:, 0].clone()
    assert cutefi.merge_state_in_place(v_in, s_in, v[:, 1].clone(), s[:, 1].clone()) is None
    assert s_in.dtype == s_dtype  # (merged in float32, written back rounded to s's dtype)
    assert_merged(v_in, ref_s.float(), ref_v, ref_s, torch.bfloat16)
    torch.testing.assert_close(s_in.double(), ref_s, rtol=1e-2, atol=1e-2)
    all_v, all_s = cutefi.merge_states(v, s)
    assert_merged(all_v, all_s, *reference(v, s.float()), torch.bfloat16)
