"""The prefill kernel ncu profiles (benchmarks/results/prefill_ncu_h200.txt): the ragged wrapper,
4 x 4096 tokens, 32/32 heads, head_dim 128, causal, bf16, three launches."""
import torch, cutefi
b, L, H, d = 4, 4096, 32, 128
q = torch.randn(b * L, H, d, device="cuda", dtype=torch.bfloat16)
k = torch.randn_like(q); v = torch.randn_like(q)
w = cutefi.BatchPrefillWithRaggedKVCacheWrapper(torch.empty(1 << 20, dtype=torch.uint8, device="cuda"))
indptr = torch.arange(0, b + 1, dtype=torch.int32) * L
w.plan(indptr, indptr, H, H, d, causal=True, q_data_type=torch.bfloat16)
for _ in range(3):
    w.run(q, k, v)
torch.cuda.synchronize()
