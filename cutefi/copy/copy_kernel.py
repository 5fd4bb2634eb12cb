"""CuTe DSL: vectorised device-to-device copy of 16-byte chunks (runtime length).

Each thread moves ``VECTORS_PER_THREAD`` 16-byte chunks, strided by the block size so a
warp's accesses are contiguous; all loads are issued before the first store so several
128-bit loads are in flight per thread. The chunk count is a runtime ``Int32``: one build
serves every size. Contract: ``copy_contract`` in ``launch.py``.
"""

from __future__ import annotations

import cutlass
import cutlass.cute as cute

from cutefi.copy import launch as contract_of
from cutefi.cute import args as kernel_args
from cutefi.cute.args import KernelArgs
from cutefi.cute.pdl import wait_for_inputs

WORDS_PER_VECTOR = 4  # 4 × 32-bit = one 128-bit access


class VectorCopy:
    def __init__(self) -> None:
        self.contract = contract_of.copy_contract()
        self.threads = contract_of.THREADS
        self.vectors_per_thread = contract_of.VECTORS_PER_THREAD

    @cute.jit
    def __call__(self, args: KernelArgs):
        kernel_args.launch(self.kernel, self.contract, args)

    @cute.kernel
    def kernel(self, args: KernelArgs):
        tidx, _, _ = cute.arch.thread_idx()
        bidx, _, _ = cute.arch.block_idx()
        # (word in chunk, chunk): column v is one aligned 16-byte chunk
        layout = cute.make_layout((WORDS_PER_VECTOR, args.num_vectors), stride=(1, WORDS_PER_VECTOR))
        gSrc = cute.make_tensor(args.src, layout)
        gDst = cute.make_tensor(args.dst, layout)
        atom = cute.make_copy_atom(cute.nvgpu.CopyUniversalOp(), cutlass.Int32, num_bits_per_copy=128)
        first = bidx * (self.threads * self.vectors_per_thread) + tidx
        wait_for_inputs()

        # stage 1: issue every load before any store
        tRrV = cute.make_rmem_tensor((WORDS_PER_VECTOR, self.vectors_per_thread), cutlass.Int32)
        for u in cutlass.range_constexpr(self.vectors_per_thread):
            chunk = first + u * self.threads
            if chunk < args.num_vectors:
                cute.copy(atom, gSrc[None, chunk], tRrV[None, u])
        # stage 2: store what was loaded
        for u in cutlass.range_constexpr(self.vectors_per_thread):
            chunk = first + u * self.threads
            if chunk < args.num_vectors:
                cute.copy(atom, tRrV[None, u], gDst[None, chunk])
