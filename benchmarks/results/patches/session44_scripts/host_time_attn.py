"""Host time per eager call (us) of the prefill wrappers' run, append_paged_kv_cache and merge_state:
a loop of 3000 calls on tiny inputs (host-bound), synchronised once; best of 3 rounds."""
import sys
import time

import torch

import cutefi

print("cutefi from", cutefi.__file__, file=sys.stderr)
dev = "cuda"
bf16 = torch.bfloat16
ws = torch.empty(1 << 20, dtype=torch.uint8, device=dev)
q = torch.randn(1, 8, 128, device=dev, dtype=bf16)
k = torch.randn(16, 8, 128, device=dev, dtype=bf16)
qo = torch.tensor([0, 1], dtype=torch.int32)
kv = torch.tensor([0, 16], dtype=torch.int32)
ragged = cutefi.BatchPrefillWithRaggedKVCacheWrapper(ws)
ragged.plan(qo, kv, 8, 8, 128, causal=True, q_data_type=bf16)
out = torch.empty_like(q)
cache = torch.randn(4, 2, 16, 8, 128, device=dev, dtype=bf16)
paged = cutefi.BatchPrefillWithPagedKVCacheWrapper(torch.empty(1 << 20, dtype=torch.uint8, device=dev))
indices = torch.tensor([2], dtype=torch.int32, device=dev)
paged.plan(qo, torch.tensor([0, 1], dtype=torch.int32), indices, torch.tensor([16], dtype=torch.int32), 8, 8, 128, 16,
           causal=True, q_data_type=bf16)
key = torch.randn(1, 8, 128, device=dev, dtype=bf16)
bi = torch.zeros(1, dtype=torch.int32, device=dev)
pos = torch.full((1,), 15, dtype=torch.int32, device=dev)
kvi = torch.tensor([0, 1], dtype=torch.int32, device=dev)
last = torch.tensor([16], dtype=torch.int32, device=dev)
v_a, s_a = torch.randn(4, 8, 128, device=dev, dtype=bf16), torch.randn(4, 8, device=dev)
calls = {
    "ragged.run(out=)": lambda: ragged.run(q, k, k, out=out),
    "paged.run(out=)": lambda: paged.run(q, cache, out=out),
    "append_paged_kv_cache": lambda: cutefi.append_paged_kv_cache(key, key, bi, pos, cache, indices, kvi, last),
    "merge_state_in_place": lambda: cutefi.merge_state_in_place(v_a, s_a, v_a, s_a),
}
for fn in calls.values():
    for _ in range(50):
        fn()
torch.cuda.synchronize()
best = {name: 1e9 for name in calls}
for _ in range(3):
    for name, fn in calls.items():
        torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(3000):
            fn()
        torch.cuda.synchronize()
        best[name] = min(best[name], (time.perf_counter() - start) / 3000 * 1e6)
for name, us in best.items():
    print(f"{name:28s} {us:7.2f} us")
