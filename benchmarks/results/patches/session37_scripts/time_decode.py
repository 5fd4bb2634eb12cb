"""Time cutefi decode on a few shapes (one tree per process; alternate trees for an A/B)."""
import json, sys
import torch
from cutefi.bench.timing import bench_gpu_time
from cutefi.bench.routines.decode import BatchDecode

SHAPES = [dict(kv_fp8=1), dict(kv_fp8=2), dict(), dict(kv_fp8=1, batch=8, kv_len=8192), dict(kv_fp8=1, batch=128, kv_len=1024),
          dict(hnd=1, kv_fp8=1), dict(batch=128, kv_len=1024)]
r = BatchDecode()
out = {}
for extra in SHAPES:
    shape = dict(batch=64, kv_len=4096, qo_heads=32, kv_heads=8, head_dim=128, page_size=16, ragged=0, hnd=0, kv_fp8=0)
    shape.update(extra)
    state, q, k, v, mask = r.make_inputs(shape, torch.bfloat16)
    w = state["cutefi"]
    ts = [bench_gpu_time(lambda: w.run(q.squeeze(2), state["cache"], **state["scales"]), iters=50).median_ms * 1e3
          for _ in range(3)]
    out[json.dumps(extra)] = (round(min(ts), 2), w._plan["pack_shift"])
print(sys.argv[1], json.dumps(out), flush=True)
