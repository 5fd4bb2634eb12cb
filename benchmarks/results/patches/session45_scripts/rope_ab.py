import sys, torch, cutefi
from cutefi.bench import bench_gpu_time
print("cutefi from", cutefi.__file__, file=sys.stderr)
torch.manual_seed(0)
for nnz in (128, 16384, 65536):
    for R, neox in ((128, True), (128, False), (64, True)):
        q = torch.randn(nnz, 32 * 128, device="cuda", dtype=torch.bfloat16)
        k = torch.randn(nnz, 8 * 128, device="cuda", dtype=torch.bfloat16)
        cache = torch.randn(8192, R, device="cuda")
        pos = torch.randint(0, 8192, (nnz,), device="cuda")
        f = lambda: cutefi.apply_rope_with_cos_sin_cache_inplace(pos, q, k, 128, cache, is_neox=neox)
        t = bench_gpu_time(f, timer="events", iters=200)
        print(f"cache nnz={nnz} R={R} neox={neox}: {t.median_ms * 1e3:.2f} us")
