"""RMSNorm of contiguous rows that start off 16-byte boundaries, in CuTe DSL ("packed rows").

    y[m, :] = x[m, :] * rsqrt(mean(x[m, :]^2) + eps) * w'     w' = w or (1 + w)
    out = y, or for the FP8 quant builds out = fp8(clamp(y / scale, -max, max))

Eight consecutive rows of a contiguous ``[rows, n]`` tensor span ``8 n`` elements, a multiple
of 8, so a block of them starts and ends on a 16-byte boundary whatever ``n`` is. The kernel
reads and writes such a block as one flat vector of ``n`` aligned 8-element chunks: chunk
``c`` (elements ``8c .. 8c + 7``) belongs to row ``r = floor(8c / n)``, and where a row
boundary falls inside it, its first ``b = (r + 1) n - 8c`` elements to row ``r`` and the rest
to row ``r + 1``. Every global access is a full 128-bit one; no element is masked except in
the last, partial block of the tensor. Each block, in three stages:

  1. load: the thread's chunks into registers; each chunk's sum of squares into shared memory
     (a boundary chunk's part for row ``r + 1`` into that row's slot);
  2. rows: a warp a row sums its chunks' partials and writes the row's factor rsqrt(...);
  3. store: each element times its row's factor and its weight, 128-bit stores.

The weight, seen from chunk ``c``, starts at column ``c0 = 8c - r n``, anywhere in its
aligned chunk (and wraps to column 0 at a row boundary). The CTA stages ``COPIES`` copies of
it once (copy ``s`` holds ``w[(m + s) mod n]`` at ``m``), so a chunk's 8 weights are one
aligned 128-bit shared-memory read from copy ``c0 mod 8``. CTAs are persistent: the copies
are staged once for ``row_iters`` blocks.

ABI and geometry: ``packed.py`` (the row-norm contract's parameters).
"""

from __future__ import annotations

import cutlass
import cutlass.cute as cute
from cutlass import Float32, Int32, Int64, const_expr

from cutefi.cute import args as kernel_args
from cutefi.cute.args import KernelArgs
from cutefi.cute.convert import store_fp8
from cutefi.cute.dtypes import cute_dtype
from cutefi.cute.pdl import wait_for_inputs
from cutefi.cute.reduce import warp_reduce_sum
from cutefi.norm import launch, packed

_ROWS = packed.ROWS_PER_BLOCK


