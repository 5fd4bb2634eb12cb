"""LayerNorm with fp32 against 16-bit gamma/beta (the 16-bit call runs on fp32 copies): GPU time a
call from CUDA-graph replays of 50 calls, and eager host+GPU wall time a call. Writes JSON to argv[1]."""
import json
import sys
import time

import torch

import cutefi

rows_list, hidden = [1, 128, 4096, 16384], 4096
results = []
for rows in rows_list:
    x = torch.randn(rows, hidden, device="cuda").to(torch.bfloat16)
    for name, dtype in (("fp32", torch.float32), ("bf16", torch.bfloat16)):
        gamma, beta = torch.randn(hidden, device="cuda").to(dtype), torch.randn(hidden, device="cuda").to(dtype)
        for _ in range(3):
            cutefi.layernorm(x, gamma, beta)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for _ in range(50):
                cutefi.layernorm(x, gamma, beta)
        graph.replay()
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        graph_us = []
        for _ in range(5):
            start.record()
            graph.replay()
            end.record()
            torch.cuda.synchronize()
            graph_us.append(start.elapsed_time(end) * 1000 / 50)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(200):
            cutefi.layernorm(x, gamma, beta)
        torch.cuda.synchronize()
        eager_us = (time.perf_counter() - t0) * 1e6 / 200
        results.append(dict(rows=rows, hidden=hidden, params=name, graph_us=min(graph_us), eager_us=eager_us))
        print(results[-1])
json.dump(dict(gpu=torch.cuda.get_device_name(), torch=torch.__version__, results=results), open(sys.argv[1], "w"),
          indent=1)
