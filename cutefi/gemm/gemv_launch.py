"""Launch contract and specs of the GEMV builds (``gemv_kernel.py``): pure Python, no cutlass
import. On their own module so that the other GEMM builds' keys do not move with them.

A CTA of GEMV_THREADS threads owns GEMV_ROWS weight rows (output columns). A K step is
GEMV_STEP_K elements: thread t takes the 16-byte piece t of it in each of the CTA's rows (a
warp instruction reads 512 contiguous bytes of a row) and of each token, copied with
cp.async into its own slots of a GEMV_STAGES-deep shared-memory ring. Each thread reads back
only what it copied (no barrier), so GEMV_STAGES - 1 steps stay in flight with no registers
held for them, and a token's piece serves all the CTA's rows. ``tokens`` (1, 2 or 4): the
token rows a build multiplies (M <= tokens), as fp32 FMAs; the CTA's threads meet once, at
the end, through shared memory.
"""

from __future__ import annotations

from .. import dtypes
from ..jit.contract import LaunchContract, Param, ceil_div, pointers, scalars
from ..jit.policy import Family
from ..jit.registry import register
from ..jit.spec import KernelSpec

# (launch.DTYPES and launch.DENSE_OUT_DTYPES; not imported: launch.py imports this module)
DTYPES = ("bf16", "fp16")
OUT_DTYPES = (*DTYPES, "fp32")

GEMV_THREADS = 128
GEMV_ROWS = 8
GEMV_STEP_K = GEMV_THREADS * 8
GEMV_STAGES = 4
GEMV_TOKENS = (1, 2, 4)


def gemv_smem_bytes(tokens: int) -> int:
    return GEMV_STAGES * (GEMV_ROWS + tokens) * GEMV_THREADS * 16


def gemv_contract(dtype: str, out_dtype: str, tokens: int) -> LaunchContract:
    if dtype not in DTYPES or out_dtype not in OUT_DTYPES or tokens not in GEMV_TOKENS:
        raise ValueError(f"unsupported GEMV build: {dtype} -> {out_dtype}, {tokens} tokens")
    return LaunchContract(
        params=(*pointers("a", "b", dtype=dtype), Param("c", "ptr", out_dtype, dtypes.bits(out_dtype) // 8),
                Param("bias", "ptr", dtype, 2),
                *scalars("i32", "m", "n", "k", "has_bias"), *scalars("i64", "lda", "ldb", "ldc")),
        block=(GEMV_THREADS, 1, 1),
        grid=lambda p: (ceil_div(p["n"], GEMV_ROWS), 1, 1),
        sample={"m": 1, "n": 4096, "k": 4096, "has_bias": 0, "lda": 4096, "ldb": 4096, "ldc": 4096},
        smem_bytes=gemv_smem_bytes(tokens),
        min_ctas_per_sm=max(1, 227 * 1024 // gemv_smem_bytes(tokens)),
        entry=f"cutefi_gemm_gemv_{dtype}_{out_dtype}_t{tokens}",
        pdl=True,
    )


GEMV_SPECS = {
    (dtype, out_dtype, tokens): KernelSpec.make(
        "gemm.gemv", "cute", "cutefi.gemm.gemv_kernel:GemmGemv", "cutefi.gemm.gemv_launch:gemv_contract",
        Family.MMA_SYNC, dtype=dtype, out_dtype=out_dtype, tokens=tokens)
    for dtype in DTYPES for out_dtype in OUT_DTYPES for tokens in GEMV_TOKENS
}
register(*GEMV_SPECS.values())
