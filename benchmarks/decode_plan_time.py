"""Host time of BatchDecodeWithPagedKVCacheWrapper.plan (issue 12's goal: <= 50 us at batch 64,
<= 150 us at 1024): 32/8 heads, head_dim 128, page 16, lengths uniform in 512..32768; indptr
and last_page_len on the host, the page ids on the host or the device. Prints JSON.

    python benchmarks/decode_plan_time.py      # results: benchmarks/results/decode_plan_time_h200.json
"""

import json
import time

import torch

import cutefi


def main() -> None:
    results = {}
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
            def plan():
                wrapper.plan(indptr, table, last, 32, 8, 128, 16, q_data_type=torch.bfloat16)
            for _ in range(20):
                plan()
            torch.cuda.synchronize()
            times = []
            for _ in range(200):
                start = time.perf_counter()
                plan()
                times.append(time.perf_counter() - start)
            times.sort()
            results[f"{batch}_{where}"] = {"median_us": round(times[100] * 1e6, 1), "p10_us": round(times[20] * 1e6, 1),
                                           "pages": int(indptr[-1])}
    print(json.dumps(results))


if __name__ == "__main__":
    main()
