"""Same-run bandwidth check of two source trees (e.g. the landed tree against the working one).

    python benchmarks/compare_trees.py --tree old=.oldtree --tree new=. --rounds 3 --out cmp.json

Each tree runs in its own process (``PYTHONPATH`` = the tree, ``CUTEFI_PACK_PATH`` = its
``.cubins``), alternating old/new per round so clock drift hits both alike, and times
rmsnorm (bf16 16384×4096), fused_add_rmsnorm, layernorm, RoPE (pos_ids, 16384 tokens, 32/8 heads, d128)
and the 2 GiB vectorised copy with CUDA-graph replay of 20 calls (median of 30 replays), and
the host time of a public call (µs per call over 20,000 calls: rmsnorm(out=) 1×4096, copy_ of
16 bytes), and the first call of a new process with a warm pack (import cutefi + copy_).
The report gives each tree's medians (GB/s; µs for "host us" rows, ms for "first call") and new/old ratios.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

_WORKER = r"""
import json, statistics, torch, cutefi
def graph_ms(fn, calls=20, replays=30):
    s = torch.cuda.Stream(); s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3): fn()
    torch.cuda.current_stream().wait_stream(s); torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(calls): fn()
    times = []
    for _ in range(replays):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record(); g.replay(); b.record(); b.synchronize()
        times.append(a.elapsed_time(b) / calls)
    return statistics.median(times)
torch.manual_seed(0)
out = {}
x = torch.randn(16384, 4096, device="cuda", dtype=torch.bfloat16); w = torch.randn(4096, device="cuda", dtype=torch.bfloat16)
y = torch.empty_like(x); r = torch.randn_like(x)
out["rmsnorm 16384x4096 bf16"] = 2 * x.numel() * 2 / graph_ms(lambda: cutefi.rmsnorm(x, w, out=y)) / 1e6
out["fused_add_rmsnorm 16384x4096 bf16"] = 4 * x.numel() * 2 / graph_ms(lambda: cutefi.fused_add_rmsnorm(x, r, w)) / 1e6
for n in (2048, 4096, 8192):
    xl = torch.randn(16384, n, device="cuda", dtype=torch.bfloat16)
    g = torch.rand(n, device="cuda") + 0.5; b = torch.randn(n, device="cuda")
    out[f"layernorm 16384x{n} bf16"] = (2 * xl.numel() * 2 + 2 * n * 4) / graph_ms(lambda: cutefi.layernorm(xl, g, b)) / 1e6
q = torch.randn(16384, 32, 128, device="cuda", dtype=torch.bfloat16); k = torch.randn(16384, 8, 128, device="cuda", dtype=torch.bfloat16)
pos = torch.arange(16384, device="cuda", dtype=torch.int32)
out["rope pos_ids 16384 tok 32/8 heads d128 bf16"] = 2 * (q.numel() + k.numel()) * 2 / graph_ms(lambda: cutefi.apply_rope_pos_ids(q, k, pos)) / 1e6
src = torch.randn(1 << 30, device="cuda", dtype=torch.bfloat16); dst = torch.empty_like(src)
out["copy_ 2 GiB bf16"] = 2 * src.numel() * 2 / graph_ms(lambda: cutefi.copy_(dst, src), calls=5, replays=15) / 1e6
import time
def host_us(fn, calls=20000):
    for _ in range(500): fn()
    torch.cuda.synchronize(); start = time.perf_counter()
    for i in range(calls):
        fn()
        if i % 2000 == 1999: torch.cuda.synchronize()
    torch.cuda.synchronize()
    return (time.perf_counter() - start) / calls * 1e6
xs = torch.randn(1, 4096, device="cuda", dtype=torch.bfloat16); ys = torch.empty_like(xs)
a = torch.randn(8, device="cuda", dtype=torch.float16); b = torch.empty_like(a)
out["host us: rmsnorm(out=) 1x4096"] = host_us(lambda: cutefi.rmsnorm(xs, w, out=ys))
out["host us: copy_ 16 B"] = host_us(lambda: cutefi.copy_(b, a))
print(json.dumps(out))
"""


_FIRST_CALL = r"""
import time, torch
x = torch.randn(1 << 20, device="cuda", dtype=torch.float16); y = torch.empty_like(x); torch.cuda.synchronize()
start = time.perf_counter()
import cutefi
cutefi.copy_(y, x); torch.cuda.synchronize()
print(json.dumps({"first call ms: import cutefi + copy_ (warm pack)": (time.perf_counter() - start) * 1e3}))
"""


def run_tree(path: str) -> dict[str, float]:
    env = dict(os.environ, PYTHONPATH=os.path.abspath(path),
               CUTEFI_PACK_PATH=os.path.join(os.path.abspath(path), ".cubins"))
    results = {}
    for code in ("import json\n" + _FIRST_CALL, _WORKER):
        done = subprocess.run([sys.executable, "-c", code], env=env, cwd=path, capture_output=True, text=True)
        if done.returncode:
            raise RuntimeError(f"tree {path} failed:\n{done.stderr[-3000:]}")
        results.update(json.loads(done.stdout.strip().splitlines()[-1]))
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tree", action="append", required=True, help="NAME=PATH (two or more)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    trees = dict(item.split("=", 1) for item in args.tree)
    samples: dict[str, dict[str, list[float]]] = {name: {} for name in trees}
    for _ in range(args.rounds):
        for name, path in trees.items():
            for op, gbps in run_tree(path).items():
                samples[name].setdefault(op, []).append(gbps)
    medians = {name: {op: statistics.median(v) for op, v in ops.items()} for name, ops in samples.items()}
    names = list(trees)
    base, last = names[0], names[-1]
    ratios = {op: medians[last][op] / medians[base][op] for op in medians[base]}
    report = {"command": " ".join(sys.argv), "timer": "CUDA-graph replay, events", "gbps_median": medians,
              "gbps_samples": samples, f"ratio_{last}_over_{base}": ratios,
              "gpu": __import__("torch").cuda.get_device_name(0)}
    with open(args.out, "w") as handle:
        json.dump(report, handle, indent=1)
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
