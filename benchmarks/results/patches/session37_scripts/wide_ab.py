"""A/B in one process: the plan's packing (narrow groups <= 4, wide groups 5-8) vs none."""
import json, os
import torch
from cutefi.attention import decode
from cutefi.bench.timing import bench_gpu_time
from cutefi.bench.routines.decode import BatchDecode, _sdpa

SHAPES = [dict(qo_heads=64), dict(qo_heads=64, kv_fp8=1), dict(qo_heads=64, kv_fp8=2), dict(qo_heads=64, batch=128, kv_len=1024),
          dict(qo_heads=64, kv_fp8=1, batch=128, kv_len=1024), dict(qo_heads=64, batch=64, kv_len=32768, ragged=1),
          dict(qo_heads=64, head_dim=64), dict(qo_heads=64, head_dim=64, kv_fp8=1), dict(qo_heads=40),
          dict(), dict(kv_fp8=1)]
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
        for name in ("pack", "one"):
            decode.PACK_KV["fp8"] = decode.PACK_KV["16-bit"] = name == "pack"
            decode.PACK_MIN_HEAD_DIM = 64
            w._statics = type(w._statics)(16)
            w.plan(*state["plan"][0], **state["plan"][1])
            res[name + "_plan"] = (w._plan["narrow"], w._plan["pack_shift"], w._plan["stages"], w._plan["items"])
            out = w.run(q.squeeze(2), state["cache"], **state["scales"])
            res[name + "_err"] = ((out.float() - ref).norm() / ref.norm()).item()
            t = bench_gpu_time(lambda: w.run(q.squeeze(2), state["cache"], **state["scales"]), iters=50).median_ms * 1e3
            res.setdefault(name, []).append(t)
    if not extra.get("kv_fp8"):
        res["sdpa"] = [bench_gpu_time(lambda: _sdpa()(q, k, v, mask), iters=50).median_ms * 1e3 for _ in range(2)]
    line = {kk: min(vv) for kk, vv in res.items() if isinstance(vv, list)}
    print(json.dumps(extra), {kk: round(vv, 2) for kk, vv in line.items()}, "one/pack %.3f" % (line["one"] / line["pack"]),
          res["pack_plan"], res["one_plan"], "err %.1e %.1e" % (res["pack_err"], res["one_err"]), flush=True)
    rows.append(res)
json.dump(rows, open(os.environ.get("OUT", "/tmp") + "/wide_ab.json", "w"), indent=1)
