"""Session 39 A/B: RMSNorm 8192/16384 builds (CUTEFI_EXP_REREAD mode from the env), one process a mode."""
# (as run in session 39: the modes came from a CUTEFI_EXP_REREAD switch in a variant of norm/launch.py, since replaced by launch._RMS_REREAD)
import json, os, sys
import torch, torch.nn.functional as F
from cutefi.bench.timing import bench_gpu_time
import cutefi

mode = os.environ["CUTEFI_EXP_REREAD"]
peers = len(sys.argv) > 2 and sys.argv[2] == "peers"
EPS = 1e-6
res = {}
torch._dynamo.config.recompile_limit = 1024
compiled = torch.compile(lambda x, w: F.rms_norm(x, (x.shape[-1],), w, EPS), dynamic=False) if peers else None
SHAPES = [(M, 8192) for M in (1, 32, 128, 256, 512, 1024, 2048, 4096, 16384, 65536)] + \
    [(M, 16384) for M in (1, 128, 4096, 16384)] + [(128, 4096), (1, 4096)]
for M, N in SHAPES:
    if True:
        torch.manual_seed(M + N)
        x = torch.randn(M, N, device="cuda", dtype=torch.bfloat16)
        w = torch.randn(N, device="cuda", dtype=torch.bfloat16)
        o = torch.full_like(x, float("nan"))
        cutefi.rmsnorm(x, w, EPS, out=o)
        ref = x.float() * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + EPS) * w.float()
        err = ((o.float() - ref).abs().max() / ref.abs().max()).item()
        t = bench_gpu_time(lambda: cutefi.rmsnorm(x, w, EPS, out=o), timer="cupti", iters=100, warmup=10).median_ms * 1e3
        row = {"cutefi_us": t, "gbps": 2 * M * N * 2 / t / 1e3, "rel_err": err}
        if peers:
            row["inductor_us"] = bench_gpu_time(lambda: compiled(x, w), timer="cupti", iters=100, warmup=10).median_ms * 1e3
        res[f"{M}x{N}"] = row
        print(f"mode {mode} {M}x{N}: {t:.2f} us {row['gbps']:.0f} GB/s err {err:.2e}"
              + (f" inductor {row['inductor_us']:.2f}" if peers else ""), flush=True)
json.dump(res, open(sys.argv[1], "w"), indent=1)
