"""GPU tier: dense GEMM (mm_bf16, mm_fp16, bmm_bf16, bmm_fp16) against a float32 reference
written here, on fresh random inputs, outputs poisoned (NaN) first.

Error measure: relative L2 error of the whole output against ``a.float() @ b.float()`` (+ bias),
bounded by the output dtype's rounding (bf16 ~ 2^-9, fp16 ~ 2^-12, plus fp32 accumulation in
another order), and an elementwise bound scaled by sqrt(K).
"""

from __future__ import annotations

import pytest
import torch

import cutefi
from cutefi.gemm import launch
from cutefi.gemm.plan import override

pytestmark = pytest.mark.gpu

REL = {torch.bfloat16: 6e-3, torch.float16: 1.5e-3}
MM = {torch.bfloat16: cutefi.mm_bf16, torch.float16: cutefi.mm_fp16}
BMM = {torch.bfloat16: cutefi.bmm_bf16, torch.float16: cutefi.bmm_fp16}


def reference(a: torch.Tensor, b: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    out = a.float() @ b.float()
    return out + bias.float() if bias is not None else out


def weight_t(k: int, n: int, dtype: torch.dtype) -> torch.Tensor:
    """b [K, N] as nn.Linear holds it: the transposed view of a contiguous [N, K] weight."""
    return torch.randn(n, k, device="cuda", dtype=dtype).t()


def assert_gemm(out: torch.Tensor, ref: torch.Tensor, dtype: torch.dtype, out_dtype: torch.dtype) -> None:
    assert out.dtype == out_dtype
    assert not torch.isnan(out).any(), "NaN: an element was never written"
    rel = ((out.float() - ref).norm() / ref.norm()).item()
    assert rel < max(REL[dtype], REL[out_dtype]), f"relative error {rel:.2e}"
    k_scale = ref.abs().max().item()
    torch.testing.assert_close(out.float(), ref, rtol=3e-2, atol=3e-2 * k_scale)


def poisoned(shape, dtype) -> torch.Tensor:
    return torch.full(shape, float("nan"), device="cuda", dtype=dtype)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("m,n,k", [(1, 4096, 4096), (7, 1000, 1000), (64, 256, 512), (1000, 1000, 1000),
                                   (129, 264, 72), (4096, 4096, 4096), (8, 8, 8), (300, 4104, 8)])
def test_mm_weight_layout(dtype, m, n, k):
    torch.manual_seed(m * 31 + n)
    a = torch.randn(m, k, device="cuda", dtype=dtype)
    b = weight_t(k, n, dtype)
    out = poisoned((m, n), dtype)
    result = MM[dtype](a, b, out=out, out_dtype=dtype)
    assert result is out
    assert_gemm(out, reference(a, b), dtype, dtype)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("m,n,k", [(1, 512, 256), (77, 1000, 520), (1000, 1000, 1000), (2048, 2048, 1024)])
def test_mm_row_major_b(dtype, m, n, k):
    torch.manual_seed(m + n)
    a = torch.randn(m, k, device="cuda", dtype=dtype)
    b = torch.randn(k, n, device="cuda", dtype=dtype)
    assert_gemm(MM[dtype](a, b, out_dtype=dtype), reference(a, b), dtype, dtype)


@pytest.mark.parametrize("config", [c.name for c in launch.CONFIGS if not c.swap])
@pytest.mark.parametrize("b_layout", ["col", "row"])
def test_every_config(config, b_layout):
    if b_layout == "row" and (config.endswith("c2") or config.startswith("128x224")):
        pytest.skip("multicast and 224-wide builds take a K-major B only")
    torch.manual_seed(7)
    m, n, k = 777, 1160, 1032  # partial tiles in M, N and K; an odd number of M tiles
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    b = weight_t(k, n, torch.bfloat16) if b_layout == "col" else torch.randn(k, n, device="cuda",
                                                                             dtype=torch.bfloat16)
    for group_m in (1, 3, 8):
        out = poisoned((m, n), torch.bfloat16)
        with override(config=config, group_m=group_m):
            cutefi.mm_bf16(a, b, out=out)
        assert_gemm(out, reference(a, b), torch.bfloat16, torch.bfloat16)


@pytest.mark.parametrize("m,n,k,splits", [(1, 4096, 4096, None), (16, 1024, 8192, None), (7, 520, 1000, 3),
                                          (100, 264, 4104, 5), (16, 4096, 14336, None), (129, 136, 2048, 16)])
def test_split_k(m, n, k, splits):
    """Decode-sized problems cut K into splits; the last split of each tile sums them. Run twice
    (the tile counters must be back at zero) and with a bias."""
    torch.manual_seed(m + k)
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    b = weight_t(k, n, torch.bfloat16)
    bias = torch.randn(n, device="cuda", dtype=torch.bfloat16)
    hopper = "128x64c1" if m <= launch.SKINNY_MAX_M else None  # (else the decode-sized kernel)
    with override(config=hopper, splits=splits):
        for _ in range(2):
            out = poisoned((m, n), torch.bfloat16)
            cutefi.mm_bf16(a, b, bias=bias, out=out)
            assert_gemm(out, reference(a, b, bias), torch.bfloat16, torch.bfloat16)
    with override(config=hopper):
        plan = cutefi.gemm.plan.launch_plan(m, n, k, 1, torch.cuda.get_device_properties(0).multi_processor_count,
                                            True)
    assert splits is not None or plan.splits > 1, "the heuristic was meant to split these"


SKINNY_SHAPES = [(1, 1000, 1000), (5, 4104, 4096), (8, 8, 8), (9, 1000, 4104), (16, 264, 2056), (16, 24, 40)]


@pytest.mark.parametrize("config", [c.name for c in launch.SKINNY_CONFIGS])
def test_skinny_every_config(config):
    """The decode-sized kernel: rows past N in a row block, K past the last full step (and
    K below one chunk), every token count of its token tiles, with and without K splits;
    split runs twice (the counters must be back at zero) and with a bias."""
    token_tiles = int(config[1])
    for m, n, k in SKINNY_SHAPES:
        if m > 8 * token_tiles:
            continue
        torch.manual_seed(m * 7 + k)
        a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        b = weight_t(k, n, torch.bfloat16)
        bias = torch.randn(n, device="cuda", dtype=torch.bfloat16)
        for splits in (1, 3, None):
            with override(config=config, splits=splits):
                for _ in range(2 if splits != 1 else 1):
                    out = poisoned((m, n), torch.bfloat16)
                    cutefi.mm_bf16(a, b, bias=bias, out=out)
                    assert_gemm(out, reference(a, b, bias), torch.bfloat16, torch.bfloat16)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("m", [1, 2, 7, 8, 9, 15, 16])
def test_decode_default_plan(dtype, m):
    """What a decode step gets by default (the mma.sync decode kernel; Hopper keeps it up to
    4096 weight rows): every M up to 16, both output dtypes, strided rows of a and out (slices
    of wider buffers), nothing written outside out."""
    torch.manual_seed(m)
    n, k = 4040, 4096 + 56  # (rows past the last 32-row block; Hopper keeps this kernel up to 4096 rows)
    a = torch.randn(m, k + 24, device="cuda", dtype=dtype)[:, 8:8 + k]
    b = weight_t(k, n, dtype)
    assert isinstance(cutefi.gemm.plan.launch_plan(m, n, k, 1, 132, True), cutefi.gemm.plan.SkinnyPlan)
    other = torch.float16 if dtype == torch.bfloat16 else torch.bfloat16
    for out_dtype in (dtype, other):
        out_buf = poisoned((m + 2, n + 16), out_dtype)
        out = out_buf[1:m + 1, 8:8 + n]
        MM[dtype](a, b, out=out, out_dtype=out_dtype)
        assert_gemm(out, reference(a, b), dtype, out_dtype)
        outside = torch.ones_like(out_buf, dtype=torch.bool)
        outside[1:m + 1, 8:8 + n] = False
        assert torch.isnan(out_buf[outside]).all(), "a write landed outside out"


@pytest.mark.parametrize("config", [None, "128x16c1k2t"])
def test_decode_graph_side_stream_pdl(config):
    """Split-K decode GEMM (the default plan: the mma.sync decode kernel; and the swapped Hopper
    build, K split in a cluster) replayed from a CUDA graph (the counters reset inside it), on
    a side stream, and with PDL: all equal to the plain call."""
    torch.manual_seed(17)
    a = torch.randn(4, 8192, device="cuda", dtype=torch.bfloat16)
    b = weight_t(8192, 1024, torch.bfloat16)
    with override(config=config):
        _graph_side_stream_pdl(a, b)


def _graph_side_stream_pdl(a, b, split_k: bool = True):
    """``mm_bf16(a, b)`` (the build in force) replayed from a CUDA graph, on a side stream and
    with PDL: all equal to the plain call; ``split_k``: the plan splits K (its counters reset)."""
    plain = cutefi.mm_bf16(a, b)
    if split_k:
        assert cutefi.gemm.plan.launch_plan(4, 1024, 8192, 1, 132, True).splits > 1
    assert_gemm(plain, reference(a, b), torch.bfloat16, torch.bfloat16)
    torch.testing.assert_close(cutefi.mm_bf16(a, b, pdl=True), plain, rtol=0, atol=0)
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        side = cutefi.mm_bf16(a, b)
    stream.synchronize()
    torch.testing.assert_close(side, plain, rtol=0, atol=0)
    out = torch.empty_like(plain)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        cutefi.mm_bf16(a, b, out=out)
    for _ in range(3):
        out.fill_(float("nan"))
        graph.replay()
    torch.cuda.synchronize()
    torch.testing.assert_close(out, plain, rtol=0, atol=0)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_bias_and_out_dtype(dtype):
    torch.manual_seed(3)
    m, n, k = 300, 776, 1024
    a = torch.randn(m, k, device="cuda", dtype=dtype)
    b = weight_t(k, n, dtype)
    bias = torch.randn(n, device="cuda", dtype=dtype) * 4
    other = torch.float16 if dtype == torch.bfloat16 else torch.bfloat16
    for out_dtype in (dtype, other):
        out = MM[dtype](a, b, bias=bias, out_dtype=out_dtype)
        assert_gemm(out, reference(a, b, bias), dtype, out_dtype)


def test_strided_views_and_partial_writes():
    """Row strides above the extent (slices of wider buffers); nothing outside out is written."""
    torch.manual_seed(5)
    m, n, k = 200, 520, 264
    a_buf = torch.randn(m, k + 40, device="cuda", dtype=torch.bfloat16)
    w_buf = torch.randn(n, k + 24, device="cuda", dtype=torch.bfloat16)
    a, b = a_buf[:, 8:8 + k], w_buf[:, :k].t()
    out_buf = poisoned((m + 2, n + 16), torch.bfloat16)
    out = out_buf[1:m + 1, 8:8 + n]
    cutefi.mm_bf16(a, b, out=out)
    assert_gemm(out, reference(a, b), torch.bfloat16, torch.bfloat16)
    outside = torch.ones_like(out_buf, dtype=torch.bool)
    outside[1:m + 1, 8:8 + n] = False
    assert torch.isnan(out_buf[outside]).all(), "a write landed outside out"


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("batch,m,n,k", [(1, 64, 128, 64), (3, 257, 520, 136), (16, 48, 80, 64), (1, 5, 64, 256),
                                         (1, 9, 8192, 64)])
def test_bmm(dtype, batch, m, n, k):
    torch.manual_seed(batch * m)
    a = torch.randn(batch, m, k, device="cuda", dtype=dtype)
    b_col = torch.randn(batch, n, k, device="cuda", dtype=dtype).transpose(-2, -1)
    b_row = torch.randn(batch, k, n, device="cuda", dtype=dtype)
    for b in (b_col, b_row):
        out = poisoned((batch, m, n), dtype)
        BMM[dtype](a, b, out=out, out_dtype=dtype)
        assert_gemm(out, reference(a, b), dtype, dtype)


def test_empty_and_k_zero():
    a = torch.randn(0, 64, device="cuda", dtype=torch.bfloat16)
    assert cutefi.mm_bf16(a, weight_t(64, 128, torch.bfloat16)).shape == (0, 128)
    a = torch.randn(5, 0, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(0, 16, device="cuda", dtype=torch.bfloat16)
    bias = torch.randn(16, device="cuda", dtype=torch.bfloat16)
    torch.testing.assert_close(cutefi.mm_bf16(a, b, bias=bias), bias.expand(5, 16))


def test_any_current_device_and_side_stream():
    torch.manual_seed(9)
    a = torch.randn(333, 512, device="cuda", dtype=torch.bfloat16)
    b = weight_t(512, 768, torch.bfloat16)
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        out = cutefi.mm_bf16(a, b)
    stream.synchronize()
    assert_gemm(out, reference(a, b), torch.bfloat16, torch.bfloat16)


def test_cuda_graph_replay():
    torch.manual_seed(11)
    a = torch.randn(256, 1024, device="cuda", dtype=torch.bfloat16)
    b = weight_t(1024, 2048, torch.bfloat16)
    out = torch.empty(256, 2048, device="cuda", dtype=torch.bfloat16)
    cutefi.mm_bf16(a, b, out=out)  # load the kernel outside capture
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        cutefi.mm_bf16(a, b, out=out)
    a.copy_(torch.randn_like(a))
    out.fill_(float("nan"))
    graph.replay()
    torch.cuda.synchronize()
    assert_gemm(out, reference(a, b), torch.bfloat16, torch.bfloat16)


def test_pdl_matches():
    torch.manual_seed(13)
    a = torch.randn(512, 1024, device="cuda", dtype=torch.bfloat16)
    b = weight_t(1024, 1024, torch.bfloat16)
    torch.testing.assert_close(cutefi.mm_bf16(a, b, pdl=True), cutefi.mm_bf16(a, b), rtol=0, atol=0)


def test_torch_compile_fullgraph():
    a = torch.randn(96, 512, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(1024, 512, device="cuda", dtype=torch.bfloat16)
    bias = torch.randn(1024, device="cuda", dtype=torch.bfloat16)

    def block(x):
        return torch.relu(cutefi.mm_bf16(x, w.t(), bias=bias)) * 2

    compiled = torch.compile(block, fullgraph=True)
    torch.testing.assert_close(compiled(a), block(a), rtol=0, atol=0)


def test_bad_inputs_are_refused():
    a = torch.randn(16, 64, device="cuda", dtype=torch.bfloat16)
    b = weight_t(64, 128, torch.bfloat16)
    with pytest.raises(ValueError, match="K must match"):
        cutefi.mm_bf16(a, weight_t(32, 128, torch.bfloat16))
    with pytest.raises(ValueError, match="multiples of 8"):
        cutefi.mm_bf16(torch.randn(16, 60, device="cuda", dtype=torch.bfloat16), weight_t(60, 128, torch.bfloat16))
    with pytest.raises(ValueError, match="contiguous rows"):
        cutefi.mm_bf16(torch.randn(64, 16, device="cuda", dtype=torch.bfloat16).t(), b)
    with pytest.raises(TypeError, match="torch.bfloat16"):
        cutefi.mm_bf16(a.half(), b)
    with pytest.raises(ValueError, match="bias"):
        cutefi.mm_bf16(a, b, bias=torch.randn(64, device="cuda", dtype=torch.bfloat16))
    with pytest.raises(ValueError, match="out must be"):
        cutefi.mm_bf16(a, b, out=torch.empty(16, 128, device="cuda", dtype=torch.float16))
    with pytest.raises(ValueError, match="backend"):
        cutefi.mm_bf16(a, b, backend="cublas")
    with pytest.raises(ValueError, match="cpu"):
        cutefi.mm_bf16(a, b.cpu())


@pytest.mark.parametrize("config", [c.name for c in launch.SM80_CONFIGS])
@pytest.mark.parametrize("b_layout", ["col", "row"])
def test_mma_sync_every_config(config, b_layout):
    """The mma.sync kernel (what every GPU but Hopper runs; forced here): partial tiles in M,
    N and K (K below one K tile too), M = 1, a bias, fp16 out, strided rows of every operand,
    nothing written outside out."""
    for m, n, k in [(777, 1160, 1032), (1, 8, 8), (33, 264, 40), (256, 512, 4096)]:
        torch.manual_seed(m + n + k)
        a = torch.randn(m, k + 16, device="cuda", dtype=torch.bfloat16)[:, 8:8 + k]
        if b_layout == "col":
            b = torch.randn(n, k + 8, device="cuda", dtype=torch.bfloat16)[:, :k].t()
        else:
            b = torch.randn(k, n + 8, device="cuda", dtype=torch.bfloat16)[:, :n]
        bias = torch.randn(n, device="cuda", dtype=torch.bfloat16)
        for out_dtype in (torch.bfloat16, torch.float16):
            out_buf = poisoned((m + 2, n + 16), out_dtype)
            out = out_buf[1:m + 1, 8:8 + n]
            with override(config=config):
                cutefi.mm_bf16(a, b, bias=bias, out=out, out_dtype=out_dtype)
            assert_gemm(out, reference(a, b, bias), torch.bfloat16, out_dtype)
            outside = torch.ones_like(out_buf, dtype=torch.bool)
            outside[1:m + 1, 8:8 + n] = False
            assert torch.isnan(out_buf[outside]).all(), "a write landed outside out"


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_mma_sync_bmm_and_default_plan(dtype):
    """bmm on the mma.sync kernel, both B layouts; and the plan a non-Hopper GPU gets."""
    torch.manual_seed(21)
    batch, m, n, k = 3, 257, 520, 136
    a = torch.randn(batch, m, k, device="cuda", dtype=dtype)
    for b in (torch.randn(batch, n, k, device="cuda", dtype=dtype).transpose(-2, -1),
              torch.randn(batch, k, n, device="cuda", dtype=dtype)):
        out = poisoned((batch, m, n), dtype)
        with override(config="128x128x32s4"):
            BMM[dtype](a, b, out=out, out_dtype=dtype)
        assert_gemm(out, reference(a, b), dtype, dtype)
    plan = cutefi.gemm.plan.launch_plan(4096, 4096, 4096, 1, 132, True, wgmma=False)
    assert isinstance(plan, cutefi.gemm.plan.Sm80Plan)


@pytest.mark.parametrize("config", [c.name for c in launch.CONFIGS if c.swap])
def test_swapped_hopper_build(config):
    """Hopper's weight-as-A builds (up to 64 tokens by default): tokens past a token tile, weight
    rows past a row tile, K past a K tile, a bias, fp16 out, strided a and out, with and
    without K splits (run twice: counters back at zero; split in a cluster: K shorter than
    the splits too; the weight multicast to token tiles: an odd count of them, so a
    cluster's second CTA may hold none); nothing written outside out."""
    for m, n, k in [(17, 1000, 1032), (64, 4104, 4096), (100, 264, 520), (1, 8, 8), (33, 8192, 1024),
                    (200, 1000, 1032)]:
        torch.manual_seed(m * 3 + n)
        a = torch.randn(m, k + 16, device="cuda", dtype=torch.bfloat16)[:, 8:8 + k]
        b = weight_t(k, n, torch.bfloat16)
        bias = torch.randn(n, device="cuda", dtype=torch.bfloat16)
        parsed = cutefi.gemm.plan.parse_config(config)
        in_cluster = parsed.cluster_k > 1 or parsed.cluster_n > 1  # (its own split count only)
        runs = ((None, torch.bfloat16), (None, torch.float16)) if in_cluster else \
            ((1, torch.bfloat16), (3, torch.float16), (None, torch.bfloat16))
        for splits, out_dtype in runs:
            with override(config=config, splits=splits):
                for _ in range(2):
                    out_buf = poisoned((m + 2, n + 16), out_dtype)
                    out = out_buf[1:m + 1, 8:8 + n]
                    cutefi.mm_bf16(a, b, bias=bias, out=out, out_dtype=out_dtype)
                    assert_gemm(out, reference(a, b, bias), torch.bfloat16, out_dtype)
                    outside = torch.ones_like(out_buf, dtype=torch.bool)
                    outside[1:m + 1, 8:8 + n] = False
                    assert torch.isnan(out_buf[outside]).all(), "a write landed outside out"


@pytest.mark.parametrize("m", [17, 24, 32, 40, 64])
def test_swapped_default_plan(m):
    torch.manual_seed(m)
    a = torch.randn(m, 4096, device="cuda", dtype=torch.float16)
    b = weight_t(4096, 4096, torch.float16)
    assert cutefi.gemm.plan.launch_plan(m, 4096, 4096, 1, 132, True).config.swap
    out = poisoned((m, 4096), torch.float16)
    cutefi.mm_fp16(a, b, out=out)
    assert_gemm(out, reference(a, b), torch.float16, torch.float16)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("m,k", [(200, 1032), (777, 520)])
def test_224_wide_default_plan(dtype, m, k):
    """A weight of 14336 rows under a few waves of 128 x 256 tiles: 128 x 224 tiles by default
    (64 of them across N, none partial), partial M and K tiles; guard columns stay untouched."""
    torch.manual_seed(m)
    n = 14336
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    if cutefi.gemm.plan.launch_plan(m, n, k, 1, sms, True).config != launch.Sm90Config(128, 224, 1):
        pytest.skip(f"{sms} SMs: the plan takes another tile here")
    a = torch.randn(m, k, device="cuda", dtype=dtype)
    b = weight_t(k, n, dtype)
    buf = poisoned((m, n + 16), dtype)
    MM[dtype](a, b, out=buf[:, 8:n + 8])
    assert_gemm(buf[:, 8:n + 8], reference(a, b), dtype, dtype)
    assert torch.isnan(buf[:, :8]).all() and torch.isnan(buf[:, n + 8:]).all(), "a write landed outside out"


def test_split_k_on_two_streams_at_once():
    """Split-K GEMMs queued on two streams with no ordering between them: each stream has its
    own partials and counters, so every result is right (shared scratch would race)."""
    torch.manual_seed(23)
    problems = [(32, 4096, 8192), (4, 1024, 8192)]  # (both split: workspace meetings, cluster pairs)
    inputs = [(torch.randn(m, k, device="cuda", dtype=torch.bfloat16), weight_t(k, n, torch.bfloat16))
              for m, n, k in problems]
    refs = [reference(a, b) for a, b in inputs]
    for (m, n, k) in problems:
        assert cutefi.gemm.plan.launch_plan(m, n, k, 1, 132, True).splits > 1
    streams = [torch.cuda.Stream(), torch.cuda.Stream()]
    outs = [[], []]
    for stream in streams:
        stream.wait_stream(torch.cuda.current_stream())
    for _ in range(20):
        for index, stream in enumerate(streams):
            with torch.cuda.stream(stream):
                for a, b in inputs:
                    outs[index].append(cutefi.mm_bf16(a, b))
    torch.cuda.synchronize()
    for per_stream in outs:
        for i, out in enumerate(per_stream):
            assert_gemm(out, refs[i % 2], torch.bfloat16, torch.bfloat16)


@pytest.mark.parametrize("config", [c.name for c in launch.CONFIGS if c.cluster_k > 1])
def test_cluster_split_k(config):
    """K split over a cluster of two CTAs that sum their partials through distributed shared
    memory (and over two or three such clusters, whose half-tile shares then meet in the
    workspace): uneven splits, splits with no K at all (K of one tile), partial tiles, a bias
    and fp16 out; the sums do not depend on which CTA finishes first (bitwise the same
    twice); the same under CUDA-graph replay and on a side stream."""
    swapped = cutefi.gemm.plan.parse_config(config).swap
    shapes = [(16, 1000, 1032), (40, 4104, 8), (64, 264, 4096)] if swapped else \
        [(256, 4096, 4096), (200, 1000, 1032), (129, 136, 8)]
    for m, n, k in shapes:
        torch.manual_seed(m + n + k)
        a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        b = weight_t(k, n, torch.bfloat16)
        bias = torch.randn(n, device="cuda", dtype=torch.bfloat16)
        for splits in (4, 6):  # (two and three clusters a tile: their shares meet in the workspace)
            with override(config=config, splits=splits):
                for _ in range(2):  # (the counters are back at zero)
                    out = poisoned((m, n), torch.float16)
                    cutefi.mm_bf16(a, b, bias=bias, out=out, out_dtype=torch.float16)
                    assert_gemm(out, reference(a, b, bias), torch.bfloat16, torch.float16)
        with override(config=config):
            for out_dtype in (torch.bfloat16, torch.float16):
                first = cutefi.mm_bf16(a, b, bias=bias, out_dtype=out_dtype)
                assert_gemm(first, reference(a, b, bias), torch.bfloat16, out_dtype)
                assert torch.equal(first, cutefi.mm_bf16(a, b, bias=bias, out_dtype=out_dtype))
            out = poisoned((m, n), torch.bfloat16)
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                cutefi.mm_bf16(a, b, bias=bias, out=out)
            torch.cuda.current_stream().wait_stream(side)
            assert torch.equal(out, cutefi.mm_bf16(a, b, bias=bias))
            graph_out = poisoned((m, n), torch.bfloat16)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                cutefi.mm_bf16(a, b, bias=bias, out=graph_out)
            graph.replay()
            torch.cuda.synchronize()
            assert torch.equal(graph_out, out)
