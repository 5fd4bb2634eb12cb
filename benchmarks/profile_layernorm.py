"""One launch each of layernorm and rmsnorm at bf16 16384×4096, for ``ncu`` (issue 11: LayerNorm
at 74% of the copy ceiling where RMSNorm reaches 97%).

Run: ncu --clock-control none --kernel-name regex:cutefi_ --section SpeedOfLight \
         --section MemoryWorkloadAnalysis --section Occupancy --section LaunchStats \
         --section WarpStateStats python3 benchmarks/profile_layernorm.py
"""

import torch

import cutefi

x = torch.randn(16384, 4096, device="cuda", dtype=torch.bfloat16)
cutefi.layernorm(x, torch.rand(4096, device="cuda") + 0.5, torch.randn(4096, device="cuda"))
cutefi.rmsnorm(x, torch.randn(4096, device="cuda", dtype=torch.bfloat16))
torch.cuda.synchronize()
