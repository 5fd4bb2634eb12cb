"""mm_bf16 at token counts that leave a partial tile (and weights whose rows do too), against
torch.matmul in the same run (CUPTI, warm L2): the last tile's TMA box used to cross the
tensor's end, whose zero fill loads slowly. Run: python benchmarks/gemm_partial_tiles.py"""

from __future__ import annotations

import torch

import cutefi
from cutefi.bench.timing import bench_gpu_time

print(torch.cuda.get_device_name(0), "torch", torch.__version__, "cutefi", cutefi.__version__)
for n, k in ((8192, 8192), (4096, 4096), (14336, 4096), (4040, 4096), (6000, 4096)):
    w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
    for m in (1, 40, 128, 160, 192, 224, 256, 320, 1000, 1024, 3000):
        a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        ours = bench_gpu_time(lambda: cutefi.mm_bf16(a, w.t()), iters=100).median_ms * 1e3
        peer = bench_gpu_time(lambda: torch.matmul(a, w.t()), iters=100).median_ms * 1e3
        print(f"m={m} n={n} k={k} cutefi {ours:.1f} us cublas {peer:.1f} x{peer / ours:.3f}", flush=True)
