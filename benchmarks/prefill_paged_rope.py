"""Paged prefill with pos_encoding_mode="ROPE_LLAMA" on the H200: plain, RoPE on Hopper's path
(pages gathered and keys turned first), and RoPE inside the mma.sync kernel; page 16 (shuffled
pages), d128, 32 heads, causal 4 x 4096, CUDA events. Run: python benchmarks/prefill_paged_rope.py"""
import torch, cutefi
from cutefi.prefill import ops
b, L, H, d, P = 4, 4096, 32, 128, 16
q = torch.randn(b * L, H, d, device="cuda", dtype=torch.bfloat16)
cache = torch.randn(b * L // P, 2, P, H, d, device="cuda", dtype=torch.bfloat16)
indptr = torch.arange(0, b + 1, dtype=torch.int32) * L
pages = torch.arange(0, b + 1, dtype=torch.int32) * (L // P)
ids = torch.randperm(b * L // P, device="cuda").to(torch.int32)
last = torch.full((b,), P, dtype=torch.int32)
def timed(fn, iters=20):
    for _ in range(3): fn()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize(); s.record()
    for _ in range(iters): fn()
    e.record(); torch.cuda.synchronize()
    return s.elapsed_time(e) / iters * 1e3
for mode, force in (("NONE", False), ("ROPE_LLAMA", False), ("ROPE_LLAMA", True)):
    ops.MMA_SYNC_ONLY = force
    w = cutefi.BatchPrefillWithPagedKVCacheWrapper(torch.empty(1 << 20, dtype=torch.uint8, device="cuda"))
    w.plan(indptr, pages, ids, last, H, H, d, P, causal=True, pos_encoding_mode=mode, q_data_type=torch.bfloat16)
    us = timed(lambda: w.run(q, cache))
    print(f"paged page {P} d{d} causal 4x4096 {mode:10s} {'mma.sync' if force else 'native':8s} {us:8.1f} us "
          f"{4 * b * H * L * L * d / 2 / us / 1e6:6.0f} TFLOP/s")
