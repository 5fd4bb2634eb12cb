"""One process per GPU: cutefi's ops on every rank against float32 references, timed with CUDA events.

Run:  torchrun --nproc-per-node 2 benchmarks/multi_gpu_torchrun.py --out DIR

Each rank sets cuda:LOCAL_RANK, checks rmsnorm, apply_rope_pos_ids and copy_ on a few shapes, times
each with CUDA events, and all-reduces a pass flag over NCCL. NVLink multicast stays off
(NCCL_NVLS_ENABLE=0, set here when missing; any other value is refused). Rank 0 writes
DIR/multi_gpu_torchrun.json with every rank's results; every rank exits 1 if any rank failed.
"""

import argparse
import datetime
import json
import math
import os
import socket
import sys
import traceback

import torch
import torch.distributed as dist

import cutefi

# the float32 references written in the two-GPU test (one definition for both)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
from test_multi_gpu import rms_reference, rope_reference  # noqa: E402

# NVLink multicast can take a shared host's GPUs out of service: it stays off (NCCL reads these at init)
MULTICAST_OFF = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}
TOLERANCE = {torch.bfloat16: 1e-2, torch.float16: 3e-3}  # relative L2 error
RMSNORM = [(7, 4096, torch.bfloat16), (4096, 4096, torch.bfloat16), (333, 5120, torch.float16)]
ROPE = [(7, 32, 8, 128, torch.bfloat16), (4096, 32, 8, 128, torch.bfloat16), (1000, 16, 4, 256, torch.float16)]
COPY = [(1024, torch.bfloat16), (3 * 2**20 + 8, torch.float16), (2**25, torch.bfloat16)]  # elements
WARMUP, ITERS = 3, 20


def rel_error(out, ref):
    """Relative L2 error (inf when the output holds NaN, i.e. an element was never written)."""
    if torch.isnan(out).any():
        return math.inf
    return ((out.float() - ref.float()).norm() / ref.float().norm()).item()


