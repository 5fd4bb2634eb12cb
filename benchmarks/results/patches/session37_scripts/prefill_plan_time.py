"""Host time of the prefill wrappers' plan() (ragged, paged with host page ids), batch 64 and 512."""
import sys, time
import torch
import cutefi

def timed(fn, n=200):
    for _ in range(20):
        fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(n):
        t0 = time.perf_counter(); fn(); ts.append(time.perf_counter() - t0)
    ts.sort()
    return ts[len(ts) // 2] * 1e6

out = {}
for batch in (64, 512):
    qo = torch.arange(0, (batch + 1) * 128, 128, dtype=torch.int32)
    kv = torch.arange(0, (batch + 1) * 1024, 1024, dtype=torch.int32)
    ragged = cutefi.BatchPrefillWithRaggedKVCacheWrapper(torch.empty(64 << 20, dtype=torch.uint8, device="cuda"))
    out[f"ragged_{batch}"] = timed(lambda: ragged.plan(qo, kv, 32, 8, 128, causal=True, q_data_type=torch.bfloat16))
    pages = kv // 16
    indices = torch.randperm(int(pages[-1])).to(torch.int32)
    last = torch.full((batch,), 16, dtype=torch.int32)
    paged = cutefi.BatchPrefillWithPagedKVCacheWrapper(torch.empty(64 << 20, dtype=torch.uint8, device="cuda"))
    out[f"paged_{batch}"] = timed(lambda: paged.plan(qo, pages, indices, last, 32, 8, 128, 16, causal=True,
                                                     q_data_type=torch.bfloat16))
print(sys.argv[1], {k: round(v, 1) for k, v in out.items()}, flush=True)
