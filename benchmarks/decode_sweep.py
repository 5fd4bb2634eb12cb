"""Decode plans side by side on one GPU (CUPTI, best of 2 rounds; each output checked against the
routine's float32 reference):

    python benchmarks/decode_sweep.py '[[SHAPE, [OPTION, ...]], ...]'     # TAG=name OUT=dir

SHAPE: ``BatchDecode`` shape flags over the default (64 x 4096, 32/8 heads, d128, page 16, NHD,
bf16 KV), e.g. ``{"batch": 8, "kv_len": 8192, "kv_fp8": 1}``. OPTION: ``[0]`` the wide builds
(``decode.NARROW`` off), ``[1]`` the narrow ones, ``[2]`` narrow with the old split rule (any
chunk that lowers the work per slot); ``[narrow, stages, ctas]`` forces that ring. Writes
``$OUT/sweep_$TAG.json``.
"""

import json
import os
import sys

import torch

from cutefi.attention import decode, decode_plan
from cutefi.bench.routines.decode import BatchDecode
from cutefi.bench.timing import bench_gpu_time


def main() -> None:
    routine = BatchDecode()
    automatic, gain = decode.decode_build, decode_plan.SPLIT_GAIN
    rows = []
    for extra, options in json.loads(sys.argv[1]):
        shape = dict(batch=64, kv_len=4096, qo_heads=32, kv_heads=8, head_dim=128, page_size=16, ragged=0, hnd=0,
                     kv_fp8=0)
        shape.update(extra)
        inputs = routine.make_inputs(shape, torch.bfloat16)
        state, q = inputs[0], inputs[1].squeeze(2)
        ref = routine.reference(inputs, shape)[0]
        cost = routine.cost(shape, torch.bfloat16)
        wrapper, cache, scales = state["cutefi"], state["cache"], state.get("scales", {})
        times = {}
        for _ in range(2):
            for narrow, *ring in options:
                decode.NARROW = bool(narrow)
                decode_plan.SPLIT_GAIN = float("inf") if narrow == 2 else gain
                decode.decode_build = (lambda *a, option=tuple(ring), **k: option) if ring else automatic
                wrapper.plan(*state["plan"][0], **state["plan"][1])
                out = wrapper.run(q, cache, **scales)
                err = ((out.float() - ref).norm() / ref.norm()).item()
                assert err < 2e-2, err
                us = bench_gpu_time(lambda: wrapper.run(q, cache, **scales), iters=50).median_ms * 1e3
                key = f"{'wn'[bool(narrow)]}{ring[0]}/{ring[1]}" if ring else ["wide", "narrow", "oldsplit"][narrow]
                times[key] = min(times.get(key, float("inf")), us)
        decode.decode_build, decode.NARROW, decode_plan.SPLIT_GAIN = automatic, True, gain
        print(json.dumps(extra), "  ".join(f"{k} {v:.1f}us {cost.bytes / v / 1e3:.0f}GB/s" for k, v in times.items()),
              flush=True)
        rows.append(dict(shape=shape, us=times, bytes=cost.bytes, gpu=torch.cuda.get_device_name()))
    path = os.path.join(os.environ.get("OUT", "."), f"sweep_{os.environ.get('TAG', 'decode')}.json")
    with open(path, "w") as f:
        json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