def median_ms(fn):
    """Median device time of one call over ITERS calls, each between its own pair of CUDA events."""
    for _ in range(WARMUP):
        fn()
    pairs = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(ITERS)]
    for start, end in pairs:
        start.record()
        fn()
        end.record()
    torch.cuda.synchronize()
    times = sorted(start.elapsed_time(end) for start, end in pairs)
    return times[len(times) // 2]


def case(op, shape, dtype, check, call, nbytes):
    """Run ``check`` (-> relative error) and time ``call``; never raises, a failure is recorded."""
    result = {"op": op, "shape": list(shape), "dtype": str(dtype).replace("torch.", ""),
              "tolerance": TOLERANCE[dtype]}
    try:
        result["rel_err"] = check()
        ms = median_ms(call)
        result.update(median_ms=ms, gb_per_s=nbytes / ms / 1e6)
        result["ok"] = result["rel_err"] < TOLERANCE[dtype]
    except Exception as exc:  # noqa: BLE001: reported in the JSON and fails the run
        result.update(ok=False, error=f"{type(exc).__name__}: {exc}", traceback=traceback.format_exc())
    return result


def rmsnorm_cases(dev):
    for rows, hidden, dtype in RMSNORM:
        x = torch.randn(rows, hidden, device=dev, dtype=dtype)
        w = torch.randn(hidden, device=dev, dtype=dtype)
        out = cutefi.poison_(torch.empty_like(x))

        def check(x=x, w=w, out=out):
            cutefi.rmsnorm(x, w, out=out)
            return rel_error(out, rms_reference(x, w))

        yield case("rmsnorm", (rows, hidden), dtype, check, lambda x=x, w=w, out=out: cutefi.rmsnorm(x, w, out=out),
                   2 * x.numel() * x.element_size())


def rope_cases(dev):
    for nnz, hq, hk, head_dim, dtype in ROPE:
        q = torch.randn(nnz, hq, head_dim, device=dev, dtype=dtype)
        k = torch.randn(nnz, hk, head_dim, device=dev, dtype=dtype)
        pos = torch.randint(0, 16384, (nnz,), device=dev, dtype=torch.int32)

        def check(q=q, k=k, pos=pos):
            q_out, k_out = cutefi.apply_rope_pos_ids(q, k, pos)
            return max(rel_error(q_out, rope_reference(q, pos)), rel_error(k_out, rope_reference(k, pos)))

        yield case("apply_rope_pos_ids", (nnz, hq, hk, head_dim), dtype, check,
                   lambda q=q, k=k, pos=pos: cutefi.apply_rope_pos_ids(q, k, pos),
                   2 * (q.numel() + k.numel()) * q.element_size())


def copy_cases(dev):
    for numel, dtype in COPY:
        src = torch.randn(numel, device=dev, dtype=dtype)
        dst = cutefi.poison_(torch.empty_like(src))

        def check(src=src, dst=dst):
            cutefi.copy_(dst, src)
            return 0.0 if torch.equal(dst, src) else max(rel_error(dst, src), 1.0)  # must be bit-exact

        yield case("copy_", (numel,), dtype, check, lambda src=src, dst=dst: cutefi.copy_(dst, src),
                   2 * src.numel() * src.element_size())


def run_rank(rank, local_rank):
    dev = torch.device("cuda", local_rank)
    props, nccl = torch.cuda.get_device_properties(dev), torch.cuda.nccl.version()
    info = {"rank": rank, "local_rank": local_rank, "host": socket.gethostname(), "device": str(dev),
            "device_name": props.name, "capability": f"{props.major}.{props.minor}",
            "torch": torch.__version__, "cuda": torch.version.cuda,
            "nccl": ".".join(map(str, nccl)) if isinstance(nccl, tuple) else str(nccl), "cutefi": cutefi.__version__,
            "CUDA_VISIBLE_DEVICES": os.environ.get("CUDA_VISIBLE_DEVICES")}
    cases, errors = [], []
    try:
        for make in (rmsnorm_cases, rope_cases, copy_cases):
            cases.extend(make(dev))
        if torch.cuda.current_device() != local_rank:
            errors.append(f"current device changed to cuda:{torch.cuda.current_device()}")
    except Exception as exc:  # noqa: BLE001: set-up failures (allocation, poison_) are reported too
        errors.append(f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}")
    max_rel = {}
    for c in cases:
        if "rel_err" in c:
            max_rel[c["op"]] = max(max_rel.get(c["op"], 0.0), c["rel_err"])
    ok = not errors and bool(cases) and all(c["ok"] for c in cases)
    return {**info, "ok": ok, "errors": errors, "max_rel_err": max_rel, "cases": cases}


def json_safe(value):
    """inf (an unwritten output) is not JSON: write it as a string."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, list):
        return [json_safe(v) for v in value]
    return value


def keep_nvlink_multicast_off():
    """Set the variables that keep NVLink multicast off where missing; refuse to run if one says otherwise."""
    for name, value in MULTICAST_OFF.items():
        if os.environ.setdefault(name, value) != value:
            sys.exit(f"refusing to run with {name}={os.environ[name]}: NVLink multicast must stay off ({name}={value})")


def main():
    keep_nvlink_multicast_off()  # before anything can start NCCL
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True, help="folder for multi_gpu_torchrun.json (created if missing)")
    args = parser.parse_args()
    if "LOCAL_RANK" not in os.environ:
        sys.exit("run under torchrun: torchrun --nproc-per-node 2 benchmarks/multi_gpu_torchrun.py --out DIR")
    rank, local_rank = int(os.environ["RANK"]), int(os.environ["LOCAL_RANK"])
    world = int(os.environ["WORLD_SIZE"])
    if local_rank >= torch.cuda.device_count():
        sys.exit(f"rank {rank}: LOCAL_RANK {local_rank} but {torch.cuda.device_count()} GPUs visible")
    torch.cuda.set_device(local_rank)
    dev = torch.device("cuda", local_rank)
    dist.init_process_group("nccl", device_id=dev, timeout=datetime.timedelta(minutes=5))
    started = datetime.datetime.now(datetime.timezone.utc)
    result = run_rank(rank, local_rank)
    flag = torch.tensor([1 if result["ok"] else 0], device=dev, dtype=torch.int32)
    dist.all_reduce(flag, op=dist.ReduceOp.MIN)  # 1 only if every rank passed
    results = [None] * world
    dist.all_gather_object(results, result)
    all_ok = bool(flag.item())
    if rank == 0:
        os.makedirs(args.out, exist_ok=True)
        report = {"all_ok": all_ok, "world_size": world, "started": started.isoformat(),
                  "elapsed_s": (datetime.datetime.now(datetime.timezone.utc) - started).total_seconds(),
                  "env": {k: os.environ.get(k) for k in (*MULTICAST_OFF, "CUTEFI_PACK_PATH", "CUTEFI_CACHE_DIR")},
                  "timing": {"warmup": WARMUP, "iters": ITERS, "stat": "median of CUDA-event pairs"},
                  "ranks": results}
        path = os.path.join(args.out, "multi_gpu_torchrun.json")
        with open(path, "w") as f:
            json.dump(json_safe(report), f, indent=2)
        for r in results:
            print(f"rank {r['rank']} {r['device']} {r['device_name']}: {'ok' if r['ok'] else 'FAILED'} "
                  f"max rel err {r['max_rel_err']}" + "".join(f"\n  {e}" for e in r["errors"]))
            for c in r["cases"]:
                if not c["ok"]:
                    print(f"  FAILED {c['op']} {c['shape']} {c['dtype']}: {c.get('error', c.get('rel_err'))}")
        print(f"{'all ranks passed' if all_ok else 'FAILED'}; wrote {path}")
    dist.destroy_process_group()
    return 0 if all_ok else 1


if __name__ == "__main__":
    sys.exit(main())
