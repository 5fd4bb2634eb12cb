"""Read-only stream ceilings on the H200 (Triton): the KV bytes of batch 64 x 4096 tokens, 8 kv heads,
d128, bf16 (K and V), read as dense rows, as random 32 KB NHD pages (16 tokens x 8 heads x 128), and
as random 4 KB per-head pages; each program sums what it reads (a few bytes written)."""
import torch
import triton
import triton.language as tl

from cutefi.bench.timing import bench_gpu_time


@triton.jit
def read_blocks(src, order, out, BLOCK_ELEMS: tl.constexpr, CHUNK: tl.constexpr):
    pid = tl.program_id(0)
    block = tl.load(order + pid).to(tl.int64)
    base = src + block * BLOCK_ELEMS
    acc = tl.zeros([CHUNK], dtype=tl.float32)
    for start in range(0, BLOCK_ELEMS, CHUNK):
        acc += tl.load(base + start + tl.arange(0, CHUNK)).to(tl.float32)
    tl.store(out + pid, tl.sum(acc))


total_elems = 64 * 4096 * 8 * 128 * 2  # K and V
src = torch.randn(total_elems, device="cuda", dtype=torch.bfloat16)
nbytes = total_elems * 2
for name, block_elems, chunk, shuffled, warps in [
        ("dense 256 KB blocks", 131072, 4096, False, 8), ("dense 32 KB blocks", 16384, 4096, False, 8),
        ("random 32 KB pages", 16384, 4096, True, 8), ("random 4 KB pages", 2048, 2048, True, 4),
        ("random 4 KB pages w8", 2048, 2048, True, 8), ("random 32 KB pages w4", 16384, 2048, True, 4)]:
    blocks = total_elems // block_elems
    order = torch.randperm(blocks, device="cuda", dtype=torch.int64).to(torch.int32) if shuffled else \
        torch.arange(blocks, device="cuda", dtype=torch.int32)
    out = torch.empty(blocks, device="cuda", dtype=torch.float32)
    fn = lambda: read_blocks[(blocks,)](src, order, out, BLOCK_ELEMS=block_elems, CHUNK=chunk, num_warps=warps)
    fn()
    t = min(bench_gpu_time(fn, iters=30, warmup=5).median_ms for _ in range(3)) * 1e3
    print(f"{name:24s} {t:8.2f} us  {nbytes / t / 1e3:7.1f} GB/s", flush=True)
