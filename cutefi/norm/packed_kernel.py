"""RMSNorm of contiguous rows that start off 16-byte boundaries, in CuTe DSL ("packed rows").

    y[m, :] = x[m, :] * rsqrt(mean(x[m, :]^2) + eps) * w'     w' = w or (1 + w)
    out = y, or for the FP8 quant builds out = fp8(clamp(y / scale, -max, max))

Eight consecutive rows of a contiguous ``[rows, n]`` tensor span ``8 n`` elements, a multiple
of 8, so a block of them starts and ends on a 16-byte boundary whatever ``n`` is. The kernel
reads and writes such a block as one flat vector of ``n`` aligned 8-element chunks: chunk
``c`` (elements ``8c .. 8c + 7``) belongs to row ``r = floor(8c / n)``, and where a row
boundary falls inside it, its first ``b = (r + 1) n - 8c`` elements to row ``r`` and the rest
to row ``r + 1``. Every global access is a full 128-bit one; no element is masked except in
the last, partial block of the tensor. Each block:

  1. sums: each chunk's sum of squares into shared memory (a boundary chunk's part for row
     ``r + 1`` into that row's slot);
  2. rows: a warp a row adds its chunks' partials: the row's factor rsqrt(...);
  3. store: each element scaled by its row's factor and its parameters, 128-bit stores; each
     chunk's registers then take the next block's chunk (its load in flight meanwhile).

The weight, seen from chunk ``c``, starts at column ``c0 = 8c - r n``, anywhere in an
aligned read (and wraps to column 0 at a row boundary). The CTA stages 8 shifted copies of it
once (copy ``s`` holds ``w[(m + s) mod n]`` at ``m``), so a chunk's 8 weights are one 128-bit
read from copy ``c0 mod 8``. CTAs are persistent: the copies and each chunk's place in its
rows are set up once for ``row_iters`` blocks. (LayerNorm had a packed build too until session
25, when its persistent shifted build, gamma and beta in registers, beat it by 18-28%.)

ABI and geometry: ``packed.py`` (the row-norm contract's parameters).
"""

from __future__ import annotations

import cutlass
import cutlass.cute as cute
from cutlass import Float32, Int32, Int64, Uint32, const_expr

from cutefi.cute import args as kernel_args
from cutefi.cute.args import KernelArgs
from cutefi.cute.convert import store_fp8
from cutefi.cute.dtypes import cute_dtype
from cutefi.cute.pack16 import convert_pairs
from cutefi.cute.pdl import wait_for_inputs
from cutefi.cute.reduce import warp_reduce_sum
from cutefi.norm import launch, packed

_ROWS = packed.ROWS_PER_BLOCK
_FACTORS = _ROWS  # where the rows' factors start among the words


