"""One launch each (after a warm-up) of the norms short of issue 11's goals, for ncu."""
import torch
import cutefi

def run(fn):
    fn(); torch.cuda.synchronize()
    torch.cuda.nvtx.range_push("x"); fn(); torch.cuda.nvtx.range_pop(); torch.cuda.synchronize()

for n in (4096, 4095):
    x = torch.randn(16384, n, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(n, device="cuda", dtype=torch.bfloat16)
    g, b = torch.rand(n, device="cuda") + 0.5, torch.randn(n, device="cuda")
    out8 = torch.empty(16384, n, device="cuda", dtype=torch.float8_e4m3fn)
    run(lambda: cutefi.rmsnorm_quant(out8, x, w, 1.0))
    run(lambda: cutefi.layernorm(x, g, b))
    run(lambda: cutefi.layernorm_quant(out8, x, g, b, 1.0))
