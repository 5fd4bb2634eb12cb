"""Timing (CUDA events, 20 calls after 3 warm-up) of the prefill paths beyond the Hopper kernel's
ragged bf16 one, against torch SDPA in the same process: FP8 KV (widened for the Hopper kernel,
and on the mma.sync kernel), RoPE (applied first for the Hopper kernel, and inside the
mma.sync kernel), custom masks, MLA (192/128) on the Hopper kernel
and the mma.sync one, and the mma.sync kernel forced on 16-bit KV. bf16, batch 4 x 4096 (MLA:
16 heads), causal. Run: python benchmarks/prefill_features.py"""
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

import cutefi
from cutefi.prefill import ops


def bench(fn, iters=20):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iters):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / iters * 1e-3


def main():
    torch.manual_seed(0)
    b, L, H, d = 4, 4096, 32, 128
    flops = 4 * b * H * L * L * d / 2
    q = torch.randn(b * L, H, d, device="cuda", dtype=torch.bfloat16)
    k, v = torch.randn_like(q), torch.randn_like(q)
    indptr = torch.arange(0, b + 1, dtype=torch.int32) * L
    workspace = torch.empty(1 << 20, dtype=torch.uint8, device="cuda")
    qs, ks, vs = (t.view(b, L, H, d).transpose(1, 2) for t in (q, k, v))
    rows = []

    def ragged(**plan):
        wrapper = cutefi.BatchPrefillWithRaggedKVCacheWrapper(workspace)
        wrapper.plan(indptr, indptr, H, H, d, causal=True, q_data_type=torch.bfloat16, **plan)
        return wrapper

    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
        rows.append(("torch flash (FA2)", bench(lambda: torch.nn.functional.scaled_dot_product_attention(
            qs, ks, vs, is_causal=True)), flops))
    wrapper = ragged()
    rows.append(("cutefi Hopper kernel", bench(lambda: wrapper.run(q, k, v)), flops))
    ops.MMA_SYNC_ONLY = True
    rows.append(("cutefi mma.sync kernel", bench(lambda: wrapper.run(q, k, v)), flops))
    ops.MMA_SYNC_ONLY = False
    k8, v8 = k.to(torch.float8_e4m3fn), v.to(torch.float8_e4m3fn)
    fp8 = ragged(kv_data_type=torch.float8_e4m3fn)
    rows.append(("cutefi FP8 e4m3 KV (widened, Hopper kernel)", bench(lambda: fp8.run(q, k8, v8)), flops))
    ops.FP8_WIDEN_ROWS = 1 << 30  # (the plan decides)
    fp8_mma = ragged(kv_data_type=torch.float8_e4m3fn)
    rows.append(("cutefi FP8 e4m3 KV (mma.sync)", bench(lambda: fp8_mma.run(q, k8, v8)), flops))
    rope = ragged(pos_encoding_mode="ROPE_LLAMA")
    rows.append(("cutefi ROPE_LLAMA (rotated, Hopper kernel)", bench(lambda: rope.run(q, k, v)), flops))
    ops.MMA_SYNC_ONLY = True
    rows.append(("cutefi ROPE_LLAMA (mma.sync)", bench(lambda: rope.run(q, k, v)), flops))
    ops.MMA_SYNC_ONLY = False
    causal = torch.ones(L, L, dtype=torch.bool, device="cuda").tril()
    masked = ragged(custom_mask=causal.reshape(-1).repeat(b))
    rows.append(("cutefi custom mask = causal (mma.sync)", bench(lambda: masked.run(q, k, v)), flops))
    with sdpa_kernel(SDPBackend.EFFICIENT_ATTENTION):
        rows.append(("torch efficient, boolean mask", bench(lambda: torch.nn.functional.scaled_dot_product_attention(
            qs, ks, vs, attn_mask=causal)), flops))
    hm = 16
    qm = torch.randn(b * L, hm, 192, device="cuda", dtype=torch.bfloat16)
    km, vm = torch.randn(b * L, hm, 192, device="cuda", dtype=torch.bfloat16), torch.randn(
        b * L, hm, 128, device="cuda", dtype=torch.bfloat16)
    mla = cutefi.BatchPrefillWithRaggedKVCacheWrapper(workspace)
    mla.plan(indptr, indptr, hm, hm, 192, head_dim_vo=128, causal=True, q_data_type=torch.bfloat16)
    mla_flops = 2 * b * hm * L * L * (192 + 128) / 2
    rows.append(("cutefi MLA 192/128 (16 heads)", bench(lambda: mla.run(qm, km, vm)), mla_flops))
    ops.MMA_SYNC_ONLY = True
    rows.append(("cutefi MLA 192/128 (mma.sync, 16 heads)", bench(lambda: mla.run(qm, km, vm)), mla_flops))
    ops.MMA_SYNC_ONLY = False
    qms, kms, vms = (t.view(b, L, hm, -1).transpose(1, 2) for t in (qm, km, vm))
    for name, backend in (("cudnn", SDPBackend.CUDNN_ATTENTION), ("flash", SDPBackend.FLASH_ATTENTION)):
        try:
            with sdpa_kernel(backend):
                rows.append((f"torch {name} MLA 192/128", bench(lambda: torch.nn.functional.scaled_dot_product_attention(
                    qms, kms, vms, is_causal=True)), mla_flops))
        except Exception as error:  # (a backend that refuses these head dims)
            print(f"torch {name} MLA 192/128: {type(error).__name__}")
    print(torch.cuda.get_device_name(), "torch", torch.__version__)
    for name, seconds, work in rows:
        print(f"{name:45s} {seconds * 1e6:9.1f} us {work / seconds / 1e12:6.0f} TFLOP/s")


if __name__ == "__main__":
    main()
