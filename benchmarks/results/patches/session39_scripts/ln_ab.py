"""Session 39 A/B: fused_add_rmsnorm and layernorm 4096/8192 (and RMSNorm 8192 as a control), the tree on
PYTHONPATH, one process a tree. CUPTI medians; refchecks against float32 references."""
import json, sys
import torch
import torch.nn.functional as F
from cutefi.bench.timing import bench_gpu_time
import cutefi

EPS = 1e-6
tag = sys.argv[2]
res = {}


def us(fn):
    return bench_gpu_time(fn, timer="cupti", iters=100, warmup=10).median_ms * 1e3


for N in (4096, 8192):
    for M in (1, 128, 512, 1024, 2048, 4096, 16384, 65536):
        torch.manual_seed(M + N)
        x = torch.randn(M, N, device="cuda", dtype=torch.bfloat16) * 2 + 0.5
        g, b = torch.randn(N, device="cuda"), torch.randn(N, device="cuda")
        y = cutefi.layernorm(x, g, b, EPS)
        ref = F.layer_norm(x.float(), (N,), g, b, EPS)
        e_ln = ((y.float() - ref).norm() / ref.norm()).item()
        t_ln = us(lambda: cutefi.layernorm(x, g, b, EPS))
        r = torch.randn(M, N, device="cuda", dtype=torch.bfloat16)
        w = torch.randn(N, device="cuda", dtype=torch.bfloat16)
        xs, rs = x.clone(), r.clone()
        s = x.float() + r.float()
        cutefi.fused_add_rmsnorm(xs, rs, w, EPS)
        e_res = (rs != s.to(torch.bfloat16)).float().mean().item()  # exact: residual = round(s)
        ref_fa = s * torch.rsqrt(s.pow(2).mean(-1, keepdim=True) + EPS) * w.float()
        e_fa = ((xs.float() - ref_fa).norm() / ref_fa.norm()).item()
        t_fa = us(lambda: cutefi.fused_add_rmsnorm(xs, rs, w, EPS))
        o = torch.empty_like(x)
        t_rms = us(lambda: cutefi.rmsnorm(x, w, EPS, out=o))
        gb = 2 * M * N * 2 / 1e3
        res[f"{M}x{N}"] = {"layernorm_us": t_ln, "fused_add_us": t_fa, "rmsnorm_us": t_rms, "ln_rel": e_ln,
                           "fa_rel": e_fa, "fa_residual_mismatch": e_res}
        print(f"{tag} {M}x{N}: ln {t_ln:.2f} ({gb / t_ln:.0f} GB/s, err {e_ln:.1e}) fa {t_fa:.2f} "
              f"({2 * gb / t_fa:.0f} GB/s, err {e_fa:.1e}, res {e_res:.1e}) rms {t_rms:.2f}", flush=True)
json.dump(res, open(sys.argv[1], "w"), indent=1)
