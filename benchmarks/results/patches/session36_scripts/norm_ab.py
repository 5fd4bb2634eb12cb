"""RMSNorm 8192 (bf16): this tree's build, CUPTI and graph-replay timers; optionally torch.compile."""
import json, os, sys
import torch, cutefi
from cutefi.bench.timing import bench_gpu_time

tag = sys.argv[1]
for rows in (4096, 16384, 65536):
    x = torch.randn(rows, 8192, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(8192, device="cuda", dtype=torch.bfloat16)
    ref = (x.float() * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + 1e-6)) * w.float()
    got = cutefi.rmsnorm(x, w, eps=1e-6).float()
    err = ((got - ref).norm() / ref.norm()).item()
    row = {"tree": tag, "rows": rows, "err": err}
    for timer in ("cupti", "graph"):
        row[timer] = bench_gpu_time(cutefi.rmsnorm, (x, w), timer=timer, iters=100, warmup=10).median_ms * 1e3
    if os.environ.get("PEER"):
        f = torch.compile(lambda x, w: (x.float() * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + 1e-6)).to(x.dtype) * w)
        f(x, w)
        for timer in ("cupti", "graph"):
            row["inductor_" + timer] = bench_gpu_time(f, (x, w), timer=timer, iters=100, warmup=10).median_ms * 1e3
    row["gbps_cupti"] = 2 * rows * 8192 * 2 / row["cupti"] / 1e3
    print(json.dumps(row), flush=True)
