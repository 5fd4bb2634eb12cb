"""Session 39: what makes inductor's RMSNorm 8192 faster? Triton variants vs inductor vs cutefi, one process."""
import json, os
import torch, triton, triton.language as tl
import torch.nn.functional as F
from cutefi.bench.timing import bench_gpu_time
import cutefi

OUT = os.environ.get("OUT", "/tmp")
EPS = 1e-6


@triton.jit
def rms_two_pass(x_ptr, w_ptr, o_ptr, N: tl.constexpr, eps, RBLOCK: tl.constexpr, EVICT: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    xr = x_ptr + row * N
    orow = o_ptr + row * N
    acc = tl.zeros([RBLOCK], tl.float32)
    for off in range(0, N, RBLOCK):
        cols = off + tl.arange(0, RBLOCK)
        if EVICT:
            v = tl.load(xr + cols, eviction_policy="evict_last").to(tl.float32)
        else:
            v = tl.load(xr + cols).to(tl.float32)
        acc += v * v
    r = tl.rsqrt(tl.sum(acc, 0) / N + eps)
    for off in range(0, N, RBLOCK):
        cols = off + tl.arange(0, RBLOCK)
        if EVICT:
            v = tl.load(xr + cols, eviction_policy="evict_first").to(tl.float32)
            w = tl.load(w_ptr + cols, eviction_policy="evict_last").to(tl.float32)
        else:
            v = tl.load(xr + cols).to(tl.float32)
            w = tl.load(w_ptr + cols).to(tl.float32)
        tl.store(orow + cols, (v * r * w).to(tl.bfloat16))


@triton.jit
def rms_one_pass(x_ptr, w_ptr, o_ptr, N: tl.constexpr, eps, STREAM: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, N)
    if STREAM:
        v = tl.load(x_ptr + row * N + cols, eviction_policy="evict_first").to(tl.float32)
    else:
        v = tl.load(x_ptr + row * N + cols).to(tl.float32)
    r = tl.rsqrt(tl.sum(v * v, 0) / N + eps)
    w = tl.load(w_ptr + cols).to(tl.float32)
    tl.store(o_ptr + row * N + cols, (v * r * w).to(tl.bfloat16))


def us(fn):
    t = bench_gpu_time(fn, timer="cupti", iters=100, warmup=10)
    return t.median_ms * 1000


def main():
    results = {}
    torch.manual_seed(0)
    shapes = [(16384, 8192), (65536, 8192), (16384, 16384), (16384, 4096)]
    compiled = torch.compile(lambda x, w: F.rms_norm(x, (x.shape[-1],), w, EPS), dynamic=False)
    for rounds in range(2):
        for M, N in shapes:
            x = torch.randn(M, N, device="cuda", dtype=torch.bfloat16)
            w = torch.randn(N, device="cuda", dtype=torch.bfloat16)
            o = torch.empty_like(x)
            ref = (x.float() * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + EPS) * w.float())
            gb = 2 * M * N * 2 / 1e3  # bytes / 1e9 * 1e6 -> per us gives GB/s
            row = {}
            y = torch.empty_like(x)
            row["copy"] = us(lambda: y.copy_(x))
            row["inductor"] = us(lambda: compiled(x, w))
            row["cutefi"] = us(lambda: cutefi.rmsnorm(x, w, EPS, out=o))
            err = ((o.float() - ref).abs().max() / ref.abs().max()).item()
            row["cutefi_err"] = err
            for nw in (4, 8, 16, 32):
                for stream in (0, 1):
                    try:
                        fn = lambda: rms_one_pass[(M,)](x, w, o, N, EPS, STREAM=stream, num_warps=nw)
                        fn()
                        row[f"one_w{nw}_s{stream}"] = us(fn)
                    except Exception as e:  # noqa
                        row[f"one_w{nw}_s{stream}"] = str(e)[:80]
                for rb in (1024, 2048, 4096):
                    if rb > N:
                        continue
                    for ev in (0, 1):
                        fn = lambda: rms_two_pass[(M,)](x, w, o, N, EPS, RBLOCK=rb, EVICT=ev, num_warps=nw)
                        fn()
                        e2 = ((o.float() - ref).abs().max() / ref.abs().max()).item()
                        row[f"two_w{nw}_r{rb}_e{ev}"] = us(fn) if e2 < 1e-2 else f"err {e2}"
            key = f"{M}x{N}_r{rounds}"
            results[key] = row
            num = {k: v for k, v in row.items() if isinstance(v, float) and not k.endswith("err")}
            best = sorted(num.items(), key=lambda kv: kv[1])[:8]
            print(key, "copy %.1f inductor %.1f cutefi %.1f" % (row["copy"], row["inductor"], row["cutefi"]),
                  "GB/s copy %.0f ind %.0f cutefi %.0f" % (gb / row["copy"], gb / row["inductor"], gb / row["cutefi"]),
                  flush=True)
            print("   best:", ", ".join("%s %.1f (%.0f)" % (k, v, gb / v) for k, v in best), flush=True)
    json.dump({"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "triton": triton.__version__,
               "results": results}, open(f"{OUT}/rms_triton.json", "w"), indent=1)


if __name__ == "__main__":
    main()
