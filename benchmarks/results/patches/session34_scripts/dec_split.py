"""64 x 4096 decode (32/8 heads, d128, page 16, NHD) with forced split sizes, bf16 and FP8 KV; CUPTI."""
import json, os, sys
import torch
from cutefi.attention import decode
from cutefi.bench.routines.decode import BatchDecode
from cutefi.bench.timing import bench_gpu_time

routine = BatchDecode()
rows = []
for batch, kv_len in ((64, 4096), (64, 8192), (128, 2048)):
    for fp8 in (0, 1):
        shape = dict(batch=batch, kv_len=kv_len, qo_heads=32, kv_heads=8, head_dim=128, page_size=16, ragged=0, hnd=0,
                     kv_fp8=fp8)
        inputs = routine.make_inputs(shape, torch.bfloat16)
        state, q = inputs[0], inputs[1].squeeze(2)
        ref = routine.reference(inputs, shape)[0]
        cost = routine.cost(shape, torch.bfloat16)
        wrapper, cache, scales = state["cutefi"], state["cache"], state.get("scales", {})
        args, kwargs = state["plan"]
        for rnd in range(2):
            for split in (None, 128, 64, 32, 16):
                if split is not None and split * 16 >= kv_len:
                    continue
                wrapper.plan(*args, **{**kwargs, "fixed_split_size": split})
                out = wrapper.run(q, cache, **scales)
                err = ((out.float() - ref).norm() / ref.norm()).item()
                us = bench_gpu_time(lambda: wrapper.run(q, cache, **scales), iters=50).median_ms * 1e3
                rows.append(dict(batch=batch, kv_len=kv_len, fp8=fp8, split=split, round=rnd, us=us,
                                 gbps=cost.bytes / us / 1e3, err=err))
                print(json.dumps(rows[-1]), flush=True)
json.dump(rows, open(os.path.join(os.environ.get("OUT", "."), "dec_split.json"), "w"), indent=1)
