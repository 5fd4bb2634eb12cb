"""GPU tier: grouped GEMMs in one launch on Hopper: SegmentGEMMWrapper (bf16/fp16) and
group_gemm_fp8_nt_groupwise (FP8, block scales), against float32 references written here
(one matmul a segment over the dequantised inputs). Fresh random inputs; outputs poisoned
(NaN) first, so a row written by the wrong segment or not at all is seen; rows outside every
segment must keep the poison."""

from __future__ import annotations

import pytest
import torch

import cutefi

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(
    not torch.cuda.is_available() or torch.cuda.get_device_capability() != (9, 0), reason="grouped GEMM: Hopper only")]

REL = {torch.bfloat16: 6e-3, torch.float16: 3e-3}


def _indptr(lens: list[int], dtype=torch.int64) -> torch.Tensor:
    return torch.tensor([0, *torch.tensor(lens).cumsum(0).tolist()], dtype=dtype, device="cuda")


def _check_rows(out: torch.Tensor, ref: torch.Tensor, rows: slice) -> None:
    got, want = out[rows].float(), ref
    assert not torch.isnan(got).any(), "NaN: a row of a segment was never written"
    if want.numel():
        rel = ((got - want).norm() / want.norm().clamp(min=1e-6)).item()
        assert rel < REL[out.dtype] * 2, f"relative error {rel:.2e}"
        torch.testing.assert_close(got, want, rtol=2e-2, atol=2e-2 * want.abs().max().item())


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("column_major", [True, False])
@pytest.mark.parametrize("lens,d_in,d_out", [([1, 2, 3, 4], 128, 256), ([0, 130, 1, 0, 257, 64], 264, 520),
                                             ([512] * 8, 4096, 4096), ([300], 1000, 136)])
def test_segment_gemm(dtype, column_major, lens, d_in, d_out):
    gen = torch.Generator(device="cuda").manual_seed(sum(lens) + d_in)
    rows = sum(lens)
    x = torch.randn(rows, d_in, device="cuda", dtype=dtype, generator=gen)
    shape = (len(lens), d_out, d_in) if column_major else (len(lens), d_in, d_out)
    weights = torch.randn(shape, device="cuda", dtype=dtype, generator=gen) / d_in**0.5
    wrapper = cutefi.SegmentGEMMWrapper(torch.empty(1 << 20, dtype=torch.int8, device="cuda"))
    # (host seg_lens too: FlashInfer copies them over)
    for kwargs in (dict(seg_lens=torch.tensor(lens, device="cuda")), dict(seg_indptr=_indptr(lens, torch.int32)),
                   dict(seg_lens=torch.tensor(lens))):
        out = torch.full((rows, d_out), float("nan"), device="cuda", dtype=dtype)
        result = wrapper.run(x, weights, len(lens), column_major, out=out, **kwargs)
        assert result is out
        start = 0
        for s, length in enumerate(lens):
            w = weights[s].float()
            ref = x[start:start + length].float() @ (w.t() if column_major else w)
            _check_rows(out, ref, slice(start, start + length))
            start += length


def test_segment_gemm_weight_indices_and_uncovered_rows():
    """weight_indices repeating a weight; rows past the last segment are left as they were
    (a new output is zero-filled, as FlashInfer's)."""
    gen = torch.Generator(device="cuda").manual_seed(3)
    lens, d_in, d_out = [5, 140, 1, 33], 256, 384
    x = torch.randn(sum(lens) + 7, d_in, device="cuda", dtype=torch.bfloat16, generator=gen)
    weights = torch.randn(2, d_out, d_in, device="cuda", dtype=torch.bfloat16, generator=gen) / 16
    chosen = torch.tensor([1, 0, 1, 1], device="cuda")
    wrapper = cutefi.SegmentGEMMWrapper(torch.empty(1 << 20, dtype=torch.int8, device="cuda"))
    out = torch.full((x.shape[0], d_out), float("nan"), device="cuda", dtype=torch.bfloat16)
    wrapper.run(x, weights, 4, True, out=out, seg_indptr=_indptr(lens), weight_indices=chosen)
    start = 0
    for s, length in enumerate(lens):
        ref = x[start:start + length].float() @ weights[chosen[s]].float().t()
        _check_rows(out, ref, slice(start, start + length))
        start += length
    assert torch.isnan(out[start:]).all(), "rows outside every segment were written"
    fresh = wrapper.run(x, weights, 4, True, seg_indptr=_indptr(lens), weight_indices=chosen)
    assert (fresh[start:] == 0).all() and torch.equal(fresh[:start], out[:start])
    host = wrapper.run(x, weights, 4, True, seg_indptr=_indptr(lens).cpu(), weight_indices=chosen.cpu())
    assert torch.equal(host, fresh)  # (host index tensors: copied over, the same launch)


