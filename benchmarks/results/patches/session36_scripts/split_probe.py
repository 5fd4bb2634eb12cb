"""Decode split chunk: the plan's choice against the smallest chunk whose items fit one wave."""
import json, os, statistics
import numpy as np
import torch
from cutefi.attention import decode_plan
from cutefi.bench.routines.decode import BatchDecode
from cutefi.bench.timing import bench_gpu_time

OUT = os.environ.get("OUT", "/tmp")
routine = BatchDecode()
rows = []
for b, n in ((16, 16384), (4, 32768), (12, 16384), (24, 8192), (2, 65536), (20, 10000), (8, 8192), (1, 131072)):
    shape = dict(batch=b, kv_len=n, qo_heads=32, kv_heads=8, head_dim=128, page_size=16, ragged=0, hnd=0, kv_fp8=0)
    state, q, k, v, mask = routine.make_inputs(shape, torch.bfloat16)
    wrapper, cache = state["cutefi"], state["cache"]
    plan_args, plan_kw = state["plan"]
    ref = routine.reference((state, q, k, v, mask), shape)[0]
    slots, cpi, tile = 264, 8, 64
    target = -(-slots // cpi)
    ranges = np.full(b, n)
    chunk = decode_plan.choose_chunk(ranges, cpi, slots, tile, False, None)
    fit = -(-n // tile) * tile
    c = tile
    while c <= fit:
        if int(np.maximum(-(-ranges // c), 1).sum()) <= target:
            fit = c
            break
        c += tile
    options = {"plan": None, f"fit{fit}": fit // 16}
    times = {key: [] for key in options}
    for _ in range(3):
        for key, pages in options.items():
            wrapper.plan(*plan_args, **plan_kw, fixed_split_size=pages)
            qq = q.squeeze(2)
            out = wrapper.run(qq, cache)
            err = ((out.float() - ref).norm() / ref.norm()).item()
            assert err < 2e-2, err
            times[key].append(bench_gpu_time(wrapper.run, (qq, cache), iters=50, warmup=5).median_ms * 1e3)
    med = {key: round(statistics.median(t), 2) for key, t in times.items()}
    row = dict(batch=b, kv_len=n, plan_chunk=chunk, fit_chunk=fit, us=med)
    print(json.dumps(row), flush=True)
    rows.append(row)
json.dump(rows, open(os.path.join(OUT, "split_probe.json"), "w"), indent=1)
