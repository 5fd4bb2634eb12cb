"""Foundation measurements: host launch overhead, first call with a warm cache, import time,
and the proof kernels' bandwidth against torch in the same run.

Run: ``python -m cutefi.bench.foundation --out results.json``. Needs a GPU and cubins
(a pack via ``CUTEFI_PACK_PATH`` or the cache).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from typing import Any, Callable

import torch

import cutefi
from cutefi.bench.environment import environment
from cutefi.bench.timing import gpu_ms

LAUNCHES = 10_000


def host_overhead_us(call: Callable[[], Any], launches: int = LAUNCHES) -> dict[str, float]:
    """Median/p10/p90 host time of one call, each timed alone (the GPU keeps up with tiny kernels)."""
    for _ in range(200):
        call()
    torch.cuda.synchronize()
    samples = []
    clock = time.perf_counter_ns
    for index in range(launches):
        start = clock()
        call()
        samples.append(clock() - start)
        if index % 2000 == 1999:
            torch.cuda.synchronize()  # keep the launch queue short
    torch.cuda.synchronize()
    samples.sort()
    return {"median_us": samples[len(samples) // 2] / 1e3, "p10_us": samples[len(samples) // 10] / 1e3,
            "p90_us": samples[len(samples) * 9 // 10] / 1e3, "launches": launches}


def launch_overhead() -> dict[str, Any]:
    from cutefi.copy.launch import COPY_SPEC
    from cutefi.jit.lookup import get_kernel

    src = torch.randn(8, device="cuda", dtype=torch.float16)
    dst = torch.empty_like(src)
    a, b, c = (torch.randn(8, device="cuda") for _ in range(3))
    x, w = torch.randn(1, 4096, device="cuda", dtype=torch.bfloat16), torch.randn(4096, device="cuda", dtype=torch.bfloat16)
    y = torch.empty_like(x)
    kernel = get_kernel(COPY_SPEC, 0)
    stream = torch.cuda.current_stream().cuda_stream
    s, d = src.data_ptr(), dst.data_ptr()
    return {
        "cutefi.copy_ (public call: checks + lookup + launch)": host_overhead_us(lambda: cutefi.copy_(dst, src)),
        "cutefi.rmsnorm(out=) 1x4096 (public call)": host_overhead_us(lambda: cutefi.rmsnorm(x, w, out=y)),
        "Kernel.launch (loader only, torch stream lookup)":
            host_overhead_us(lambda: kernel.launch((1, 1, 1), 0, src=s, dst=d, num_vectors=1)),
        "Kernel.launch (loader only, stream given)":
            host_overhead_us(lambda: kernel.launch((1, 1, 1), 0, stream, src=s, dst=d, num_vectors=1)),
        "torch.add(out=) (peer)": host_overhead_us(lambda: torch.add(a, b, out=c)),
    }


_FIRST_CALL = r"""
import sys, time, torch
x = torch.randn(1 << 20, device="cuda", dtype=torch.float16); y = torch.empty_like(x)
torch.cuda.synchronize()
t0 = time.perf_counter()
import cutefi
t1 = time.perf_counter()
cutefi.copy_(y, x); torch.cuda.synchronize()
t2 = time.perf_counter()
assert torch.equal(x, y)
print(t1 - t0, t2 - t1, any(m == "cutlass" or m.startswith("cutlass.") for m in sys.modules))
"""


def first_call(runs: int = 5) -> dict[str, Any]:
    imports, calls, cutlass_seen = [], [], []
    for _ in range(runs):
        out = subprocess.run([sys.executable, "-c", _FIRST_CALL], capture_output=True, text=True, check=True)
        import_s, call_s, seen = out.stdout.split()
        imports.append(float(import_s) * 1e3)
        calls.append(float(call_s) * 1e3)
        cutlass_seen.append(seen == "True")
    return {
        "import_cutefi_ms_median": statistics.median(imports),
        "first_call_ms_median": statistics.median(calls), "first_call_ms_all": calls,
        "cutlass_imported": any(cutlass_seen), "runs": runs,
    }


def profile_first_call(path: str) -> None:
    """cProfile of one first call (new process, warm cache), top entries by cumulative time."""
    code = ("import cProfile, pstats, io, torch\n"
            "x = torch.randn(1 << 20, device='cuda', dtype=torch.float16); y = torch.empty_like(x)\n"
            "torch.cuda.synchronize()\n"
            "profile = cProfile.Profile(); profile.enable()\n"
            "import cutefi; cutefi.copy_(y, x); torch.cuda.synchronize()\n"
            "profile.disable(); out = io.StringIO()\n"
            "pstats.Stats(profile, stream=out).sort_stats('cumulative').print_stats(40)\n"
            "print(out.getvalue())\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    with open(path, "w") as handle:
        handle.write(result.stdout + result.stderr)


def bandwidth() -> dict[str, Any]:
    results = {}
    numel = 1 << 30  # 2 GiB of bf16: far past the 60 MB L2
    src = torch.randn(numel, device="cuda", dtype=torch.bfloat16)
    dst = torch.empty_like(src)
    moved = 2 * src.numel() * src.element_size()
    for name, call in (("cutefi.copy_", lambda: cutefi.copy_(dst, src)), ("torch copy_ (peer)", lambda: dst.copy_(src))):
        ms = gpu_ms(call)
        results[name] = {"ms": ms, "gbps": moved / ms / 1e6, "bytes": moved}
    src2, dst2 = src.view(32768, 32768), dst.view(32768, 32768)
    ms = gpu_ms(lambda: cutefi.tma_copy_(dst2, src2))
    results["cutefi.tma_copy_ 32768x32768 bf16"] = {"ms": ms, "gbps": moved / ms / 1e6, "bytes": moved}
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", required=True)
    parser.add_argument("--profile", help="also write a cProfile of the first call to this file")
    args = parser.parse_args(argv)
    if args.profile:
        profile_first_call(args.profile)
    report = {"env": environment(), "launch_overhead": launch_overhead(), "first_call": first_call(),
              "bandwidth": bandwidth()}
    with open(args.out, "w") as handle:
        json.dump(report, handle, indent=1)
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