class PackedRowNormKernel:
    def __init__(self, dtype_name: str, n_class: int, gemma: bool = False, out_dtype: str | None = None):
        self.contract = packed.contract(dtype_name, n_class, gemma, out_dtype)
        self.shape = packed.geometry(dtype_name, n_class)
        self.dtype = cute_dtype(dtype_name)
        self.gemma = gemma
        self.quant = out_dtype is not None
        self.out_dtype = cute_dtype(out_dtype) if self.quant else self.dtype
        self.quant_max = launch.QUANT_MAX[out_dtype] if self.quant else 0.0
        self.threads = self.shape.block_threads
        self.copy_elems = self.shape.copy_elems
        self.warps = self.threads // 32

    @cute.jit
    def __call__(self, args: KernelArgs):
        kernel_args.launch(self.kernel, self.contract, args)

    @cute.kernel
    def kernel(self, args: KernelArgs):
        bidx = cute.arch.block_idx()[0]
        grid_x = cute.arch.grid_dim()[0]
        smem = cute.arch.get_dyn_smem(cutlass.Int8, alignment=16)
        copies = cute.recast_ptr(smem, dtype=self.dtype)
        partials = cute.make_tensor(cute.recast_ptr(smem + self.shape.partials_offset, dtype=Float32),
                                    cute.make_layout(self.shape.n_class))
        words = cute.make_tensor(cute.recast_ptr(smem + self.shape.boundary_offset, dtype=Float32),
                                 cute.make_layout(2 * _ROWS + 1))
        n = args.N
        inv_n = cute.arch.rcp_approx(Float32(n))
        inv_scale = Float32(1.0)
        wait_for_inputs()  # with PDL the previous kernel may still be writing x or the weight
        if const_expr(self.quant):
            # FlashInfer's quantisation: times 1/scale (scale_value 0: the scale is a tensor)
            scale = args.scale_value
            if scale == Float32(0.0):
                scale = cute.make_tensor(args.scale, cute.make_layout(1))[0]
            inv_scale = Float32(1.0) / scale
        self._stage_weight(args.weight, copies, n)
        for it in cutlass.range(args.row_iters, unroll=1):
            first_row = (bidx + it * grid_x) * _ROWS
            if first_row < args.M:
                # salt: 0 (args.shift is 0 for this build), but unknown to the compiler and
                # different every block, so a chunk's row, column and weight offset are
                # recomputed a block (a few integer ops) instead of hoisted out of the loop
                # (30 registers held for the whole loop, which spilled at 64 a thread)
                salt = args.shift * it
                self._block(args, first_row, copies, partials, words, inv_n, inv_scale, salt)

    # ------------------------------------------------------------------ #
    # the weight's shifted copies (once a CTA)
    # ------------------------------------------------------------------ #
    @cute.jit
    def _stage_weight(self, weight: cute.Pointer, copies: cute.Pointer, n: Int32):
        """Copy ``s`` at ``s * copy_elems``: element ``m`` is ``w[(m + s) mod n]`` (entries no
        chunk reads hold w[n - 1]). Loads in batches of 16, then their stores: a few memory
        latencies, not one an element."""
        tidx = cute.arch.thread_idx()[0]
        src = cute.make_tensor(weight, cute.make_layout(self.shape.n_class))
        dst = cute.make_tensor(copies, cute.make_layout(packed.COPIES * self.copy_elems))
        total = packed.COPIES * self.copy_elems
        rounds = -(-total // self.threads)
        for first in cutlass.range_constexpr(0, rounds, 16):
            batch = range(first, min(first + 16, rounds))
            loaded = []
            for r in batch:
                q = tidx + r * self.threads
                s = q // self.copy_elems
                column = q - s * self.copy_elems + s
                column = cutlass.select_(column >= n, column - n, column)
                loaded.append(src[cutlass.min(column, n - 1)])
            for r, value in zip(batch, loaded):
                q = tidx + r * self.threads
                if q < total:
                    dst[q] = value
        cute.arch.barrier()

    # ------------------------------------------------------------------ #
    # one block of rows
    # ------------------------------------------------------------------ #
    @cute.jit
    def _chunk_row(self, chunk: Int32, n: Int32, inv_n: Float32):
        """(row, elements of the chunk in that row): row = floor(8 chunk / n), exact for
        8 chunk < 8 n <= 2^15 (the half keeps a multiple of n off the rounding edge)."""
        row = Int32((Float32(8 * chunk) + Float32(0.5)) * inv_n)
        return row, (row + 1) * n - 8 * chunk

    @cute.jit
    def _block(self, args: KernelArgs, first_row: Int32, copies: cute.Pointer, partials: cute.Tensor,
               words: cute.Tensor, inv_n: Float32, inv_scale: Float32, salt: Int32):
        tidx = cute.arch.thread_idx()[0]
        n = args.N
        K = packed.CHUNKS
        T = self.threads
        limit = cutlass.min(args.M - first_row, _ROWS) * n  # elements of the block in the tensor
        base = cute.assume(Int64(first_row) * n + Int64(8 * tidx), divby=8)
        chunk_layout = cute.make_layout(((8, 1), 1, K), stride=((1, 0), 0, 8 * T))
        gX = cute.make_tensor(args.x + base, chunk_layout)
        rX = cute.make_rmem_tensor(cute.make_layout(((8, 1), 1, K)), self.dtype)
        rX.fill(0.0)
        full = cute.make_rmem_tensor(cute.make_layout((1, 1, K), stride=(0, 0, 1)), cutlass.Boolean)
        for k in cutlass.range_constexpr(K):
            full[0, 0, k] = 8 * (tidx + k * T) + 8 <= limit

        # ---- stage 1: load; chunk partials ----------------------------------
        load = cute.make_copy_atom(cute.nvgpu.CopyUniversalOp(), self.dtype, num_bits_per_copy=128)
        cute.copy(load, gX, rX, pred=full)
        for k in cutlass.range_constexpr(K):
            start = 8 * (tidx + k * T)
            if start < limit and start + 8 > limit:  # the tensor ends inside this chunk
                for i in cutlass.range_constexpr(8):
                    if start + i < limit:
                        rX[(i, 0), 0, k] = gX[(i, 0), 0, k]
        for k in cutlass.range_constexpr(K):
            chunk = tidx + k * T + salt
            if chunk < n:
                row, in_row = self._chunk_row(chunk, n, inv_n)
                total = Float32(0.0)
                for i in cutlass.range_constexpr(8):
                    v = Float32(rX[(i, 0), 0, k])
                    total = total + v * v
                mine = total
                if in_row < 8:  # a row boundary inside the chunk: split its sum
                    mine = Float32(0.0)
                    for i in cutlass.range_constexpr(8):
                        v = Float32(rX[(i, 0), 0, k])
                        mine = mine + cutlass.select_(i < in_row, v * v, Float32(0.0))
                    words[row + 1] = total - mine
                partials[chunk] = mine
        cute.arch.barrier()

        # ---- stage 2: each row's factor ----------------------------------------
        lane = tidx % 32
        warp = tidx // 32
        for row in cutlass.range_constexpr(_ROWS):
            if row % self.warps == warp:
                first = (row * n + 7) // 8  # the first chunk starting in the row
                end = ((row + 1) * n + 7) // 8
                acc = Float32(0.0)
                for c in cutlass.range(first + lane, end, 32, unroll=4):
                    acc = acc + partials[c]
                acc = warp_reduce_sum(acc)
                if const_expr(row > 0):
                    if (row * n) % 8 != 0:  # the chunk before the row crosses into it
                        acc = acc + words[row]
                if lane == 0:
                    words[_ROWS + row] = cute.math.rsqrt(acc * inv_n + args.eps, fastmath=True) * inv_scale
        cute.arch.barrier()

        # ---- stage 3: scale, weight, store -------------------------------------
        # x again from its packed 16-bit registers, through an XOR with args.shift (0 for
        # this build, unknown to the compiler): otherwise stage 1's fp32 conversions are
        # reused, keeping 64 fp32 registers of x live across the barriers instead of 32
        x_words = cute.recast_tensor(rX, cutlass.Uint32)
        for j in cutlass.range_constexpr(cute.size(x_words)):
            x_words[j] = x_words[j] ^ cutlass.Uint32(args.shift)
        salt = salt + args.shift  # stage 1's rows are not kept either
        w_load = cute.make_copy_atom(cute.nvgpu.CopyUniversalOp(), self.dtype, num_bits_per_copy=128)
        store = cute.make_copy_atom(cute.nvgpu.CopyUniversalOp(), self.out_dtype,
                                    num_bits_per_copy=8 * self.out_dtype.width)
        for k in cutlass.range_constexpr(K):
            chunk = tidx + k * T + salt
            if chunk < n:
                row, in_row = self._chunk_row(chunk, n, inv_n)
                column = 8 * chunk - row * n  # >= 0: bit masks, not a signed % 8
                shift = column & 7
                offset = cute.assume(shift * self.copy_elems + (column & ~7), divby=8)
                rW = cute.make_rmem_tensor(cute.make_layout((8, 1)), self.dtype)
                cute.copy(w_load, cute.make_tensor(copies + offset, cute.make_layout((8, 1))), rW)
                here = words[_ROWS + row]
                after = words[_ROWS + row + 1]
                rY = cute.make_rmem_tensor(cute.make_layout(8), Float32)
                for i in cutlass.range_constexpr(8):
                    w = Float32(rW[i, 0])
                    if const_expr(self.gemma):
                        w = w + Float32(1.0)
                    rY[i] = Float32(rX[(i, 0), 0, k]) * w
                if in_row >= 8:  # the chunk lies in one row (all but one a row)
                    for i in cutlass.range_constexpr(8):
                        rY[i] = rY[i] * here
                else:
                    for i in cutlass.range_constexpr(8):
                        rY[i] = rY[i] * cutlass.select_(i < in_row, here, after)
                rO = cute.make_rmem_tensor(cute.make_layout((8, 1)), self.out_dtype)
                if const_expr(self.quant):
                    store_fp8(rY.load(), rO, self.quant_max)
                else:
                    rO.store(rY.load().to(self.out_dtype).reshape((8, 1)))
                # stored at once: the chunk's registers free for the next one
                start = 8 * chunk
                gO_k = cute.make_tensor(args.out + cute.assume(base + 8 * T * k, divby=8), cute.make_layout((8, 1)))
                if start + 8 <= limit:
                    cute.copy(store, rO, gO_k)
                elif start < limit:  # the tensor ends inside this chunk
                    for i in cutlass.range_constexpr(8):
                        if start + i < limit:
                            gO_k[i, 0] = rO[i, 0]
        # no barrier before the next block: its stage 1 writes partials and words 1-7, last
        # read in this block's stage 2 (behind stage 2's barrier); its stage 2 writes the
        # factors this stage reads, behind its stage 1's barrier
