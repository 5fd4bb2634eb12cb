"""A/B in one process: narrow decode with kv heads packed into a CTA's tiles vs one kv head a CTA."""
import json, os, sys
import torch
from cutefi.attention import decode
from cutefi.bench.timing import bench_gpu_time
from cutefi.bench.routines.decode import BatchDecode, _sdpa

SHAPES = [
    dict(kv_fp8=1), dict(kv_fp8=2), dict(kv_fp8=1, batch=33), dict(kv_fp8=1, batch=60), dict(kv_fp8=1, hnd=1), dict(kv_fp8=1, batch=8, kv_len=8192),
    dict(kv_fp8=1, batch=128, kv_len=1024), dict(kv_fp8=1, batch=1, kv_len=131072),
    dict(kv_fp8=1, batch=64, kv_len=32768, ragged=1), dict(kv_fp8=1, qo_heads=8),
    dict(kv_fp8=1, qo_heads=16), dict(kv_fp8=1, head_dim=64, qo_heads=32), dict(kv_fp8=1, head_dim=256, qo_heads=16, kv_heads=4),
    dict(), dict(hnd=1), dict(qo_heads=8), dict(batch=8, kv_len=8192), dict(batch=128, kv_len=1024),
    dict(batch=64, kv_len=32768, ragged=1),
]
r = BatchDecode()
rows = []
for extra in SHAPES:
    shape = dict(batch=64, kv_len=4096, qo_heads=32, kv_heads=8, head_dim=128, page_size=16, ragged=0, hnd=0, kv_fp8=0)
    shape.update(extra)
    state, q, k, v, mask = r.make_inputs(shape, torch.bfloat16)
    ref = r.reference((state, q, k, v, mask), shape)[0]
    cost = r.cost(shape, torch.bfloat16)
    res = {"shape": shape, "bytes": cost.bytes}
    w = state["cutefi"]
    for rep in range(3):
        for name in ("pack", "one"):  # the plan's rule, or never packed
            decode.PACK_KV["fp8"] = decode.PACK_KV["16-bit"] = name != "one"
            w._statics = type(w._statics)(16)  # (static plans are cached by argument)
            w.plan(*state["plan"][0], **state["plan"][1])
            res[name + "_shift"] = w._plan["pack_shift"]
            res[name + "_items"] = w._plan["items"]
            res[name + "_stages"] = w._plan["stages"]
            out = w.run(q.squeeze(2), state["cache"], **state["scales"])
            res[name + "_err"] = ((out.float() - ref).norm() / ref.norm()).item()
            t = bench_gpu_time(lambda: w.run(q.squeeze(2), state["cache"], **state["scales"]), iters=50).median_ms * 1e3
            res.setdefault(name, []).append(t)
    if not extra.get("kv_fp8"):
        res["sdpa"] = [bench_gpu_time(lambda: _sdpa()(q, k, v, mask), iters=50).median_ms * 1e3 for _ in range(2)]
    line = {kk: min(vv) for kk, vv in res.items() if isinstance(vv, list)}
    print(json.dumps(extra), {kk: round(vv, 2) for kk, vv in line.items()},
          {kk: round(cost.bytes / (vv * 1e3)) for kk, vv in line.items()}, "one/pack %.3f" % (line["one"] / line["pack"]),
          "shift", res["pack_shift"], res["one_shift"], "items", res["pack_items"], res["one_items"],
          "stages", res["pack_stages"], res["one_stages"],
          "err %.1e %.1e" % (res["pack_err"], res["one_err"]), flush=True)
    rows.append(res)
json.dump(rows, open(os.environ.get("OUT", "/tmp") + "/pack_ab.json", "w"), indent=1)
