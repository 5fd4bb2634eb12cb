"""ncu targets: FP8 LayerNorm / FP8 RMSNorm 16384 x 4096, RMSNorm 128 x 4096 (cutefi and inductor)."""
import torch
import cutefi
M, n = 16384, 4096
x = torch.randn(M, n, device="cuda", dtype=torch.bfloat16)
w = torch.randn(n, device="cuda", dtype=torch.bfloat16)
g, b = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
o8 = torch.empty(M, n, device="cuda", dtype=torch.float8_e4m3fn)
s = torch.tensor([0.5], device="cuda")
xs = torch.randn(128, n, device="cuda", dtype=torch.bfloat16)
ys = torch.empty_like(xs)

def ref(x, w):
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-6) * w.float()).to(x.dtype)

compiled = torch.compile(ref)
calls = [lambda: cutefi.layernorm_quant(o8, x, g, b, s, 1e-6), lambda: cutefi.rmsnorm_quant(o8, x, w, s, 1e-6),
         lambda: cutefi.rmsnorm(xs, w, 1e-6, out=ys), lambda: compiled(xs, w)]
for c in calls:
    for _ in range(5): c()
torch.cuda.synchronize()
torch.cuda.profiler.start()
for c in calls: c()
torch.cuda.synchronize()
torch.cuda.profiler.stop()
