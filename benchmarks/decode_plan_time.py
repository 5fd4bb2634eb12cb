"""Host time of BatchDecodeWithPagedKVCacheWrapper.plan (issue 12's goal: <= 50 us at batch 64,
<= 150 us at 1024): 32/8 heads, head_dim 128, page 16, lengths uniform in 512..32768; indptr
and last_page_len on the host, the page ids on the host or the device. Prints JSON: 5
interleaved rounds of 200 calls a configuration, the median and p10 of all, each round's median.

    python benchmarks/decode_plan_time.py      # results: benchmarks/results/decode_plan_time_h200.json
"""

import functools
import json
import statistics
import time

import torch

import cutefi


def main() -> None:
    # every configuration is timed in 5 rounds of 200 calls, the rounds interleaved, because this
    # host's Python speed drifts by up to 2x between runs: the median of all 1000 calls is kept,
    # with each round's median to show the spread
    plans = {}
    for batch in (1, 64, 1024):
        g = torch.Generator().manual_seed(batch)
        lengths = torch.randint(512, 32768, (batch,), generator=g)
        pages = (lengths + 15) // 16
        indptr = torch.zeros(batch + 1, dtype=torch.int32)
        indptr[1:] = torch.cumsum(pages, 0)
        indices = torch.randperm(int(indptr[-1]), dtype=torch.int32)
        last = ((lengths - 1) % 16 + 1).to(torch.int32)
        wrapper = cutefi.BatchDecodeWithPagedKVCacheWrapper(torch.empty(256 << 20, dtype=torch.uint8, device="cuda"))
        for where, table in (("host_indices", indices), ("device_indices", indices.cuda())):
            plans[f"{batch}_{where}"] = (functools.partial(wrapper.plan, indptr, table, last, 32, 8, 128, 16,
                                                           q_data_type=torch.bfloat16), int(indptr[-1]))
    samples = {key: [] for key in plans}
    rounds = {key: [] for key in plans}
    for _ in range(5):
        for key, (plan, _) in plans.items():
            for _ in range(20):
                plan()
            torch.cuda.synchronize()
            times = []
            for _ in range(200):
                start = time.perf_counter()
                plan()
                times.append(time.perf_counter() - start)
            samples[key] += times
            rounds[key].append(round(statistics.median(times) * 1e6, 1))
    results = {key: {"median_us": round(statistics.median(samples[key]) * 1e6, 1),
                     "p10_us": round(sorted(samples[key])[len(samples[key]) // 10] * 1e6, 1),
                     "round_medians_us": rounds[key], "pages": plans[key][1]} for key in plans}
    print(json.dumps(results))


if __name__ == "__main__":
    main()
