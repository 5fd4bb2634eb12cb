"""CuTe DSL: vectorised device-to-device copy of 16-byte chunks (runtime length).

Each thread moves ``VECTORS_PER_THREAD`` 16-byte chunks, strided by the block size so a
warp's accesses are contiguous; all loads are issued before the first store so several
128-bit loads are in flight per thread. The chunk count is a runtime ``Int32``: one build
serves every size. Launch contract: ``cutefi/copy/copy.py``.
"""

from __future__ import annotations

import cutlass
import cutlass.cute as cute
from cutlass import Int32
from cutlass.cute.runtime import make_ptr

from cutefi.copy.copy import THREADS, VECTORS_PER_THREAD, copy_grid

WORDS_PER_VECTOR = 4  # 4 × 32-bit = one 128-bit access


class VectorCopy:
    def __init__(self) -> None:
        self.threads = THREADS
        self.vectors_per_thread = VECTORS_PER_THREAD

    @cute.jit
    def __call__(self, src: cute.Pointer, dst: cute.Pointer, num_vectors: Int32):
        grid_x, _, _ = copy_grid(num_vectors)
        self.kernel(src, dst, num_vectors).launch(grid=[grid_x, 1, 1], block=[self.threads, 1, 1])

    @cute.kernel
    def kernel(self, src: cute.Pointer, dst: cute.Pointer, num_vectors: Int32):
        tidx, _, _ = cute.arch.thread_idx()
        bidx, _, _ = cute.arch.block_idx()
        # (word in chunk, chunk): column v is one aligned 16-byte chunk
        layout = cute.make_layout((WORDS_PER_VECTOR, num_vectors), stride=(1, WORDS_PER_VECTOR))
        gSrc = cute.make_tensor(src, layout)
        gDst = cute.make_tensor(dst, layout)
        atom = cute.make_copy_atom(cute.nvgpu.CopyUniversalOp(), cutlass.Int32, num_bits_per_copy=128)
        first = bidx * (self.threads * self.vectors_per_thread) + tidx

        # stage 1: issue every load before any store
        tRrV = cute.make_rmem_tensor((WORDS_PER_VECTOR, self.vectors_per_thread), cutlass.Int32)
        for u in cutlass.range_constexpr(self.vectors_per_thread):
            chunk = first + u * self.threads
            if chunk < num_vectors:
                cute.copy(atom, gSrc[None, chunk], tRrV[None, u])
        # stage 2: store what was loaded
        for u in cutlass.range_constexpr(self.vectors_per_thread):
            chunk = first + u * self.threads
            if chunk < num_vectors:
                cute.copy(atom, tRrV[None, u], gDst[None, chunk])


def dsl_entry() -> tuple[object, tuple]:
    placeholder = lambda: make_ptr(cutlass.Int32, 16, cute.AddressSpace.gmem, assumed_align=16)  # noqa: E731
    return VectorCopy(), (placeholder(), placeholder(), Int32(1))
