"""Time the decode kernel's ring options (stages, CTAs an SM) against each other on one GPU:
``decode.decode_build`` is replaced by each option in turn (the plan splits for that many CTAs),
every output is checked against the routine's float32 reference. ``narrow``: the builds with heads
as the MMAs' N (groups up to 8), or the wide ones (``decode.NARROW`` off).

    python benchmarks/tune_decode_rings.py        # results: benchmarks/results/decode_rings_h200.txt

Only options that have builds (``launch.MMA_DECODE_RINGS``) can be timed.
"""

import torch

from cutefi.attention import decode
from cutefi.bench.routines.decode import BatchDecode

CASES = [  # (shape, narrow, options)
    (dict(head_dim=128, qo_heads=32, kv_fp8=1), False, [(5, 2), (4, 2)]),
    (dict(head_dim=128, qo_heads=32, kv_fp8=1), True, [(5, 2), (4, 2), (3, 4)]),
    (dict(head_dim=64, qo_heads=64, kv_fp8=0), True, [(4, 3), (3, 4)]),
]
SHAPES = [(64, 4096), (8, 8192), (128, 1024)]


def median_us(fn, calls: int = 50, rounds: int = 7) -> float:
    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(rounds):
        start.record()
        for _ in range(calls):
            fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) * 1000 / calls)
    return sorted(times)[rounds // 2]


def main() -> None:
    torch.empty(1, device="cuda")  # the driver must be up before decode_build's device queries
    routine = BatchDecode()
    automatic = decode.decode_build
    for extra, narrow, options in CASES:
        decode.NARROW = narrow
        kv_name = 'fp8e4m3' if extra['kv_fp8'] else 'bf16'
        print(f"{extra} narrow={narrow}: the plan's own choice {automatic(0, extra['head_dim'], kv_name)}")
        for batch, kv_len in SHAPES:
            for stages, ctas in options * 2:
                decode.decode_build = lambda device, head_dim, kv, full_batch=False, option=(stages, ctas): option
                shape = dict(batch=batch, kv_len=kv_len, kv_heads=8, page_size=16, ragged=0, hnd=0, **extra)
                inputs = routine.make_inputs(shape, torch.bfloat16)
                state, q = inputs[0], inputs[1].squeeze(2)
                wrapper, cache, scales = state["cutefi"], state["cache"], state.get("scales", {})
                out = wrapper.run(q, cache, **scales)
                ref = routine.reference(inputs, shape)[0]
                err = ((out.float() - ref).norm() / ref.norm()).item()
                us = median_us(lambda: wrapper.run(q, cache, **scales))
                rate = routine.cost(shape, torch.bfloat16).bytes / us / 1e3
                print(f"{extra} narrow={narrow} {batch}x{kv_len} stages={stages} ctas={ctas} items={wrapper._plan['items']}: "
                      f"{us:.1f} us {rate:.0f} GB/s err {err:.1e}", flush=True)
    decode.decode_build = automatic
    decode.NARROW = True


if __name__ == "__main__":
    main()
