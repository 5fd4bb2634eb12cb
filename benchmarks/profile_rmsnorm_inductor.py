"""rmsnorm bf16 16384x8192: cutefi's kernel and torch.compile's (inductor) kernel, for ncu.

    ncu --clock-control none --kernel-name regex:"cutefi_rmsnorm|triton" --launch-skip 3 --launch-count 2 \
        --section SpeedOfLight --section MemoryWorkloadAnalysis --section LaunchStats --section Occupancy \
        python3 benchmarks/profile_rmsnorm_inductor.py
"""

import torch
import torch.nn.functional as F

import cutefi

x = torch.randn(16384, 8192, device="cuda", dtype=torch.bfloat16)
w = torch.randn(8192, device="cuda", dtype=torch.bfloat16)
out = torch.empty_like(x)
compiled = torch.compile(lambda x, w: F.rms_norm(x, (x.shape[-1],), w, 1e-6), dynamic=False)
for _ in range(5):
    cutefi.rmsnorm(x, w, out=out)
    compiled(x, w)
torch.cuda.synchronize()
