"""The latency builds (``tuning.LATENCY_BUILDS``) against their classes' own builds, same run:
each public call timed with the latency builds on and with them off (the table emptied), at
row counts on both sides of each build's limit. CUPTI device time, median of 200 calls.

    python benchmarks/norm_latency_ab.py OUT.json      (GPU, with a norm pack carried)
"""
import json
import sys

import torch

import cutefi
from cutefi.bench.timing import bench_gpu_time
from cutefi.norm import api, plan, tuning

ROWS = (1, 32, 128, 256, 512, 1024, 2048, 4096)
CASES = {  # name -> (hidden, out dtype or None, call(x, w, g, b, out))
    "rmsnorm 2048": (2048, None, lambda x, w, g, b, o: cutefi.rmsnorm(x, w, out=o)),
    "rmsnorm_quant 2048": (2048, torch.float8_e4m3fn, lambda x, w, g, b, o: cutefi.rmsnorm_quant(o, x, w, 1.0)),
    "layernorm 4096": (4096, None, lambda x, w, g, b, o: cutefi.layernorm(x, g, b)),
    "layernorm 8192": (8192, None, lambda x, w, g, b, o: cutefi.layernorm(x, g, b)),
}


def time_us(fn) -> float:
    return bench_gpu_time(fn, timer="cupti", iters=200, warmup=20).median_ms * 1e3


def main(out_path: str) -> None:
    table = dict(tuning.LATENCY_BUILDS)
    results = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "timer": "CUPTI median of 200",
               "command": "python benchmarks/norm_latency_ab.py " + out_path, "us": {}}
    for name, (hidden, out_dtype, call) in CASES.items():
        for rows in ROWS:
            x = torch.randn(rows, hidden, device="cuda", dtype=torch.bfloat16)
            w = torch.rand(hidden, device="cuda", dtype=torch.bfloat16) + 0.5
            g, b = torch.randn(hidden, device="cuda"), torch.randn(hidden, device="cuda")
            o = torch.empty(rows, hidden, device="cuda", dtype=out_dtype or torch.bfloat16)
            timed = {}
            for label, builds in (("own", {}), ("latency", table), ("own2", {}), ("latency2", table)):
                tuning.LATENCY_BUILDS.clear()
                tuning.LATENCY_BUILDS.update(builds)
                api._PLANS.clear()
                plan.spec_for.cache_clear()
                timed[label] = time_us(lambda: call(x, w, g, b, o))
            own, fast = min(timed["own"], timed["own2"]), min(timed["latency"], timed["latency2"])
            results["us"][f"{name} M{rows}"] = {"own": own, "latency": fast, "speedup": own / fast}
            print(f"{name:20s} M{rows:<6d} own {own:7.2f} us  latency {fast:7.2f} us  x{own / fast:.3f}", flush=True)
    tuning.LATENCY_BUILDS.update(table)
    with open(out_path, "w") as handle:
        json.dump(results, handle, indent=1)


if __name__ == "__main__":
    main(sys.argv[1])
