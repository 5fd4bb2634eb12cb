"""Time the packed-rows RMSNorm build against the shifted one-row build on the same calls.

    python benchmarks/norm_packed_vs_shifted.py OUT.json

bf16 RMSNorm and FP8 (e4m3) RMSNorm-quant at hidden 1023/2047/4095 (and 4096, aligned, for
reference) over 64-65536 rows: each case is run with the packed build, then with the shifted
one (the plan cache cleared and ``PACKED_MIN_ROWS`` raised in between), CUDA events, median
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
for quant in (False, True):
    for n in (4095, 4096, 2047, 1023):
        for rows in (64, 128, 1024, 4096, 16384, 65536):
            x = torch.randn(rows, n, device="cuda", dtype=torch.bfloat16)
            w = torch.randn(n, device="cuda", dtype=torch.bfloat16)
            o = torch.empty(rows, n, device="cuda", dtype=torch.float8_e4m3fn if quant else torch.bfloat16)
            fn = (lambda: cutefi.rmsnorm_quant(o, x, w, 1.0)) if quant else (lambda: cutefi.rmsnorm(x, w, out=o))
            row = {"n": n, "rows": rows, "quant": quant}
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
