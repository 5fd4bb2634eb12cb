"""Session 39: LayerNorm 4096 class build (reads x twice) against its latency build for 513-4096 rows: the latency
build's row limit set to argv[2] in this process (default 512). CUPTI medians."""
import json, sys
import torch
from cutefi.bench.timing import bench_gpu_time
from cutefi.norm import tuning
import cutefi

most = int(sys.argv[2])
tpr, threads, per_sm, _ = tuning.LATENCY_BUILDS[("layer", False, False)][4096]
tuning.LATENCY_BUILDS[("layer", False, False)][4096] = (tpr, threads, per_sm, most)
res = {}
for M in (256, 513, 768, 1024, 1536, 2048, 3072, 4096):
    x = torch.randn(M, 4096, device="cuda", dtype=torch.bfloat16)
    g, b = torch.randn(4096, device="cuda"), torch.randn(4096, device="cuda")
    t = bench_gpu_time(lambda: cutefi.layernorm(x, g, b, 1e-6), timer="cupti", iters=100, warmup=10).median_ms * 1e3
    res[M] = t
    print(f"latency<= {most}: {M} rows {t:.2f} us", flush=True)
json.dump(res, open(sys.argv[1], "w"))
