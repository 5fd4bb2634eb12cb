"""Batch decode, 64 requests x 4096 tokens, 32/8 heads, d128, bf16, NHD pages: cutefi's paged
kernel and torch SDPA's (cuDNN flash) kernel on the same K/V made dense, for ncu's L2 counters.

    ncu --clock-control none -k regex:"decode|flash|fmha|attn|Attention" \\
        --metrics gpu__time_duration.sum,dram__bytes_read.sum,lts__t_sectors_srcunit_tex_op_read.sum,\\
lts__t_sectors_srcunit_tex_op_read_lookup_hit.sum,lts__t_requests_srcunit_tex_op_read.sum,\\
l1tex__m_xbar2l1tex_read_sectors.sum,lts__throughput.avg.pct_of_peak_sustained_elapsed \\
        python3 benchmarks/profile_decode_l2.py [page_size]

The KV bytes are 33.5 M sectors; a kernel whose L2 read sectors exceed that re-reads lines
(benchmarks/results/decode_l2_ncu_h200.txt).
"""

import sys

import torch
import torch.nn.functional as F

from cutefi.bench.routines.decode import BatchDecode

routine = BatchDecode()
page = int(sys.argv[1]) if len(sys.argv) > 1 else 16
shape = dict(batch=64, kv_len=4096, qo_heads=32, kv_heads=8, head_dim=128, page_size=page, ragged=0, hnd=0,
             kv_fp8=0)
state, q, k, v, mask = routine.make_inputs(shape, torch.bfloat16)
wrapper = state["cutefi"]
k_dense, v_dense = k.contiguous(), v.contiguous()
for _ in range(2):
    wrapper.run(q.squeeze(2), state["cache"])
    F.scaled_dot_product_attention(q, k_dense, v_dense, enable_gqa=True)
torch.cuda.synchronize()