@pytest.mark.parametrize("segments", [33, 100, 1024])
def test_segment_gemm_many_segments(segments):
    """More segments than one round of the kernel's tile count (32 a round, up to MAX_GROUPS),
    empty ones among them, default weight_indices, a fresh output."""
    gen = torch.Generator(device="cuda").manual_seed(segments)
    lens = torch.randint(0, 6, (segments,), generator=gen, device="cuda")
    lens[::7] = 0
    lens[1::11] = 130  # (segments of two M tiles)
    rows, d_in, d_out = int(lens.sum()), 128, 64
    x = torch.randn(rows, d_in, device="cuda", dtype=torch.bfloat16, generator=gen)
    weights = torch.randn(segments, d_out, d_in, device="cuda", dtype=torch.bfloat16, generator=gen) / 8
    wrapper = cutefi.SegmentGEMMWrapper(torch.empty(1 << 20, dtype=torch.int8, device="cuda"))
    out = wrapper.run(x, weights, segments, True, seg_lens=lens)
    owner = torch.repeat_interleave(torch.arange(segments, device="cuda"), lens)  # (each row's segment)
    ref = torch.bmm(x.float()[:, None, :], weights[owner].float().transpose(1, 2))[:, 0]
    _check_rows(out, ref, slice(0, rows))


def test_segment_gemm_in_a_cuda_graph():
    """Captured once, replayed with new segment lengths written into the same index tensor."""
    gen = torch.Generator(device="cuda").manual_seed(4)
    x = torch.randn(600, 256, device="cuda", dtype=torch.bfloat16, generator=gen)
    weights = torch.randn(3, 128, 256, device="cuda", dtype=torch.bfloat16, generator=gen) / 16
    indptr = _indptr([100, 200, 300])
    out = torch.zeros(600, 128, device="cuda", dtype=torch.bfloat16)
    wrapper = cutefi.SegmentGEMMWrapper(torch.empty(1 << 20, dtype=torch.int8, device="cuda"))
    wrapper.run(x, weights, 3, True, out=out, seg_indptr=indptr)  # (loads the kernel)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        wrapper.run(x, weights, 3, True, out=out, seg_indptr=indptr)
    indptr.copy_(_indptr([1, 400, 199]))
    out.fill_(float("nan"))
    graph.replay()
    torch.cuda.synchronize()
    for s, (start, end) in enumerate(((0, 1), (1, 401), (401, 600))):
        _check_rows(out, x[start:end].float() @ weights[s].float().t(), slice(start, end))


@pytest.mark.parametrize("fp8", [torch.float8_e4m3fn, torch.float8_e5m2])
@pytest.mark.parametrize("mode", ["MN", "K"])
@pytest.mark.parametrize("lens,n,k", [([0, 1, 130, 300], 256, 512), ([512] * 8, 4096, 1024), ([64, 3], 136, 2064),
                                      ([300, 520, 0, 700, 129], 1544, 512), ([0, 3, 129, 0, 1] * 8, 256, 256),
                                      ([1, 2, 0, 31, 32, 33, 64, 65], 392, 1024)])
def test_group_gemm_fp8_groupwise(fp8, mode, lens, n, k):
    """Ragged experts (empty, one row, tiles ending mid-expert) against a float32 reference; the
    fourth case's N ends mid weight block and its experts' last tiles overlap the next expert's
    rows; the fifth has 40 experts (two rounds of the kernel's tile count). Experts of 64 rows
    or fewer on average take the swapped builds (the third, fifth and sixth cases: 64-, 32- and
    32-token tiles; N 136 and 392 end mid weight block, and the weight's last row tile moves
    back to end on N)."""
    gen = torch.Generator(device="cuda").manual_seed(sum(lens) + n)
    rows, experts = sum(lens), len(lens)
    x = torch.randn(rows, k, device="cuda", generator=gen)
    w = torch.randn(experts, n, k, device="cuda", generator=gen)
    a, a_scale = cutefi.quantize_fp8(x, fp8, group_shape=(1, 128))
    quantised = [cutefi.quantize_fp8(w[e], fp8, group_shape=(128, 128)) for e in range(experts)]
    b = torch.stack([q for q, _ in quantised])
    b_scale = torch.stack([s for _, s in quantised])  # [experts, N/128, K/128]
    if mode == "MN":
        a_scale_arg, b_scale_arg = a_scale.t().contiguous(), b_scale.transpose(1, 2).contiguous()
    else:
        a_scale_arg, b_scale_arg = a_scale, b_scale
    out = torch.full((rows, n), float("nan"), device="cuda", dtype=torch.bfloat16)
    result = cutefi.group_gemm_fp8_nt_groupwise(a, b, a_scale_arg, b_scale_arg, _indptr(lens, torch.int32),
                                                scale_major_mode=mode, out=out)
    assert result is out
    start = 0
    for e, length in enumerate(lens):
        a_deq = a[start:start + length].float() * a_scale[start:start + length].repeat_interleave(128, 1)[:, :k]
        b_deq = b[e].float() * b_scale[e].repeat_interleave(128, 0)[:n].repeat_interleave(128, 1)[:, :k]
        _check_rows(out, a_deq @ b_deq.t(), slice(start, start + length))
        start += length


