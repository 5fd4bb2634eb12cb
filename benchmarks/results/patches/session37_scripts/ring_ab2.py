"""Packed plans: the plan's ring vs a shallower one (bf16 2 x 2, FP8 4 x 2), 5 alternated rounds."""
import json, os
import torch
from cutefi.attention import decode
from cutefi.bench.timing import bench_gpu_time
from cutefi.bench.routines.decode import BatchDecode

orig = decode.decode_build
r = BatchDecode()
rows = []
SHAPES = [dict(), dict(kv_fp8=1), dict(kv_fp8=2), dict(batch=60, kv_fp8=1), dict(batch=128, kv_len=1024),
          dict(batch=64, kv_len=32768, ragged=1), dict(batch=64, kv_len=32768, ragged=1, kv_fp8=1), dict(qo_heads=16)]
for extra in SHAPES:
    shape = dict(batch=64, kv_len=4096, qo_heads=32, kv_heads=8, head_dim=128, page_size=16, ragged=0, hnd=0, kv_fp8=0)
    shape.update(extra)
    state, q, k, v, mask = r.make_inputs(shape, torch.bfloat16)
    w = state["cutefi"]
    shallow = (4, 2) if extra.get("kv_fp8") else (2, 2)
    res = {}
    for rep in range(5):
        for name, ring in (("rule", None), ("shallow", shallow)):
            decode.decode_build = orig if ring is None else (lambda device, d, kv, full_batch=False, ring=ring: ring)
            w._statics = type(w._statics)(16)
            w.plan(*state["plan"][0], **state["plan"][1])
            t = bench_gpu_time(lambda: w.run(q.squeeze(2), state["cache"], **state["scales"]), iters=50).median_ms * 1e3
            res.setdefault(name, []).append(t)
            res[name + "_plan"] = (w._plan["stages"], w._plan["items"], w._plan["pack_shift"])
    med = {n: sorted(res[n])[2] for n in ("rule", "shallow")}
    print(json.dumps(extra), {n: (round(med[n], 2), round(min(res[n]), 2), res[n + "_plan"]) for n in med},
          "rule/shallow %.4f" % (med["rule"] / med["shallow"]), flush=True)
    rows.append({"shape": shape, **res})
decode.decode_build = orig
json.dump(rows, open(os.environ.get("OUT", "/tmp") + "/ring_ab2.json", "w"), indent=1)
