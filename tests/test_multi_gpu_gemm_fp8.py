"""GPU tier, two Hopper GPUs in one process: the FP8 and grouped GEMMs (mm_fp8 on the wgmma
and, forced, the FP8 mma.sync builds; gemm_fp8_nt_groupwise, group_gemm_fp8_nt_groupwise,
SegmentGEMMWrapper) with every tensor on
cuda:1 while cuda:0 is current, on cuda:1's current stream and on a side stream, the inputs
queued behind a sleep on that stream (a launch on any other stream reads them before they
are written), against float32 references written here."""

from __future__ import annotations

import pytest
import torch

import cutefi
from cutefi.gemm.plan import override

NUM_GPUS = torch.cuda.device_count() if torch.cuda.is_available() else 0
pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(NUM_GPUS < 2 or any(torch.cuda.get_device_capability(d) != (9, 0) for d in range(
                  NUM_GPUS)), reason="needs 2 Hopper GPUs in one process")]

SLEEP_CYCLES = 200_000_000  # (~0.1 s: inputs written after it on the launch's stream)
DEV = torch.device("cuda", 1)


def _inputs(seed: int):
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(300, 512, generator=gen)
    w = torch.randn(3, 256, 512, generator=gen)
    a, a_scale = cutefi.quantize_fp8(x, group_shape=(1, 128))
    pairs = [cutefi.quantize_fp8(w[e], group_shape=(128, 128)) for e in range(3)]
    return dict(x=x.to(torch.bfloat16), w=w.to(torch.bfloat16), a=a, a_scale=a_scale,
                b=torch.stack([q for q, _ in pairs]), b_scale=torch.stack([s for _, s in pairs]),
                indptr=torch.tensor([0, 100, 101, 300], dtype=torch.int32),
                few_indptr=torch.tensor([0, 5, 6, 24], dtype=torch.int32))


def _dequantised(values, scales, rows):
    m, k = values.shape
    return values.float() * scales.repeat_interleave(rows, 0)[:m].repeat_interleave(128, 1)[:, :k]


def _references(t):
    a = _dequantised(t["a"], t["a_scale"], 1)
    ends = t["indptr"].tolist()
    return {
        "groupwise": a @ _dequantised(t["b"][0], t["b_scale"][0], 128).t(),
        "grouped": torch.cat([a[ends[e]:ends[e + 1]] @ _dequantised(t["b"][e], t["b_scale"][e], 128).t()
                              for e in range(3)]),
        "segment": torch.cat([t["x"][ends[e]:ends[e + 1]].float() @ t["w"][e].float().t() for e in range(3)]),
        "mm_fp8": t["a"].float() @ t["b"][0].float().t(),
        "mm_fp8_mma_sync": t["a"].float() @ t["b"][0].float().t(),
        "groupwise_mma_sync": a @ _dequantised(t["b"][0], t["b_scale"][0], 128).t(),
        "groupwise_few_tokens": a[:16] @ _dequantised(t["b"][0], t["b_scale"][0], 128).t(),
        # (experts of 5, 1 and 18 tokens: the swapped grouped build)
        "grouped_few_tokens": torch.cat([a[s:e] @ _dequantised(t["b"][x], t["b_scale"][x], 128).t()
                                         for x, (s, e) in enumerate(((0, 5), (5, 6), (6, 24)))]),
    }


def _run(t):
    seg = cutefi.SegmentGEMMWrapper(torch.empty(1 << 20, dtype=torch.int8, device=DEV))
    return {
        "groupwise": cutefi.gemm_fp8_nt_groupwise(t["a"], t["b"][0], t["a_scale"], t["b_scale"][0], "K"),
        "grouped": cutefi.group_gemm_fp8_nt_groupwise(t["a"], t["b"], t["a_scale"], t["b_scale"], t["indptr"],
                                                      scale_major_mode="K"),
        "segment": seg.run(t["x"], t["w"], 3, True, seg_indptr=t["indptr"]),
        "mm_fp8": cutefi.mm_fp8(t["a"], t["b"][0].t()),
        "mm_fp8_mma_sync": _forced("64x64x64s4", cutefi.mm_fp8, t["a"], t["b"][0].t()),
        "groupwise_mma_sync": _forced("64x64x128s4", cutefi.gemm_fp8_nt_groupwise, t["a"], t["b"][0], t["a_scale"],
                                      t["b_scale"][0], "K"),
        # (16 tokens: the swapped block-scaled build)
        "groupwise_few_tokens": cutefi.gemm_fp8_nt_groupwise(t["a"][:16], t["b"][0], t["a_scale"][:16],
                                                             t["b_scale"][0], "K"),
        "grouped_few_tokens": cutefi.group_gemm_fp8_nt_groupwise(
            t["a"][:24], t["b"], t["a_scale"][:24], t["b_scale"], t["few_indptr"], scale_major_mode="K"),
    }


def _forced(config: str, function, *args):
    """``function`` on an FP8 mma.sync build (sm_89/sm_120a's path), forced on this Hopper."""
    with override(config=config):
        return function(*args)


@pytest.mark.parametrize("side_stream", [False, True], ids=["current-stream", "side-stream"])
def test_fp8_and_grouped_gemms_on_cuda1_while_cuda0_is_current(side_stream):
    host = _inputs(7)
    staged = {k: v.to(DEV) for k, v in host.items()}
    torch.cuda.synchronize(DEV)
    stream = torch.cuda.Stream(device=DEV) if side_stream else torch.cuda.current_stream(DEV)
    assert torch.cuda.current_device() == 0
    with torch.cuda.stream(stream):  # (makes cuda:1 current inside; the calls switch back to cuda:0)
        torch.cuda._sleep(SLEEP_CYCLES)
        live = {k: v.clone() for k, v in staged.items()}  # (written on this stream, after the sleep)
        with torch.cuda.device(0):
            outs = _run(live)
    stream.synchronize()
    assert torch.cuda.current_device() == 0
    refs = _references(host)
    for name, out in outs.items():
        assert out.device == DEV, name
        ref = refs[name]
        rel = ((out.float().cpu() - ref).norm() / ref.norm()).item()
        assert rel < 1e-2, f"{name} on cuda:1: relative error {rel:.2e}"
