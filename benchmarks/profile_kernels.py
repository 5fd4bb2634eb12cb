"""One launch each of the kernels that miss a goal, for ``ncu`` (see benchmarks/results/README.md).

Run: ncu --clock-control none --kernel-name regex:cutefi_ --section SpeedOfLight --section Occupancy \
         --section LaunchStats --section MemoryWorkloadAnalysis python3 benchmarks/profile_kernels.py
"""

import torch

import cutefi

q = torch.randn(16384, 32, 128, device="cuda", dtype=torch.bfloat16)
k = torch.randn(16384, 8, 128, device="cuda", dtype=torch.bfloat16)
pos = torch.randint(0, 32768, (16384,), device="cuda", dtype=torch.int32)
cutefi.apply_rope_pos_ids(q, k, pos)
x = torch.randn(16384, 8192, device="cuda", dtype=torch.bfloat16)
cutefi.rmsnorm(x, torch.randn(8192, device="cuda", dtype=torch.bfloat16))
y = torch.randn(16384, 16384, device="cuda", dtype=torch.bfloat16)
cutefi.layernorm(y, torch.randn(16384, device="cuda"), torch.randn(16384, device="cuda"))
torch.cuda.synchronize()
