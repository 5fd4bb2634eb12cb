"""Does launching with PDL change the CUPTI-measured decode time (the bench's timer)? Same tensors, alternated."""
import json, os
import torch
from cutefi.bench.timing import bench_gpu_time
from cutefi.bench.routines.decode import BatchDecode, _sdpa

r = BatchDecode()
rows = []
for extra in (dict(), dict(kv_fp8=1), dict(batch=1, kv_len=2048), dict(batch=8, kv_len=8192)):
    shape = dict(batch=64, kv_len=4096, qo_heads=32, kv_heads=8, head_dim=128, page_size=16, ragged=0, hnd=0, kv_fp8=0)
    shape.update(extra)
    state, q, k, v, mask = r.make_inputs(shape, torch.bfloat16)
    w = state["cutefi"]
    res = {}
    for rep in range(3):
        for timer in ("cupti", "events"):
            for pdl in (True, False):
                t = bench_gpu_time(lambda: w.run(q.squeeze(2), state["cache"], enable_pdl=pdl, **state["scales"]),
                                   iters=50, timer=timer).median_ms * 1e3
                res.setdefault(f"{timer}_pdl{int(pdl)}", []).append(t)
            if not extra.get("kv_fp8"):
                res.setdefault(f"{timer}_sdpa", []).append(
                    bench_gpu_time(lambda: _sdpa()(q, k, v, mask), iters=50, timer=timer).median_ms * 1e3)
    print(json.dumps(extra), {k_: round(min(v_), 2) for k_, v_ in res.items()}, flush=True)
    rows.append({"shape": shape, **res})
json.dump(rows, open(os.environ.get("OUT", "/tmp") + "/pdl_probe.json", "w"), indent=1)
