"""A/B of the decode-sized GEMM: this tree's kernels with the TMA descriptors' L2 promotion patched."""
import json, sys
promo = int(sys.argv[1])
tag = sys.argv[2]
import cutefi.jit.loader as loader
loader._L2_PROMOTION["256B"] = promo
import torch, cutefi
from cutefi.bench.timing import bench_gpu_time
SHAPES = [(1, 4096, 14336), (16, 4096, 14336), (1, 14336, 4096), (16, 14336, 4096), (1, 8192, 8192),
          (16, 8192, 8192), (1, 28672, 8192), (16, 28672, 8192), (64, 4096, 14336), (64, 8192, 8192), (64, 4096, 4096), (64, 14336, 4096), (32, 28672, 8192)]
if len(sys.argv) > 3 and sys.argv[3] == "mid":
    SHAPES = [(256, 4096, 14336), (256, 4096, 4096), (256, 8192, 8192), (256, 14336, 4096), (1024, 4096, 14336),
              (1024, 14336, 4096), (1024, 8192, 8192), (4096, 4096, 4096), (128, 8192, 28672)]
res = {}
for m, n, k in SHAPES:
    w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    ref = a.float() @ w.float().t()
    got = cutefi.mm_bf16(a, w.t()).float()
    err = ((got - ref).norm() / ref.norm()).item()
    assert err < 1e-2, err
    c = bench_gpu_time(cutefi.mm_bf16, (a, w.t()), iters=60).median_ms * 1e3
    b = bench_gpu_time(torch.matmul, (a, w.t()), iters=60).median_ms * 1e3
    res[f"{m}x{n}x{k}"] = (round(c, 2), round(b, 2), round(b / c, 3))
print(json.dumps({"tag": tag, "promo": promo, "res": res}), flush=True)
