"""ncu targets: the three 4095 norm builds against their 4096 ones (16384 rows, bf16)."""
import sys, torch
import cutefi
M = 16384
which = sys.argv[1:] or ["rms_q", "layer", "layer_q", "rms"]
calls = []
for n in (4095, 4096):
    x = torch.randn(M, n, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(n, device="cuda", dtype=torch.bfloat16)
    g, b = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    o8 = torch.empty(M, n, device="cuda", dtype=torch.float8_e4m3fn)
    o = torch.empty_like(x)
    s = torch.tensor([0.5], device="cuda")
    if "rms" in which: calls.append(lambda x=x, w=w, o=o: cutefi.rmsnorm(x, w, 1e-6, out=o))
    if "rms_q" in which: calls.append(lambda x=x, w=w, o8=o8, s=s: cutefi.rmsnorm_quant(o8, x, w, s, 1e-6))
    if "layer" in which: calls.append(lambda x=x, g=g, b=b: cutefi.layernorm(x, g, b, 1e-6))
    if "layer_q" in which: calls.append(lambda x=x, g=g, b=b, o8=o8, s=s: cutefi.layernorm_quant(o8, x, g, b, s, 1e-6))
for c in calls:
    for _ in range(3): c()
torch.cuda.synchronize()
torch.cuda.profiler.start()
for c in calls: c()
torch.cuda.synchronize()
torch.cuda.profiler.stop()
