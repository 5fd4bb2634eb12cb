"""merge_states bf16, 8192 positions x 2 states x 32 heads x 128: cutefi's kernel and
torch.compile's (inductor) kernel, for ncu.

    ncu --clock-control none --kernel-name regex:"cutefi_merge|triton" --launch-skip 3 --launch-count 2 \\
        --section SpeedOfLight --section MemoryWorkloadAnalysis --section LaunchStats --section Occupancy \\
        --section WarpStateStats python3 benchmarks/profile_merge.py
"""

import torch

import cutefi
from cutefi.bench.routines.merge import _torch_merge_states

v = torch.randn(8192, 2, 32, 128, device="cuda", dtype=torch.bfloat16)
s = torch.randn(8192, 2, 32, device="cuda") * 4
compiled = torch.compile(_torch_merge_states, dynamic=False)
for _ in range(5):
    cutefi.merge_states(v, s)
    compiled(v, s)
torch.cuda.synchronize()