def test_group_gemm_fp8_repeated_layout_reads_each_calls_pointers():
    """Eager calls keep a checked launch per layout: a second call of the same layout with
    other tensors (int64 m_indptr, a new output) computes on them, and a misaligned one of the
    same layout is still refused."""
    gen = torch.Generator(device="cuda").manual_seed(21)
    lens, n, k = [70, 0, 190], 256, 384
    rows, experts = sum(lens), len(lens)
    indptr = _indptr(lens)  # (int64: converted every call)
    for _ in range(2):
        x = torch.randn(rows, k, device="cuda", generator=gen)
        w = torch.randn(experts, n, k, device="cuda", generator=gen)
        a, a_scale = cutefi.quantize_fp8(x, group_shape=(1, 128))
        quantised = [cutefi.quantize_fp8(w[e], group_shape=(128, 128)) for e in range(experts)]
        b, b_scale = torch.stack([q for q, _ in quantised]), torch.stack([s for _, s in quantised])
        out = cutefi.group_gemm_fp8_nt_groupwise(a, b, a_scale, b_scale, indptr, scale_major_mode="K")
        start = 0
        for e, length in enumerate(lens):
            a_deq = a[start:start + length].float() * a_scale[start:start + length].repeat_interleave(128, 1)
            b_deq = b[e].float() * b_scale[e].repeat_interleave(128, 0).repeat_interleave(128, 1)
            _check_rows(out, a_deq @ b_deq.t(), slice(start, start + length))
            start += length
    shifted = torch.empty(rows * k + 1, device="cuda", dtype=a.dtype)[1:].view(rows, k)
    shifted.copy_(a)
    with pytest.raises(ValueError, match="a must start on a 16-byte boundary"):
        cutefi.group_gemm_fp8_nt_groupwise(shifted, b, a_scale, b_scale, indptr, scale_major_mode="K")


def test_refusals():
    x = torch.zeros(8, 128, device="cuda", dtype=torch.bfloat16)
    weights = torch.zeros(2, 64, 128, device="cuda", dtype=torch.bfloat16)
    wrapper = cutefi.SegmentGEMMWrapper(torch.empty(16, dtype=torch.int8, device="cuda"))
    with pytest.raises(ValueError, match="seg_lens or seg_indptr"):
        wrapper.run(x, weights, 2, True)
    with pytest.raises(ValueError, match="seg_indptr must be a 1-D int32 or int64 tensor of 3"):
        wrapper.run(x, weights, 2, True, seg_indptr=torch.tensor([0, 8], device="cuda"))
    with pytest.raises(ValueError, match="do not take d_in=128"):
        wrapper.run(x, weights, 2, False, seg_lens=torch.tensor([4, 4], device="cuda"))
    with pytest.raises(TypeError, match="bfloat16 or float16"):
        wrapper.run(x.float(), weights, 2, True, seg_lens=torch.tensor([4, 4], device="cuda"))


def test_segment_bounds_past_the_rows_write_nothing_outside_out():
    """Segment bounds are not checked on the host (that would synchronise): bounds past x's rows
    (or before row 0) must not write outside out. out is a window of a poisoned buffer."""
    gen = torch.Generator(device="cuda").manual_seed(8)
    x = torch.randn(200, 128, device="cuda", dtype=torch.bfloat16, generator=gen)
    weights = torch.randn(2, 64, 128, device="cuda", dtype=torch.bfloat16, generator=gen) / 8
    buffer = torch.full((600, 64), float("nan"), device="cuda", dtype=torch.bfloat16)
    out = buffer[200:400]
    wrapper = cutefi.SegmentGEMMWrapper(torch.empty(1 << 20, dtype=torch.int8, device="cuda"))
    wrapper.run(x, weights, 2, True, out=out, seg_indptr=torch.tensor([150, 190, 330], device="cuda"))
    torch.cuda.synchronize()
    assert torch.isnan(buffer[:200]).all() and torch.isnan(buffer[400:]).all(), "written outside out"
    _check_rows(out, x[150:190].float() @ weights[0].float().t(), slice(150, 190))
    _check_rows(out, x[190:200].float() @ weights[1].float().t(), slice(190, 200))
    wrapper.run(x, weights, 2, True, out=out, seg_indptr=torch.tensor([-70, 10, 20], device="cuda"))
    torch.cuda.synchronize()
    assert torch.isnan(buffer[:200]).all() and torch.isnan(buffer[400:]).all(), "written outside out"
