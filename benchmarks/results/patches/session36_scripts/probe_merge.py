"""How much of a split decode call is the merge kernel: full call vs the decode kernel alone
(merge launch skipped: timing only), SDPA in the same process; kernel durations from a trace."""
import json, os, statistics, sys
import torch, cutefi
from cutefi.bench.timing import bench_gpu_time
from cutefi.attention import decode_ops
from cutefi.bench.routines.decode import BatchDecode, SingleDecode, _sdpa

OUT = os.environ.get("OUT", "/tmp")
orig_call = decode_ops.DecodeLaunch.__call__
def no_merge(self, *a):
    m = getattr(self, "merge", None)
    self.merge = None
    try:
        orig_call(self, *a)
    finally:
        self.merge = m

def t(fn):
    return bench_gpu_time(fn, (), iters=100, warmup=10).median_ms * 1e3

rows = []
cases = [("single", dict(kv_len=n, qo_heads=32, kv_heads=8, head_dim=128)) for n in (2048, 8192, 32768, 131072)]
cases += [("batch", dict(batch=b, kv_len=n, qo_heads=32, kv_heads=8, head_dim=128, page_size=16, ragged=0, hnd=0, kv_fp8=f))
          for b, n, f in ((1, 131072, 0), (8, 8192, 0), (16, 16384, 0), (64, 4096, 0), (8, 8192, 1), (1, 32768, 0))]
for kind, shape in cases:
    r = SingleDecode() if kind == "single" else BatchDecode()
    state, q, k, v, mask = r.make_inputs(shape, torch.bfloat16)
    be = r.backends()
    full = lambda: be["cutefi"](state, q, k, v, mask)
    sdpa = lambda: be["torch"](state, q, k, v, mask)
    ref = r.reference((state, q, k, v, mask), shape)[0]
    got = full().float()
    err = ((got.reshape(ref.shape) - ref).norm() / ref.norm()).item()
    res = {"full": [], "decode_only": [], "sdpa": []}
    for _ in range(3):
        res["full"].append(t(full))
        decode_ops.DecodeLaunch.__call__ = no_merge
        try:
            res["decode_only"].append(t(full))
        finally:
            decode_ops.DecodeLaunch.__call__ = orig_call
        res["sdpa"].append(t(sdpa))
    med = {key: round(statistics.median(v), 3) for key, v in res.items()}
    row = dict(kind=kind, shape=shape, err=err, **med)
    print(json.dumps(row), flush=True)
    rows.append(row)
json.dump(rows, open(os.path.join(OUT, "probe_merge.json"), "w"), indent=1)
