"""One to a few tokens times a K-major weight (an nn.Linear weight's ``w.t()``), streamed from
DRAM through a cp.async ring, in CuTe DSL, for every target of the mma.sync family. ABI and
launch: ``launch.py`` (``gemv_contract``); when it is chosen: ``plan.py``.

With a token or two the work is reading the weight once at the memory's rate, which takes
many bytes in flight per SM. Here they wait in shared memory, not registers: thread t copies
the 16-byte piece t of each K step of the CTA's ``launch.GEMV_ROWS`` weight rows and of the
tokens with cp.async into its own slots of a ring ``launch.GEMV_STAGES`` steps deep, and
reads back only those, so the ring needs no barrier and ``GEMV_STAGES - 1`` steps stay in
flight while one is multiplied. Stages of a CTA:
  1. the ring's first steps are issued; then per K step: wait for the step, issue the one
     ``GEMV_STAGES - 1`` ahead into the slots just read, and add each row's piece times each
     token's piece into fp32 sums (a piece past K counts zero);
  2. the sums of a row and token meet: shuffles within each warp, then the warps' through
     shared memory; one thread a (row, token) adds the bias and stores those below N and M.
"""

from __future__ import annotations

import cutlass
import cutlass.cute as cute
from cutlass import Float32, Int64

from cutefi.cute import args as kernel_args
from cutefi.cute.args import KernelArgs
from cutefi.cute.cp_async import cp_async_16
from cutefi.cute.dtypes import cute_dtype
from cutefi.cute.pdl import wait_for_inputs
from cutefi.gemm import gemv_launch as launch

VEC = 8  # 16-bit elements of a 16-byte piece
STAGES = launch.GEMV_STAGES
ROWS = launch.GEMV_ROWS
THREADS = launch.GEMV_THREADS
WARPS = THREADS // 32


class GemmGemv:
    # ------------------------------------------------------------------ #
    # 1. specialisation
    # ------------------------------------------------------------------ #
    def __init__(self, dtype: str, out_dtype: str, tokens: int) -> None:
        self.contract = launch.gemv_contract(dtype, out_dtype, tokens)
        self.dtype = cute_dtype(dtype)
        self.out_dtype = cute_dtype(out_dtype)
        self.tokens = tokens
        self.pieces = ROWS + tokens  # 16-byte pieces a thread copies a step: the rows', then the tokens'

    @cute.jit
    def __call__(self, args: KernelArgs):
        kernel_args.launch(self.kernel, self.contract, args)

    # ------------------------------------------------------------------ #
    # 2. the kernel
    # ------------------------------------------------------------------ #
    @cute.kernel
    def kernel(self, args: KernelArgs):
        tidx, _, _ = cute.arch.thread_idx()
        block, _, _ = cute.arch.block_idx()
        ldb = cute.assume(args.ldb, divby=VEC)
        lda = cute.assume(args.lda, divby=VEC)
        k = cute.assume(args.k, divby=VEC)
        # rows past N and tokens past M are clamped in: their sums are never stored
        sources = [args.b + cute.assume(Int64(cutlass.min(block * ROWS + r, args.n - 1)) * ldb, divby=VEC)
                   for r in range(ROWS)]
        sources += [args.a + cute.assume(Int64(cutlass.min(t, args.m - 1)) * lda, divby=VEC)
                    for t in range(self.tokens)]
        # (8 elements, thread, piece, stage): a warp's LDS.128 of one piece reads 512 contiguous bytes
        smem = cute.arch.get_dyn_smem(self.dtype, alignment=128)
        ring = cute.make_tensor(smem, cute.make_layout((VEC, THREADS, self.pieces, STAGES),
                                                       stride=(1, VEC, VEC * THREADS, VEC * THREADS * self.pieces)))
        sums = cute.make_rmem_tensor(cute.make_layout((ROWS, self.tokens)), Float32)
        sums.fill(0.0)

        wait_for_inputs()
        steps = (k + launch.GEMV_STEP_K - 1) // launch.GEMV_STEP_K
        for s in cutlass.range_constexpr(STAGES - 1):
            if s < steps:
                self._issue(ring, sources, s, tidx, k)
            cute.arch.cp_async_commit_group()
        for step in cutlass.range(steps, unroll=1):
            cute.arch.cp_async_wait_group(STAGES - 2)  # (this thread's pieces of `step` have landed)
            ahead = step + STAGES - 1
            if ahead < steps:
                self._issue(ring, sources, ahead, tidx, k)
            cute.arch.cp_async_commit_group()
            if step * launch.GEMV_STEP_K + tidx * VEC < k:
                slot = step % STAGES
                xs = [ring[None, tidx, ROWS + t, slot].load().to(Float32) for t in range(self.tokens)]
                for r in cutlass.range_constexpr(ROWS):
                    w = ring[None, tidx, r, slot].load().to(Float32)
                    for t in cutlass.range_constexpr(self.tokens):
                        total = sums[r, t]
                        for e in cutlass.range_constexpr(VEC):
                            total = total + w[e] * xs[t][e]
                        sums[r, t] = total
        cute.arch.cp_async_wait_group(0)
        self._store(args, sums, block, tidx)

    # ------------------------------------------------------------------ #
    # 3. stages
    # ------------------------------------------------------------------ #
    @cute.jit
    def _issue(self, ring, sources, step, tidx, k):
        """This thread's pieces of K step ``step`` into its ring slots (past K it copies the
        rows' first piece instead: never multiplied)."""
        column = step * launch.GEMV_STEP_K + tidx * VEC
        column = cutlass.select_(column < k, column, 0)
        for p in cutlass.range_constexpr(self.pieces):
            cp_async_16(ring[None, tidx, p, step % STAGES].iterator, sources[p] + cute.assume(column, divby=VEC), 0)

    @cute.jit
    def _store(self, args, sums, block, tidx):
        """Each (row, token) sum over the CTA's threads: warp shuffles, then the warps' sums
        through shared memory (the ring is idle now); thread (row, token) adds the bias and
        stores."""
        lane = tidx % 32
        warp = tidx // 32
        cute.arch.barrier()  # (every thread is done reading the ring)
        smem = cute.arch.get_dyn_smem(Float32, alignment=128)
        partial = cute.make_tensor(smem, cute.make_layout((ROWS * self.tokens, WARPS)))
        for r in cutlass.range_constexpr(ROWS):
            for t in cutlass.range_constexpr(self.tokens):
                total = sums[r, t]
                for offset in (16, 8, 4, 2, 1):
                    total = total + cute.arch.shuffle_sync_bfly(total, offset=offset)
                if lane == 0:
                    partial[r * self.tokens + t, warp] = total
        cute.arch.barrier()
        if tidx < ROWS * self.tokens:
            r = tidx // self.tokens
            t = tidx % self.tokens
            row = block * ROWS + r
            total = partial[tidx, 0]
            for w in cutlass.range_constexpr(1, WARPS):
                total = total + partial[tidx, w]
            if row < args.n and t < args.m:
                if args.has_bias != 0:
                    total = total + Float32(cute.make_tensor(args.bias, cute.make_layout(args.n))[row])
                out = cute.make_tensor(args.c + Int64(t) * args.ldc + row, cute.make_layout(1))
                out[0] = total.to(self.out_dtype)
