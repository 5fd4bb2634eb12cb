"""Decode plan variants (split size, kv-head packing) against dense SDPA, same process, CUPTI.
python decode_split.py: prints one line per (shape, variant): median us over rounds."""
import statistics

import torch

import cutefi
from cutefi.attention import decode
from cutefi.bench.routines.decode import BatchDecode, _sdpa
from cutefi.bench.timing import bench_gpu_time

SHAPES = [(16, 16384, 0), (16, 16384, 1), (8, 16384, 0), (32, 8192, 0), (4, 32768, 0), (8, 8192, 0), (64, 4096, 0),
          (64, 4096, 1)]
routine = BatchDecode()
ROUNDS = 3


def variants(batch, kv_len):
    pages = kv_len // 16
    out = [("default", None, None)]
    for parts in (1, 2, 3, 4, 6, 8):
        if pages % parts == 0 or parts == 3:
            out.append((f"split{parts}", -(-pages // parts), None))
            out.append((f"split{parts}+pack", -(-pages // parts), 0.0))
    return out


for batch, kv_len, fp8 in SHAPES:
    shape = {"batch": batch, "kv_len": kv_len, "qo_heads": 32, "kv_heads": 8, "head_dim": 128, "page_size": 16,
             "ragged": 0, "hnd": 0, "kv_fp8": fp8}
    state, q, k, v, mask = routine.make_inputs(shape, torch.bfloat16)
    plan_args, plan_kw = state["plan"]
    runs = {}
    wrappers = {}
    for name, split, fill in variants(batch, kv_len):
        w = cutefi.BatchDecodeWithPagedKVCacheWrapper(torch.empty(256 << 20, dtype=torch.uint8, device="cuda"), "NHD")
        saved = decode.PACK_FILL
        if fill is not None:
            decode.PACK_FILL = fill
        w.plan(*plan_args, **plan_kw, fixed_split_size=split)
        decode.PACK_FILL = saved
        wrappers[name] = w
        qq = q.squeeze(2)
        runs[name] = (lambda w=w, qq=qq: w.run(qq, state["cache"], **state["scales"]))
    if not fp8:
        runs["sdpa"] = lambda: _sdpa()(q, k, v, mask)
    ref = runs["default"]()
    times = {name: [] for name in runs}
    for _ in range(ROUNDS):
        for name, fn in runs.items():
            times[name].append(bench_gpu_time(fn, iters=50, warmup=5).median_ms * 1e3)
    for name, fn in runs.items():
        if name != "sdpa":
            err = (fn().float() - ref.float()).abs().max().item()
            assert err < 2e-2, (name, err)
    base = statistics.median(times.get("sdpa", times["default"]))
    for name in runs:
        t = statistics.median(times[name])
        print(f"{batch}x{kv_len} fp8={fp8} {name:14s} {t:8.2f} us  sdpa/this {base / t:.3f}  "
              f"plan={wrappers[name]._plan.get('items') if name in wrappers else ''} "
              f"pack={wrappers[name]._plan.get('pack_shift') if name in wrappers else ''}", flush=True)
    torch.cuda.empty_cache()
