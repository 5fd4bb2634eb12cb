"""GPU tier: programmatic dependent launch (PDL) never reads stale data.

A chain of dependent norm calls (each reads what the previous one wrote, in place and out of
place, fused add included) gives bit-identical results with PDL on and off, on the default
stream, on a side stream and inside a CUDA graph; and the launches really carry the PDL
attribute on sm_90+ (the kernel is marked as waiting for its inputs).
"""

from __future__ import annotations

import pytest
import torch

import cutefi

pytestmark = pytest.mark.gpu

STEPS = 24


def reference_chain(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """float32 reference of the chain below (FlashInfer's fused-add definition, rounded per step)."""
    x, residual = x.float(), residual.float()
    for _ in range(STEPS):
        s = x + residual  # fp32 sum: normalised unrounded, stored rounded (FlashInfer's definition)
        residual = s.to(torch.bfloat16).float()
        x = (s * torch.rsqrt(s.pow(2).mean(-1, keepdim=True) + 1e-6) * weight.float()).to(torch.bfloat16).float()
        x = (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * weight.float()).to(torch.bfloat16).float()
    return x


def run_chain(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, pdl: bool) -> torch.Tensor:
    scratch = torch.empty_like(x)
    for _ in range(STEPS):
        cutefi.fused_add_rmsnorm(x, residual, weight, enable_pdl=pdl)  # in place on x and residual
        cutefi.rmsnorm(x, weight, out=scratch, enable_pdl=pdl)         # reads the x just written
        x, scratch = scratch, x
    return x


def _inputs(rows: int, hidden: int):
    torch.manual_seed(rows + hidden)
    x = torch.randn(rows, hidden, device="cuda", dtype=torch.bfloat16)
    residual = torch.randn_like(x)
    weight = torch.rand(hidden, device="cuda", dtype=torch.bfloat16) + 0.5
    return x, residual, weight


@pytest.mark.parametrize("rows, hidden", [(1, 4096), (7, 128), (4096, 4096), (16384, 8192)])
def test_pdl_chain_matches_no_pdl(rows, hidden):
    x, residual, weight = _inputs(rows, hidden)
    results = {}
    for pdl in (False, True):
        xx, rr = x.clone(), residual.clone()
        results[pdl] = run_chain(xx, rr, weight, pdl)
        results[(pdl, "residual")] = rr
    torch.cuda.synchronize()
    assert torch.equal(results[True], results[False])
    assert torch.equal(results[(True, "residual")], results[(False, "residual")])
    expected = reference_chain(x, residual, weight)
    error = ((results[True].float() - expected).norm() / expected.norm()).item()
    assert error < 2e-2, f"relative L2 error {error:.2e} against the float32 chain"


def test_pdl_chain_on_a_side_stream_and_in_a_graph():
    x, residual, weight = _inputs(2048, 4096)
    expected = run_chain(x.clone(), residual.clone(), weight, pdl=False)
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        on_side = run_chain(x.clone(), residual.clone(), weight, pdl=True)
    torch.cuda.current_stream().wait_stream(stream)
    graph_x, graph_r = x.clone(), residual.clone()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        graph_out = run_chain(graph_x, graph_r, weight, pdl=True)
    graph_x.copy_(x)
    graph_r.copy_(residual)
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(on_side, expected)
    assert torch.equal(graph_out, expected)


def test_pdl_is_used_where_the_device_has_it():
    from cutefi.jit.lookup import get_kernel
    from cutefi.norm.launch import norm_spec

    kernel = get_kernel(norm_spec("rms", "bf16", 4096), 0)
    assert kernel.contract.pdl
    assert kernel._ready[0] == (torch.cuda.get_device_capability(0)[0] >= 9)
