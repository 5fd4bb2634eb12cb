"""In-process: the GEMV builds against the plan without them (decode-sized / swapped builds) and cuBLAS."""
import json, os, statistics, sys
import torch, cutefi
from cutefi.bench.timing import bench_gpu_time
from cutefi.gemm import plan as gemm_plan
from cutefi.gemm.plan import override

OUT = os.environ.get("OUT", "/tmp")
SHAPES = [(1024, 8192), (2048, 4096), (4096, 4096), (4096, 8192), (6144, 4096), (4096, 14336), (14336, 4096),
          (8192, 8192), (28672, 8192), (8192, 28672), (128256, 4096)]
MS = [int(v) for v in os.environ.get("MS", "1 2 3 4").split()]
rows = []
for n, k in SHAPES:
    w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
    for m in MS:
        a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        ref = a.float() @ w.float().t()
        tokens = next(t for t in (1, 2, 4) if t >= m)
        with override(config=f"v{tokens}"):
            got = cutefi.mm_bf16(a, w.t()).float()
        err = ((got - ref).norm() / ref.norm()).item()
        assert err < 1e-2, err

        def old():
            gemm_plan.GEMV = False
            gemm_plan.GENERATION[0] += 1
            try:
                return bench_gpu_time(cutefi.mm_bf16, (a, w.t()), iters=50, warmup=5).median_ms * 1e3
            finally:
                gemm_plan.GEMV = True
                gemm_plan.GENERATION[0] += 1

        def gemv():
            with override(config=f"v{tokens}"):
                return bench_gpu_time(cutefi.mm_bf16, (a, w.t()), iters=50, warmup=5).median_ms * 1e3

        def cublas():
            return bench_gpu_time(torch.matmul, (a, w.t()), iters=50, warmup=5).median_ms * 1e3

        times = {"old": [], "gemv": [], "cublas": []}
        for _ in range(3):
            for key, fn in (("old", old), ("gemv", gemv), ("cublas", cublas)):
                times[key].append(fn())
        med = {key: round(statistics.median(v), 2) for key, v in times.items()}
        row = dict(m=m, n=n, k=k, err=err, us=med, gain=round(med["old"] / med["gemv"], 3),
                   vs_cublas=round(med["cublas"] / med["gemv"], 3))
        print(json.dumps(row), flush=True)
        rows.append(row)
json.dump(rows, open(os.path.join(OUT, "ab_gemv.json"), "w"), indent=1)
