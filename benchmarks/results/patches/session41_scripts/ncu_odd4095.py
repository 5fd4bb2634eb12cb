"""ncu targets: the 4095 FP8 RMSNorm and LayerNorm builds (16384 rows, bf16)."""
import torch
import cutefi
M, n = 16384, 4095
x = torch.randn(M, n, device="cuda", dtype=torch.bfloat16)
w = torch.randn(n, device="cuda", dtype=torch.bfloat16)
g, b = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
o8 = torch.empty(M, n, device="cuda", dtype=torch.float8_e4m3fn)
s = torch.tensor([0.5], device="cuda")
calls = [lambda: cutefi.rmsnorm_quant(o8, x, w, s, 1e-6), lambda: cutefi.layernorm(x, g, b, 1e-6)]
for c in calls:
    for _ in range(3): c()
torch.cuda.synchronize()
torch.cuda.profiler.start()
for c in calls: c()
torch.cuda.synchronize()
torch.cuda.profiler.stop()
