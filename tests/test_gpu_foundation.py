"""GPU tier: the proof kernels through cutefi's own loader, against torch, on random data."""

import pytest
import torch

import cutefi

pytestmark = pytest.mark.gpu


def _poisoned_like(tensor):
    out = torch.empty_like(tensor)
    cutefi.poison_(out)
    return out


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
def test_poison_fills_every_element_with_nan(dtype):
    x = torch.randn(1000003, device="cuda").to(dtype)
    cutefi.poison_(x)
    torch.cuda.synchronize()
    assert torch.isnan(x).all()


@pytest.mark.parametrize("numel", [8, 1016, 8192, 65528, 1_000_000, 2**24 + 8, 3 * 2**27])
def test_vector_copy_matches_and_leaves_the_rest(numel):
    src = torch.randn(numel + 64, device="cuda", dtype=torch.bfloat16)
    dst = torch.full_like(src, float("nan"))
    cutefi.copy_(dst[:numel], src[:numel])
    torch.cuda.synchronize()
    assert torch.equal(dst[:numel], src[:numel])
    assert torch.isnan(dst[numel:]).all()  # nothing past the end was written


@pytest.mark.parametrize("m, n", [(1, 64), (7, 72), (128, 64), (129, 136), (1000, 4104), (4096, 4096), (3, 8)])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
def test_tma_cluster_copy(m, n, dtype):
    if (n * torch.tensor([], dtype=dtype).element_size()) % 16:
        pytest.skip("TMA rows must be 16-byte multiples")
    src = torch.randn(m, n, device="cuda").to(dtype)
    dst = _poisoned_like(src)
    cutefi.tma_copy_(dst, src)
    torch.cuda.synchronize()
    assert torch.equal(dst, src)


def test_tma_copy_strided_rows_leave_the_gaps():
    base = torch.randn(300, 256, device="cuda", dtype=torch.bfloat16)
    src = base[:, :200]
    dst_base = torch.full_like(base, float("nan"))
    dst = dst_base[:, :200]
    cutefi.tma_copy_(dst, src)
    torch.cuda.synchronize()
    assert torch.equal(dst, src)
    assert torch.isnan(dst_base[:, 200:]).all()


def test_cuda_graph_capture_and_replay():
    src = torch.randn(1 << 20, device="cuda", dtype=torch.float16)
    dst = torch.empty_like(src)
    cutefi.copy_(dst, src)  # load outside capture
    src2 = torch.randn(512, 1024, device="cuda", dtype=torch.bfloat16)
    dst2 = torch.empty_like(src2)
    cutefi.tma_copy_(dst2, src2)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        with torch.cuda.graph(graph, stream=stream):
            cutefi.copy_(dst, src)
            cutefi.tma_copy_(dst2, src2)
    for _ in range(3):
        src.copy_(torch.randn_like(src))
        src2.copy_(torch.randn_like(src2))
        cutefi.poison_(dst)
        cutefi.poison_(dst2)
        graph.replay()
        torch.cuda.synchronize()
        assert torch.equal(dst, src)
        assert torch.equal(dst2, src2)


def test_runs_on_a_non_default_stream():
    src = torch.randn(1 << 22, device="cuda", dtype=torch.float32)
    dst = _poisoned_like(src)
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        cutefi.copy_(dst, src)
    torch.cuda.current_stream().wait_stream(stream)
    torch.cuda.synchronize()
    assert torch.equal(dst, src)


def test_wrong_target_cubin_names_target_and_device():
    from cutefi.copy.launch import COPY_SPEC
    from cutefi.jit.loader import Kernel, KernelLoadError
    from cutefi.jit.lookup import find_artifact
    from cutefi.jit.targets import Target

    try:
        artifact = find_artifact(COPY_SPEC, Target(8, 0))
    except Exception as exc:
        pytest.skip(f"no sm_80 cubin here: {exc}")
    with pytest.raises(KernelLoadError, match="sm_80.*device 0"):
        Kernel(artifact, COPY_SPEC.launch_contract()).prepare(0)


def test_bad_inputs_raise_clear_errors():
    src = torch.randn(100, device="cuda", dtype=torch.float16)
    with pytest.raises(ValueError, match="multiple of 16"):
        cutefi.copy_(torch.empty_like(src[:-1]), src[:-1])
    with pytest.raises(ValueError, match="must match"):
        cutefi.copy_(torch.empty(96, device="cuda", dtype=torch.float32), src[:96])
    with pytest.raises(ValueError, match="contiguous"):
        cutefi.copy_(torch.empty(8, 8, device="cuda").t(), torch.randn(8, 8, device="cuda").t())
    with pytest.raises(ValueError, match="16-byte aligned"):
        cutefi.copy_(torch.empty(16, device="cuda", dtype=torch.float16), src[1:17])
    with pytest.raises(TypeError, match="dtype"):
        cutefi.tma_copy_(torch.empty(8, 8, device="cuda", dtype=torch.int32),
                         torch.zeros(8, 8, device="cuda", dtype=torch.int32))
