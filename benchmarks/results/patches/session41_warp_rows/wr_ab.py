"""A/B in one process: the warp-rows build against the shifted builds (WARP_ROWS_MIN_ROWS toggled, plans
cleared), RMSNorm and FP8 RMSNorm at 4095 (and other odd sizes of the class), CUPTI medians, with errors
against a float32 reference."""
import sys, torch
from cutefi.bench.timing import bench_gpu_time
import cutefi
import cutefi.norm.api as api
import cutefi.norm.plan as plan
from cutefi._plans import PlanCache
EPS = 1e-6
us = lambda fn: bench_gpu_time(fn, timer="cupti", iters=200, warmup=20).median_ms * 1e3


def use(warp):
    plan.WARP_ROWS_MIN_ROWS = 1 if warp else 1 << 40
    api._PLANS = PlanCache()


def ref_rms(x, w):
    xf = x.float()
    return xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + EPS) * w.float()


rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 2
shapes = [(128, 4095), (1024, 4095), (4096, 4095), (16384, 4095), (65536, 4095), (16384, 3001), (16384, 4093)]
for M, N in shapes:
    torch.manual_seed(M + N)
    x = torch.randn(M, N, device="cuda", dtype=torch.bfloat16) * 2 + 0.5
    w = torch.randn(N, device="cuda", dtype=torch.bfloat16)
    o8 = torch.empty(M, N, device="cuda", dtype=torch.float8_e4m3fn)
    o = torch.empty_like(x)
    s = 0.05
    r = ref_rms(x, w)
    rq = (r / s).clamp(-448, 448)
    line = [f"{M}x{N}"]
    for name, call, bytes_ in (("rms", lambda: cutefi.rmsnorm(x, w, EPS, out=o), 4 * M * N),
                               ("rms_q", lambda: cutefi.rmsnorm_quant(o8, x, w, s, EPS), 3 * M * N)):
        res = {}
        for rnd in range(rounds):
            for warp in (False, True):
                use(warp)
                o.fill_(float("nan")); o8.fill_(float("nan"))
                call()
                if name == "rms":
                    err = ((o.float() - r).abs() / (r.abs() + 1e-2)).max().item()
                else:
                    err = ((o8.float() - rq).abs() > rq.abs() * 0.07 + 0.02).float().mean().item()
                res.setdefault(warp, []).append((us(call), err))
        for warp in (False, True):
            ts = [t for t, _ in res[warp]]
            line.append(f"{name}{'/warp' if warp else '/old '} {min(ts):.2f}-{max(ts):.2f}us {bytes_ / min(ts) / 1e3:.0f}GB/s err {max(e for _, e in res[warp]):.1e}")
    print(" | ".join(line), flush=True)
