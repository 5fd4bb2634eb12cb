import sys, torch, cutefi
from cutefi.bench import bench_gpu_time
print("cutefi from", cutefi.__file__, file=sys.stderr)
torch.manual_seed(0)
cache = torch.randn(8192, 64, device="cuda")
for tokens, heads in ((32, 128), (1024, 128), (16384, 16), (16384, 128)):
    q = torch.randn(tokens, heads, 576, device="cuda", dtype=torch.bfloat16)
    kr = torch.randn(tokens, 64, device="cuda", dtype=torch.bfloat16)
    kn = torch.randn(tokens, 512, device="cuda", dtype=torch.bfloat16)
    pos = torch.randint(0, 8192, (tokens,), device="cuda")
    outs = [torch.empty(t.shape, dtype=torch.float8_e4m3fn, device="cuda") for t in (q[..., 512:], kr, q[..., :512], kn)]
    f = lambda: cutefi.mla_rope_quantize_fp8(q[..., 512:], kr, q[..., :512], kn, cache, pos, True, None, 0.5, 2.0, *outs)
    t = bench_gpu_time(f, timer="events", iters=100)
    nbytes = tokens * (heads + 1) * 576 * 3
    print(f"tokens={tokens} heads={heads}: {t.median_ms * 1e3:.2f} us {nbytes / t.median_ms / 1e6:.0f} GB/s")
