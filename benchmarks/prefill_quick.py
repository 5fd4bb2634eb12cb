"""Quick prefill timing (CUDA events, 20 calls after 3 warm-up) of the ragged wrapper against
torch SDPA's cuDNN and flash kernels in the same process: the A/B runs of session 15
(benchmarks/results/prefill_progress_h200.txt). bf16, 32 heads."""
import torch

import cutefi
from torch.nn.attention import sdpa_kernel, SDPBackend
torch.manual_seed(0)
def bench(fn, iters=20):
    for _ in range(3): fn()
    torch.cuda.synchronize()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    for _ in range(iters): fn()
    e.record(); torch.cuda.synchronize()
    return s.elapsed_time(e) / iters * 1e-3
for (b, L, causal, d) in [(4, 4096, True, 128), (1, 16384, True, 128), (4, 4096, False, 128), (4, 4096, True, 64), (4, 4096, True, 256)]:
    H = 32
    q = torch.randn(b * L, H, d, device="cuda", dtype=torch.bfloat16)
    k = torch.randn_like(q); v = torch.randn_like(q)
    flops = 4 * b * H * L * L * d / (2 if causal else 1)
    wrapper = cutefi.BatchPrefillWithRaggedKVCacheWrapper(torch.empty(1 << 20, dtype=torch.uint8, device="cuda"))
    indptr = torch.arange(0, b + 1, dtype=torch.int32) * L
    wrapper.plan(indptr, indptr, H, H, d, causal=causal, q_data_type=torch.bfloat16)
    t = bench(lambda: wrapper.run(q, k, v))
    qs = q.view(b, L, H, d).transpose(1, 2); ks = k.view(b, L, H, d).transpose(1, 2); vs = v.view(b, L, H, d).transpose(1, 2)
    res = {}
    for name, be in (("cudnn", SDPBackend.CUDNN_ATTENTION), ("flash", SDPBackend.FLASH_ATTENTION)):
        try:
            with sdpa_kernel(be):
                res[name] = bench(lambda: torch.nn.functional.scaled_dot_product_attention(qs, ks, vs, is_causal=causal))
        except Exception:  # (a backend this torch build lacks)
            res[name] = float("nan")
    print(f"b={b} L={L} causal={causal} d={d}: cutefi {flops/t/1e12:.0f} TFLOP/s, cudnn {flops/res['cudnn']/1e12:.0f}, flash {flops/res['flash']/1e12:.0f}", flush=True)
