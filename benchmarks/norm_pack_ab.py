"""Time the norm ops at a few shapes with whatever pack CUTEFI_PACK_PATH names, for A/B runs of two
trees (each run from its own tree with its own pack; interleave A, B, A, B):

    python benchmarks/norm_pack_ab.py LABEL OUT.json

CUDA events, median of 200 calls (session 19's file: of 7 rounds of 200); prints and writes {case: (us, GB/s)}.
"""
import json, sys, torch, cutefi
from cutefi.bench.timing import gpu_ms
from cutefi.norm import api as A


def bench(fn) -> float:
    """Median device time of ``fn`` in microseconds (CUDA events, 200 calls after 20)."""
    return gpu_ms(fn, iters=200, warmup=20) * 1e3


res = {}
torch.manual_seed(0)
for op in ("rms", "add", "layer", "rms_q", "layer_q"):
    for rows, n in ((128, 4096), (1024, 4096), (16384, 4096), (65536, 4096), (16384, 4095)):
        if op in ("add",) and n == 4095:
            continue
        x = torch.randn(rows, n, device="cuda", dtype=torch.bfloat16)
        r = torch.randn(rows, n, device="cuda", dtype=torch.bfloat16)
        w = torch.randn(n, device="cuda", dtype=torch.bfloat16)
        g = torch.randn(n, device="cuda"); b = torch.randn(n, device="cuda")
        q = op.endswith("_q")
        o = torch.empty(rows, n, device="cuda", dtype=torch.float8_e4m3fn if q else torch.bfloat16)
        fn = {"rms": lambda: cutefi.rmsnorm(x, w, out=o),
              "add": lambda: cutefi.fused_add_rmsnorm(x, r, w),
              "layer": lambda: A.launch_norm("layer", x, g, b, o, None, 1e-6, False),
              "rms_q": lambda: cutefi.rmsnorm_quant(o, x, w, 1.0),
              "layer_q": lambda: cutefi.layernorm_quant(o, x, g, b, 1.0)}[op]
        nbytes = rows * n * (8 if op == "add" else 2 + (1 if q else 2))
        us = bench(fn)
        res[f"{op} {rows}x{n}"] = (round(us, 2), round(nbytes / us / 1e3))
print(sys.argv[1], json.dumps(res))
json.dump(res, open(sys.argv[2], "w"))
