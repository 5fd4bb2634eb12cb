"""One cutefi call (config from argv) and one torch.matmul at M x N x K, for ncu."""
import sys, torch, cutefi
from cutefi.gemm.plan import override
m, n, k, cfg = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
for _ in range(5):
    with override(config=cfg):
        cutefi.mm_bf16(a, w.t())
    torch.matmul(a, w.t())
torch.cuda.synchronize()