class PackedRowNormKernel:
    def __init__(self, dtype_name: str, n_class: int, gemma: bool = False, out_dtype: str | None = None):
        self.contract = packed.contract(dtype_name, n_class, gemma, out_dtype)
        self.shape = packed.geometry(dtype_name, n_class)
        self.dtype = cute_dtype(dtype_name)
        self.param_dtype = self.dtype
        self.gemma = gemma
        self.quant = out_dtype is not None
        self.out_dtype = cute_dtype(out_dtype) if self.quant else self.dtype
        self.quant_max = launch.QUANT_MAX[out_dtype] if self.quant else 0.0
        self.threads = self.shape.block_threads
        self.copies = self.shape.copies
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
        params = cute.recast_ptr(smem, dtype=self.param_dtype)
        partials = cute.make_tensor(cute.recast_ptr(smem + self.shape.partials_offset, dtype=Float32),
                                    cute.make_layout(self.shape.n_class))
        words = cute.make_tensor(cute.recast_ptr(smem + self.shape.boundary_offset, dtype=Float32),
                                 cute.make_layout(packed.WORDS))
        plan = cute.make_tensor(cute.recast_ptr(smem + self.shape.plan_offset, dtype=Int32),
                                cute.make_layout(self.threads * packed.CHUNKS))
        n = args.N
        inv_n = cute.arch.rcp_approx(Float32(n))
        inv_scale = Float32(1.0)
        wait_for_inputs()  # with PDL the previous kernel may still be writing x or the parameters
        if const_expr(self.quant):
            # FlashInfer's quantisation: times 1/scale (scale_value 0: the scale is a tensor)
            scale = args.scale_value
            if scale == Float32(0.0):
                scale = cute.make_tensor(args.scale, cute.make_layout(1))[0]
            inv_scale = Float32(1.0) / scale
        self._chunk_plan(plan, n, inv_n)
        self._stage_param(args.weight, params, n)
        cute.arch.barrier()
        # x of the CTA's first block in flight; each block's stage 3 then loads the next
        # block's chunks into the registers it has just stored from
        rX = cute.make_rmem_tensor(cute.make_layout(((8, 1), 1, packed.CHUNKS)), self.dtype)
        for k in cutlass.range_constexpr(packed.CHUNKS):
            self._load_chunk(args, rX, k, bidx * _ROWS)
        for it in cutlass.range(args.row_iters, unroll=1):
            first_row = (bidx + it * grid_x) * _ROWS
            if first_row < args.M:
                self._block(args, first_row, first_row + grid_x * _ROWS, rX, params, partials, words, inv_n,
                            inv_scale, plan)

    # ------------------------------------------------------------------ #
    # once a CTA: the parameters' shifted copies, each chunk's place
    # ------------------------------------------------------------------ #
    @cute.jit
    def _stage_param(self, src_ptr: cute.Pointer, dst_ptr: cute.Pointer, n: Int32):
        """Copy ``s`` at ``s * copy_elems``: element ``m`` is ``p[(m + s) mod n]`` (entries no
        chunk reads hold p[n - 1]). Loads in batches of 16, then their stores: a few memory
        latencies, not one an element. The caller synchronises."""
        tidx = cute.arch.thread_idx()[0]
        src = cute.make_tensor(src_ptr, cute.make_layout(self.shape.n_class))
        dst = cute.make_tensor(dst_ptr, cute.make_layout(self.copies * self.copy_elems))
        total = self.copies * self.copy_elems
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

    @cute.jit
    def _chunk_plan(self, plan: cute.Tensor, n: Int32, inv_n: Float32):
        """Where each of the thread's chunks sits, the same every block, into shared memory
        (word ``k * threads + tidx``; read back each block rather than held in registers,
        where the compiler would also keep everything derived from it for the whole loop):
        ``row | in_row << 3 | parameter offset << 8`` (a harmless one past the block's
        chunks). row = floor(8 chunk / n) (exact for 8 chunk < 8 n <= 2^15: the half keeps a
        multiple of n off the rounding edge); in_row, the chunk's elements in that row, capped
        at 8; the offset, where copy ``column mod copies`` holds the chunk's parameters aligned."""
        tidx = cute.arch.thread_idx()[0]
        for k in cutlass.range_constexpr(packed.CHUNKS):
            chunk = tidx + k * self.threads
            row = Int32((Float32(8 * chunk) + Float32(0.5)) * inv_n)
            in_row = cutlass.min((row + 1) * n - 8 * chunk, 8)
            column = 8 * chunk - row * n  # >= 0: bit masks, not a signed remainder
            shift = column & (self.copies - 1)
            offset = shift * self.copy_elems + column - shift
            # past the block's chunks: row 7, wholly in it, parameters at 0 (its x is 0 and it
            # is never stored), so the stages need no branch on it
            plan[chunk] = cutlass.select_(chunk < n, row | (in_row << 3) | (offset << 8), Int32(7 | (8 << 3)))

    # ------------------------------------------------------------------ #
    # registers <-> values
    # ------------------------------------------------------------------ #
    @cute.jit
    def _x_values(self, rX: cute.Tensor, k: cutlass.Constexpr[int], salt: Uint32) -> list:
        """Chunk ``k`` of x as 8 fp32 values (bf16: a shift or a mask a value). ``salt`` (0 at
        run time, unknown to the compiler) is XORed into the packed words first where a stage
        must not reuse an earlier stage's conversions: that would keep 64 fp32 registers of x
        live across the barriers instead of 32 packed ones."""
        x_words = cute.recast_tensor(rX, Uint32)
        words = [x_words[4 * k + j] ^ salt for j in range(4)]
        if const_expr(self.dtype == cutlass.BFloat16):
            values = []
            for word in words:
                values.append((word << 16).bitcast(Float32))
                values.append((word & Uint32(0xFFFF0000)).bitcast(Float32))
            return values
        halves = cute.make_rmem_tensor(cute.make_layout(8), self.dtype)
        halves_words = cute.recast_tensor(halves, Uint32)
        for j in cutlass.range_constexpr(4):
            halves_words[j] = words[j]
        return [Float32(halves[i]) for i in range(8)]

    @cute.jit
    def _param_values(self, params: cute.Pointer, offset: Int32) -> list:
        """A chunk's 8 weights from their shifted copy: one 128-bit read."""
        loaded = cute.make_rmem_tensor(cute.make_layout(((8, 1), 1, 1)), self.dtype)
        load = cute.make_copy_atom(cute.nvgpu.CopyUniversalOp(), self.dtype, num_bits_per_copy=128)
        cute.copy(load, cute.make_tensor(params + cute.assume(offset, divby=8), cute.make_layout(((8, 1), 1, 1))),
                  loaded)
        return self._x_values(loaded, 0, Uint32(0))

    # ------------------------------------------------------------------ #
    # global memory
    # ------------------------------------------------------------------ #
    @cute.jit
    def _chunk_view(self, ptr: cute.Pointer, first_row: Int32, k: cutlass.Constexpr[int], n: Int32) -> cute.Tensor:
        """The thread's chunk ``k`` of the block starting at ``first_row`` (8 elements, aligned)."""
        offset = cute.assume(Int64(first_row) * n + Int64(8 * cute.arch.thread_idx()[0]), divby=8)
        return cute.make_tensor(ptr + offset + 8 * self.threads * k, cute.make_layout(((8, 1), 1, 1)))

    @cute.jit
    def _load_chunk(self, args: KernelArgs, rX: cute.Tensor, k: cutlass.Constexpr[int], first_row: Int32):
        """Chunk ``k`` of the block at ``first_row`` into its registers where it lies wholly in
        the tensor (one 128-bit load, left in flight); 0 otherwise (a chunk past the block's
        ``n`` or the tensor's end: the block fills the one the end cuts)."""
        chunk = cute.make_tensor(rX.iterator + 8 * k, cute.make_layout(((8, 1), 1, 1)))
        chunk.fill(0.0)
        limit = cutlass.min(args.M - first_row, _ROWS) * args.N  # the block's elements in the tensor
        if 8 * (cute.arch.thread_idx()[0] + k * self.threads) + 8 <= limit:
            load = cute.make_copy_atom(cute.nvgpu.CopyUniversalOp(), self.dtype, num_bits_per_copy=128)
            cute.copy(load, self._chunk_view(args.x, first_row, k, args.N), chunk)

    # ------------------------------------------------------------------ #
    # one block of rows
    # ------------------------------------------------------------------ #
    @cute.jit
    def _chunk_sums(self, rX: cute.Tensor, plan: cute.Tensor, partials: cute.Tensor, words: cute.Tensor):
        """Stage 1: each chunk's sum of squares into ``partials``; a boundary chunk's part for
        the next row into that row's word."""
        tidx = cute.arch.thread_idx()[0]
        for k in cutlass.range_constexpr(packed.CHUNKS):
            where = plan[tidx + k * self.threads]
            row = where & 7
            in_row = (where >> 3) & 15
            x = self._x_values(rX, k, Uint32(0))
            terms = [v * v for v in x]
            total = Float32(0.0)
            for i in cutlass.range_constexpr(8):
                total = total + terms[i]
            mine = total
            if in_row < 8:  # a row boundary inside the chunk: split its sum
                mine = Float32(0.0)
                for i in cutlass.range_constexpr(8):
                    mine = mine + cutlass.select_(i < in_row, terms[i], Float32(0.0))
                words[row + 1] = total - mine
            partials[tidx + k * self.threads] = mine
        cute.arch.barrier()

    @cute.jit
    def _row_sums(self, partials: cute.Tensor, words: cute.Tensor, n: Int32, inv_n: Float32, rsqrt_eps: Float32,
                  factor: Float32):
        """Stage 2: each row's sum of its chunks' partials: rsqrt(sum / n + eps) * factor,
        into ``words[_FACTORS + row]``. Rows warp, warp +
        warps, ... (a run-time row: bounds for 8 unrolled rows would be hoisted out of the
        block loop into registers)."""
        tidx = cute.arch.thread_idx()[0]
        lane = tidx % 32
        for row in cutlass.range(tidx // 32, _ROWS, self.warps, unroll=1):
            first = (row * n + 7) // 8  # the first chunk starting in the row
            end = ((row + 1) * n + 7) // 8
            acc = Float32(0.0)
            for c in cutlass.range(first + lane, end, 32, unroll=4):
                acc = acc + partials[c]
            acc = warp_reduce_sum(acc)
            if row > 0 and (row * n) % 8 != 0:  # the chunk before the row crosses into it
                acc = acc + words[row]
            value = cute.math.rsqrt(acc * inv_n + rsqrt_eps, fastmath=True) * factor
            if lane == 0:
                words[_FACTORS + row] = value
        cute.arch.barrier()

    @cute.jit
    def _block(self, args: KernelArgs, first_row: Int32, next_row: Int32, rX: cute.Tensor, params: cute.Pointer,
               partials: cute.Tensor, words: cute.Tensor, inv_n: Float32, inv_scale: Float32, plan: cute.Tensor):
        tidx = cute.arch.thread_idx()[0]
        n = args.N
        K = packed.CHUNKS
        T = self.threads
        limit = cutlass.min(args.M - first_row, _ROWS) * n  # elements of the block in the tensor
        base = cute.assume(Int64(first_row) * n + Int64(8 * tidx), divby=8)
        salt = Uint32(args.shift)

        # the chunk the tensor's end cuts (loads in flight since the last block cover the rest)
        for k in cutlass.range_constexpr(K):
            start = 8 * (tidx + k * T)
            if start < limit and start + 8 > limit:
                src = self._chunk_view(args.x, first_row, k, n)
                for i in cutlass.range_constexpr(8):
                    if start + i < limit:
                        rX[(i, 0), 0, k] = src[(i, 0), 0, 0]

        # ---- stages 1 and 2: each row's factor ----
        self._chunk_sums(rX, plan, partials, words)
        self._row_sums(partials, words, n, inv_n, args.eps, inv_scale)

        # ---- stage 3: scale, parameters, store; the next block's chunk in flight ----
        store = cute.make_copy_atom(cute.nvgpu.CopyUniversalOp(), self.out_dtype,
                                    num_bits_per_copy=8 * self.out_dtype.width)
        for k in cutlass.range_constexpr(K):
            where = plan[tidx + k * T]
            row = where & 7
            in_row = (where >> 3) & 15
            offset = where >> 8
            w = self._param_values(params, offset)
            x = self._x_values(rX, k, salt + salt)  # not stage 1's conversions (see _x_values)
            rY = cute.make_rmem_tensor(cute.make_layout(8), Float32)
            for i in cutlass.range_constexpr(8):
                rY[i] = x[i]
            for i in cutlass.range_constexpr(8):
                rY[i] = rY[i] * (w[i] + Float32(1.0) if const_expr(self.gemma) else w[i])
            factor = words[_FACTORS + row]
            if in_row >= 8:  # the chunk lies in one row (all but one chunk a row)
                for i in cutlass.range_constexpr(8):
                    rY[i] = rY[i] * factor
            else:  # its last 8 - in_row elements belong to the next row
                next_factor = words[_FACTORS + row + 1]
                for i in cutlass.range_constexpr(8):
                    rY[i] = rY[i] * cutlass.select_(i < in_row, factor, next_factor)
            rO = cute.make_rmem_tensor(cute.make_layout((8, 1)), self.out_dtype)
            if const_expr(self.quant):
                store_fp8(rY.load(), rO, self.quant_max)
            else:
                convert_pairs(rY, rO)
            start = 8 * (tidx + k * T)
            gO_k = cute.make_tensor(args.out + cute.assume(base + 8 * T * k, divby=8), cute.make_layout((8, 1)))
            if start + 8 <= limit:
                cute.copy(store, rO, gO_k)
            elif start < limit:  # the tensor ends inside this chunk
                for i in cutlass.range_constexpr(8):
                    if start + i < limit:
                        gO_k[i, 0] = rO[i, 0]
            # the chunk's registers are free: the next block's chunk goes in flight
            self._load_chunk(args, rX, k, next_row)
        # no barrier before the next block: its first stage writes partials and boundary
        # words, last read behind this block's last barrier; its stage 2 writes the means and
        # factors this stage reads, behind its stage 1's barrier
