"""Time the packed-rows RMSNorm and LayerNorm builds against the
shifted one-row builds on the same calls.

    python benchmarks/norm_packed_vs_shifted.py OUT.json

bf16 RMSNorm, LayerNorm and their FP8 (e4m3) quant variants at hidden 1023/2047/4095 (and
4096, aligned, for reference) over 128-65536 rows: each case is run with the packed build,
then with the shifted one (the plan cache cleared and ``PACKED_MIN_ROWS`` raised in between), CUDA events, median
of five rounds of 200 calls.
"""
import json, sys, torch, cutefi
from cutefi.norm import plan as P, api as A

def bench(fn, iters=200, rounds=5):
    for _ in range(10): fn()
    ts = []
    for _ in range(rounds):
        s, e = torch.cuda.Event(True), torch.cuda.Event(True)
        torch.cuda.synchronize(); s.record()
        for _ in range(iters): fn()
        e.record(); torch.cuda.synchronize()
        ts.append(s.elapsed_time(e) * 1e3 / iters)
    return sorted(ts)[len(ts) // 2]

res = []
for kind, quant in (("rms", False), ("rms", True), ("layer", False), ("layer", True)):
    for n in (4095, 4096, 2047, 1023):
        for rows in (128, 4096, 16384, 65536):
            x = torch.randn(rows, n, device="cuda", dtype=torch.bfloat16)
            w = torch.randn(n, device="cuda", dtype=torch.bfloat16)
            o = torch.empty(rows, n, device="cuda", dtype=torch.float8_e4m3fn if quant else torch.bfloat16)
            g = torch.randn(n, device="cuda"); b = torch.randn(n, device="cuda")
            if kind == "rms":
                fn = (lambda: cutefi.rmsnorm_quant(o, x, w, 1.0)) if quant else (lambda: cutefi.rmsnorm(x, w, out=o))
            else:
                fn = (lambda: cutefi.layernorm_quant(o, x, g, b, 1.0)) if quant else (lambda: A.launch_norm("layer", x, g, b, o, None, 1e-6, False))
            row = {"kind": kind, "n": n, "rows": rows, "quant": quant}
            for mode, min_rows in (("packed", 64), ("shifted", 1 << 40)):
                if n % 8 == 0 and mode == "shifted":
                    continue
                P.PACKED_MIN_ROWS = min_rows
                A._PLANS.clear()
                us = bench(fn)
                nbytes = rows * n * (2 + (1 if quant else 2))
                row[mode] = round(us, 2); row[mode + "_gbps"] = round(nbytes / us / 1e3)
            print(row, flush=True)
            res.append(row)
json.dump(res, open(sys.argv[1], "w"), indent=1)
