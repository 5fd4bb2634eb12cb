"""The prefill kernel ncu profiles (benchmarks/results/prefill_ncu_h200.txt): the ragged wrapper,
4 x 4096 tokens, 32/32 heads, head_dim 128, bf16, three launches; then, with ``--cudnn``, torch
SDPA's cuDNN kernel on the same tensors (profile it with ``-k regex:fprop``).

    ncu --clock-control none --set full -k regex:cutefi_prefill -s 1 -c 1 python benchmarks/profile_prefill.py --causal 0
"""
import argparse

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

import cutefi

parser = argparse.ArgumentParser()
parser.add_argument("--causal", type=int, default=1)
parser.add_argument("--cudnn", action="store_true", help="also run SDPA's cuDNN kernel three times")
cli = parser.parse_args()
b, L, H, d = 4, 4096, 32, 128
q = torch.randn(b * L, H, d, device="cuda", dtype=torch.bfloat16)
k = torch.randn_like(q); v = torch.randn_like(q)
w = cutefi.BatchPrefillWithRaggedKVCacheWrapper(torch.empty(1 << 20, dtype=torch.uint8, device="cuda"))
indptr = torch.arange(0, b + 1, dtype=torch.int32) * L
w.plan(indptr, indptr, H, H, d, causal=bool(cli.causal), q_data_type=torch.bfloat16)
for _ in range(3):
    w.run(q, k, v)
if cli.cudnn:
    heads_first = [t.view(b, L, H, d).transpose(1, 2) for t in (q, k, v)]
    with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
        for _ in range(3):
            F.scaled_dot_product_attention(*heads_first, is_causal=bool(cli.causal))
torch.cuda.synchronize()
