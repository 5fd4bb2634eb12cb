"""In-process: the decode-sized (skinny) plan against swapped builds (with the streaming rule)
for 9-16 tokens on <= 4096 weight rows and long K."""
import json, statistics, sys
import torch, cutefi
from cutefi.bench.timing import bench_gpu_time
from cutefi.gemm.plan import override
SHAPES = [(m, n, k) for n in (3328, 3584, 3840, 4096) for k in (10240, 14336, 28672) for m in (9, 16)]
CHOICES = [(None, None), ("64x32c1k2t", 2)]
out = {}
for m, n, k in SHAPES:
    w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    ref = a.float() @ w.float().t()
    times = {}
    for _ in range(2):
        for config, splits in CHOICES:
            name = f"{config or 'plan'}s{splits or ''}"
            with override(config=config, splits=splits) if config else override():
                got = cutefi.mm_bf16(a, w.t()).float()
                assert ((got - ref).norm() / ref.norm()).item() < 1e-2
                times.setdefault(name, []).append(bench_gpu_time(cutefi.mm_bf16, (a, w.t()), iters=50).median_ms * 1e3)
    med = {key: round(statistics.median(v), 2) for key, v in times.items()}
    out[f"{m}x{n}x{k}"] = med
    print(m, n, k, med, flush=True)
json.dump(out, open(sys.argv[1], "w"), indent=1)
