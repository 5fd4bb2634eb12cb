import os, re, torch
import sys
sys.path.insert(0, os.path.dirname(__file__))
from rms_triton import rms_two_pass, rms_one_pass
OUT = os.environ.get("OUT", "/tmp")
M, N = 16384, 8192
x = torch.randn(M, N, device="cuda", dtype=torch.bfloat16); w = torch.randn(N, device="cuda", dtype=torch.bfloat16)
o = torch.empty_like(x)
for name, k in [("two_e1", rms_two_pass[(M,)](x, w, o, N, 1e-6, RBLOCK=4096, EVICT=1, num_warps=16)),
                ("two_e0", rms_two_pass[(M,)](x, w, o, N, 1e-6, RBLOCK=4096, EVICT=0, num_warps=16)),
                ("one_s0", rms_one_pass[(M,)](x, w, o, N, 1e-6, STREAM=0, num_warps=16))]:
    ptx = k.asm["ptx"]
    open(f"{OUT}/{name}.ptx", "w").write(ptx)
    print(name, "regs", k.n_regs, "spills", k.n_spills)
    for line in ptx.splitlines():
        if re.search(r"\b(ld\.global|st\.global|createpolicy)", line):
            print("   ", line.strip())
torch.cuda.synchronize()
