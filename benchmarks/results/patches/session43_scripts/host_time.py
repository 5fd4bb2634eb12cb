"""Host time per eager call (us): a loop of 3000 calls on one small input, synchronised once."""
import time

import torch
import torch.nn.functional as F

import cutefi

x = torch.randn(1, 4096, device="cuda", dtype=torch.bfloat16)
r = torch.randn_like(x)
w = torch.randn(4096, device="cuda", dtype=torch.bfloat16)
y = torch.empty_like(x)
g, b = torch.randn(4096, device="cuda"), torch.randn(4096, device="cuda")
o8 = torch.empty(1, 4096, device="cuda", dtype=torch.float8_e4m3fn)
s = torch.tensor([0.5], device="cuda")


def ref(x, w):
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-6) * w.float()).to(x.dtype)


compiled = torch.compile(ref)
calls = {
    "cutefi.rmsnorm(out=None)": lambda: cutefi.rmsnorm(x, w, 1e-6),
    "cutefi.rmsnorm(out=y)": lambda: cutefi.rmsnorm(x, w, 1e-6, out=y),
    "cutefi.rmsnorm(out=y, pdl=False)": lambda: cutefi.rmsnorm(x, w, 1e-6, out=y, enable_pdl=False),
    "cutefi.fused_add_rmsnorm": lambda: cutefi.fused_add_rmsnorm(x, r, w, 1e-6),
    "cutefi.layernorm": lambda: cutefi.layernorm(x, g, b, 1e-6),
    "cutefi.rmsnorm_quant": lambda: cutefi.rmsnorm_quant(o8, x, w, s, 1e-6),
    "torch F.rms_norm": lambda: F.rms_norm(x, (4096,), w, 1e-6),
    "torch eager ref": lambda: ref(x, w),
    "torch.compile ref": lambda: compiled(x, w),
    "torch.add (one op)": lambda: torch.add(x, r, out=y),
}
for fn in calls.values():
    for _ in range(50):
        fn()
torch.cuda.synchronize()
for round_ in range(3):
    for name, fn in calls.items():
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(3000):
            fn()
        t1 = time.perf_counter()
        torch.cuda.synchronize()
        print(f"round {round_} {name:34s} {1e6 * (t1 - t0) / 3000:7.2f} us/call", flush=True)
