"""GEMV (cp.async ring) against the GEMM plan's build and cuBLAS, in one process, interleaved."""
import json, os, statistics
import torch, cutefi
from cutefi.bench.timing import bench_gpu_time
from cutefi.gemm import gemv_launch as launch
from cutefi.jit.lookup import get_kernel

OUT = os.environ.get("OUT", "/tmp")
SHAPES = [(n, k) for n, k in ((4096, 14336), (14336, 4096), (8192, 8192), (28672, 8192), (8192, 28672), (4096, 4096),
                              (1024, 8192))]
rows = []
for n, k in SHAPES:
    w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
    for m in (1, 2, 4):
        a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        out = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
        kern = get_kernel(launch.GEMV_SPECS[("bf16", "bf16", m)], 0)
        def gemv():
            kern.launch(((n + launch.GEMV_ROWS - 1) // launch.GEMV_ROWS, 1, 1), 0, None, False, a=a.data_ptr(),
                        b=w.data_ptr(), c=out.data_ptr(), bias=w.data_ptr(), m=m, n=n, k=k, has_bias=0, lda=k,
                        ldb=k, ldc=n)
        ref = a.float() @ w.float().t()
        out.fill_(float("nan"))
        gemv(); torch.cuda.synchronize()
        err = ((out.float() - ref).norm() / ref.norm()).item()
        fns = {"gemv": gemv, "plan": lambda: cutefi.mm_bf16(a, w.t()), "cublas": lambda: torch.matmul(a, w.t())}
        if os.environ.get("NO_PLAN"):
            fns.pop("plan")
        times = {key: [] for key in fns}
        for _ in range(3):
            for key, fn in fns.items():
                times[key].append(bench_gpu_time(fn, (), iters=50, warmup=5).median_ms * 1e3)
        med = {key: round(statistics.median(v), 2) for key, v in times.items()}
        gbs = {key: round(n * k * 2 / 1e3 / v) for key, v in med.items()}
        row = dict(m=m, n=n, k=k, err=err, us=med, weight_gbs=gbs)
        print(json.dumps(row), flush=True)
        rows.append(row)
json.dump(rows, open(os.path.join(OUT, "probe_gemv.json"), "w"), indent=1)
