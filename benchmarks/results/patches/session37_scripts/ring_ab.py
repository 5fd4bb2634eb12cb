"""Packed FP8 decode at 64 x 4096: which ring (forced) is fastest; one process, alternated."""
import json, os
import torch
from cutefi.attention import decode
from cutefi.bench.timing import bench_gpu_time
from cutefi.bench.routines.decode import BatchDecode

orig = decode.decode_build
r = BatchDecode()
out_rows = []
for kv_fp8 in (1, 0):
    shape = dict(batch=64, kv_len=4096, qo_heads=32, kv_heads=8, head_dim=128, page_size=16, ragged=0, hnd=0, kv_fp8=kv_fp8)
    state, q, k, v, mask = r.make_inputs(shape, torch.bfloat16)
    w = state["cutefi"]
    variants = {"rule": None, "r4x2": (4, 2), "r3x4": (3, 4), "r5x2": (5, 2)} if kv_fp8 else {"rule": None, "r2x2": (2, 2)}
    res = {}
    for rep in range(3):
        for name, ring in variants.items():
            decode.decode_build = orig if ring is None else (lambda device, d, kv, full_batch=False, ring=ring: ring)
            w._statics = type(w._statics)(16)
            w.plan(*state["plan"][0], **state["plan"][1])
            t = bench_gpu_time(lambda: w.run(q.squeeze(2), state["cache"], **state["scales"]), iters=50).median_ms * 1e3
            res.setdefault(name, []).append(t)
            res[name + "_plan"] = (w._plan["stages"], w._plan["items"], w._plan["pack_shift"])
    print(kv_fp8, {n: (round(min(res[n]), 2), res[n + "_plan"]) for n in variants}, flush=True)
    out_rows.append({"shape": shape, **res})
decode.decode_build = orig
json.dump(out_rows, open(os.environ.get("OUT", "/tmp") + "/ring_ab.json", "w"), indent=1)
