"""RMSNorm of rows that start off 16-byte boundaries, a warp a row, in CuTe DSL ("warp rows").

    y[m, :] = x[m, :] * rsqrt(mean(x[m, :]^2) + eps) * w'     w' = w or (1 + w)
    out = y, or for the FP8 quant builds out = fp8(clamp(y / scale, -max, max))

A row starting ``lead`` elements into its first aligned 8-element chunk is read as the aligned
chunks that cover it (chunk ``j``: row columns ``8 j - lead .. 8 j - lead + 7``). Each warp of a
persistent CTA normalises its rows one after the other (``row_iters`` of them, ``grid * warps``
rows apart):

  1. the row's chunks arrive (cp.async, issued while the warp worked on its last row) in the
     warp's slot of shared memory; lane ``l`` owns chunks ``l, l + 32, ...`` and reads back only
     what it copied itself, so the warp needs no synchronisation;
  2. the sum of squares: each chunk from the slot into registers (the row's two end chunks
     masked first), then the warp's shuffles: no barrier, no shared-memory exchange;
  3. the output: once the row is in registers the slot takes the warp's next row (its loads
     in flight during this row's reduction and output); each chunk from the registers, its 8 weights from the CTA's fp32 copy of the
     weight (8 aligned 32-bit reads wherever the chunk starts), stored with one 128-bit (64-bit
     FP8) store, the row's end chunks in aligned pieces.

The CTA copies the weight into shared memory once, as fp32 (1 added for Gemma).
ABI and geometry: ``warp_rows.py`` (the row-norm contract's parameters).
"""

from __future__ import annotations

import cutlass
import cutlass.cute as cute
from cutlass import Float32, Int32, Int64, Uint32, const_expr
from cutlass.cute.nvgpu import cpasync

from cutefi.cute import args as kernel_args
from cutefi.cute.args import KernelArgs
from cutefi.cute.convert import store_fp8
from cutefi.cute.dtypes import cute_dtype
from cutefi.cute.pack16 import widen
from cutefi.cute.pdl import wait_for_inputs
from cutefi.cute.reduce import warp_reduce_sum
from cutefi.norm import launch, warp_rows
from cutefi.norm.shifted import mask_words_outside_row, store_ends

_VEC = warp_rows.VEC
_PAD = warp_rows.PAD


class WarpRowsNormKernel:
    def __init__(self, dtype_name: str, n_class: int, gemma: bool = False, out_dtype: str | None = None):
        self.contract = warp_rows.contract(dtype_name, n_class, gemma, out_dtype)
        self.shape = warp_rows.geometry(dtype_name, n_class)
        self.dtype = cute_dtype(dtype_name)
        self.gemma = gemma
        self.quant = out_dtype is not None
        self.out_dtype = cute_dtype(out_dtype) if self.quant else self.dtype
        self.quant_max = launch.QUANT_MAX[out_dtype] if self.quant else 0.0
        self.warps = self.shape.warps
        self.chunks = self.shape.chunks
        # chunk passes of a lane over the chunks that may be full (chunk 32 * passes, lane 0's,
        # is always a partial one: chunks % 32 == 1)
        self.full_passes = self.chunks // 32
        assert self.chunks % 32 == 1
        self.copy_elems = self.shape.copy_elems

    @cute.jit
    def __call__(self, args: KernelArgs):
        kernel_args.launch(self.kernel, self.contract, args)

    @cute.kernel
    def kernel(self, args: KernelArgs):
        tidx = cute.arch.thread_idx()[0]
        bidx = cute.arch.block_idx()[0]
        grid_x = cute.arch.grid_dim()[0]
        lane, warp = tidx % 32, tidx // 32
        smem = cute.arch.get_dyn_smem(cutlass.Int8, alignment=128)
        params = cute.make_tensor(cute.recast_ptr(smem, dtype=Float32),
                                  cute.make_layout(self.shape.params_bytes // 4))
        slot = cute.recast_ptr(smem + cute.assume(self.shape.params_bytes + warp * self.shape.slot_bytes, divby=128),
                               dtype=self.dtype)
        wait_for_inputs()  # with PDL the previous kernel may still be writing x or the weight
        inv_scale = Float32(1.0)
        if const_expr(self.quant):  # FlashInfer's quantisation: times 1/scale (once a thread)
            scale = args.scale_value  # 0: the scale is a tensor, read on the device
            if scale == Float32(0.0):
                scale = cute.make_tensor(args.scale, cute.make_layout(1))[0]
            inv_scale = Float32(1.0) / scale
        row = bidx * self.warps + warp
        step = grid_x * self.warps
        self._prefetch(args, row, lane, slot)
        self._stage_weight(args.weight, params, args.N)
        cute.arch.barrier()  # the copies are the only data warps share
        inv_n = cute.arch.rcp_approx(Float32(args.N))
        for it in cutlass.range(args.row_iters, unroll=1):
            if row < args.M:
                self._row(args, row, row + step, lane, slot, params, inv_n, inv_scale)
            row = row + step

    # ------------------------------------------------------------------ #
    # a row's place, its chunks' loads
    # ------------------------------------------------------------------ #
    @cute.jit
    def _start(self, args: KernelArgs, row: Int32, row_stride: Int64, head_stride: Int64):
        """``(offset of the row's first aligned chunk, lead)`` of ``row`` in a tensor of those
        strides (in elements from the pointer passed, which the API rounded down to 16 bytes)."""
        token, head = row, Int32(0)
        if args.heads != 1:
            token = row // args.heads
            head = row - token * args.heads
        start = Int64(token) * row_stride + Int64(head) * head_stride + args.shift
        lead = Int32(start % _VEC)
        return start - lead, lead

    @cute.jit
    def _prefetch(self, args: KernelArgs, row: Int32, lane: Int32, slot: cute.Pointer):
        """Start the loads of ``row``'s chunks into the warp's slot (none past the last row or
        the row's end) and commit them as one group (empty ones keep the count)."""
        if row < args.M:
            first, lead = self._start(args, row, args.x_row_stride, args.x_head_stride)
            for p in cutlass.range_constexpr(self.full_passes + 1):
                self._prefetch_chunk(args, first, lead, lane + 32 * p, slot)
        cute.arch.cp_async_commit_group()

    @cute.jit
    def _prefetch_chunk(self, args: KernelArgs, first: Int64, lead: Int32, j: Int32, slot: cute.Pointer):
        """The cp.async of chunk ``j`` of the row whose span starts at ``first`` (if the row
        reaches it)."""
        if j < self.chunks and _VEC * j - lead < args.N:
            atom = cute.make_copy_atom(cpasync.CopyG2SOp(cache_mode=cpasync.LoadCacheMode.GLOBAL), self.dtype,
                                       num_bits_per_copy=128)
            src = cute.make_tensor(args.x + cute.assume(first + _VEC * j, divby=_VEC), cute.make_layout(_VEC))
            dst = cute.make_tensor(slot + cute.assume(_VEC * j, divby=_VEC), cute.make_layout(_VEC))
            cute.copy(atom, src, dst)

    # ------------------------------------------------------------------ #
    # once a CTA: the weight's two copies
    # ------------------------------------------------------------------ #
    @cute.jit
    def _stage_weight(self, src_ptr: cute.Pointer, params: cute.Tensor, n: Int32):
        """The fp32 copy holds ``w[m]`` (plus 1 for Gemma) at element ``PAD + m`` for ``m`` in
        [0, n) (``warp_rows.physical``: a pad word after every 8); 0 in the pad and past the
        weight's chunks (columns no stored element reads). A 16-byte chunk of the weight a
        thread at a time."""
        tidx = cute.arch.thread_idx()[0]
        threads = const_expr(self.warps * 32)
        chunk_count = const_expr(self.shape.n_class // _VEC + 1)  # + the chunk after the class
        for first in cutlass.range_constexpr(0, chunk_count, threads):
            q = first + tidx
            if q < chunk_count:
                values = self._chunk_regs(self.dtype)
                values.fill(0.0)
                if _VEC * q < n:  # (a chunk holding the weight's end reads past it: in its 16 bytes)
                    src = cute.make_tensor(src_ptr + cute.assume(_VEC * q, divby=_VEC), values.layout)
                    values.store(src.load())
                w = self._widen(values)
                if const_expr(self.gemma):
                    w = w + Float32(1.0)
                staged = self._chunk_regs(Float32)
                staged.store(w)
                # (elements PAD + 8q ... sit at 9 (q + 1) ...: the group's pad word after them)
                base = (_VEC + 1) * (q + _PAD // _VEC)
                for i in cutlass.range_constexpr(_VEC):
                    params[base + i] = staged[(i, 0), 0, 0]
        if tidx < _PAD:  # the pad: columns before the row
            params[tidx] = Float32(0.0)

    # ------------------------------------------------------------------ #
    # one row
    # ------------------------------------------------------------------ #
    @cute.jit
    def _row(self, args: KernelArgs, row: Int32, next_row: Int32, lane: Int32, slot: cute.Pointer,
             params: cute.Tensor, inv_n: Float32, inv_scale: Float32):
        """One row. Its partial chunks (at most two: its first, when it starts inside it, and
        its last) are masked in the slot first, by lanes 0 (the last) and 1 (the first) at
        once, so the sum of squares reads every chunk alike; the output's passes store the
        full chunks (a predicate, no branch), the same two lanes the partial ones in pieces."""
        n = args.N
        x_first, lead = self._start(args, row, args.x_row_stride, args.x_head_stride)
        out_first, _ = self._start(args, row, args.out_row_stride, args.out_head_stride)
        passes = const_expr(self.full_passes)
        last = (n - 1 + lead) >> 3  # the row's last chunk
        # (a row inside chunk 0: lane 0 takes both its ends)
        last_partial = ((n + lead) & 7) != 0 or (last == 0 and lead > 0)
        partial_j = cutlass.select_(lane == 0, last, Int32(0))
        partial = (lane == 0 and last_partial) or (lane == 1 and lead > 0 and last != 0)
        col0 = _VEC * lane - lead  # the column of the lane's chunk in pass 0
        cute.arch.cp_async_wait_group(0)  # this row's chunks (this lane's) have landed
        cute.arch.sync_warp()  # (the partial chunks' lanes read chunks other lanes copied)
        partial_values = self._chunk_regs(self.dtype)
        partial_values.fill(0.0)
        if partial:
            self._mask_in_slot(slot, partial_j, lead, n, partial_values)
        cute.arch.sync_warp()

        # ---- sum of squares: every chunk that holds part of the row, kept in registers ----
        chunks = []
        total = Float32(0.0)
        for p in cutlass.range_constexpr(passes + 1):
            j = lane + 32 * p
            values = self._chunk(slot, j, (p < passes or j < self.chunks) and col0 + 256 * p < n)
            if const_expr(p < passes):
                chunks.append(values)
            x = self._widen(values)
            total = total + (x * x).reduce(cute.ReductionOp.ADD, init_val=Float32(0.0), reduction_profile=0)
        # the row is in registers: the slot takes the next row (its loads in flight meanwhile)
        cute.arch.sync_warp()
        if next_row < args.M:
            next_first, next_lead = self._start(args, next_row, args.x_row_stride, args.x_head_stride)
            for p in cutlass.range_constexpr(passes + 1):
                self._prefetch_chunk(args, next_first, next_lead, lane + 32 * p, slot)
        cute.arch.cp_async_commit_group()
        total = warp_reduce_sum(total)
        factor = cute.math.rsqrt(total * inv_n + args.eps, fastmath=True) * inv_scale

        # ---- output: the partial chunks, then the full ones ----
        if partial:
            self._chunk_out(args, partial_values, params, out_first, partial_j, lead, n, factor)
        # (pass p's weights sit 9 * 32 * p after pass 0's: the places once a row)
        places = self._weight_places(col0)
        for p in cutlass.range_constexpr(passes):
            at = [place + (_VEC + 1) * 32 * p for place in places]
            self._full_chunk_out(args, chunks[p], params, at, out_first, lane + 32 * p, col0 + 256 * p, n, factor)

    def _chunk_regs(self, dtype):
        return cute.make_rmem_tensor(cute.make_layout(((_VEC, 1), 1, 1)), dtype)

    @cute.jit
    def _chunk(self, slot: cute.Pointer, j: Int32, wanted: cutlass.Boolean) -> cute.Tensor:
        """Chunk ``j`` from the slot where ``wanted``, else 0: a predicated read, no branch."""
        values = self._chunk_regs(self.dtype)
        values.fill(0.0)
        src = cute.make_tensor(slot + cute.assume(_VEC * j, divby=_VEC), values.layout)
        if wanted:
            values.store(src.load())
        return values

    @cute.jit
    def _mask_in_slot(self, slot: cute.Pointer, j: Int32, lead: Int32, n: Int32, values: cute.Tensor):
        """Zero the elements of the row's chunk ``j`` outside the row, in the slot and in the
        chunk's registers ``values``."""
        src = cute.make_tensor(slot + cute.assume(_VEC * j, divby=_VEC), values.layout)
        values.store(src.load())
        mask_words_outside_row(values, 0, _VEC * j - lead, n)
        src.store(values.load())

    @cute.jit
    def _scaled(self, values: cute.Tensor, params: cute.Tensor, at: list, factor: Float32) -> cute.Tensor:
        """The chunk's output registers: x times factor times its 8 weights, 32-bit reads of
        the fp32 copy at the places ``at`` (``_weight_places``)."""
        weights = self._chunk_regs(Float32)
        for i in cutlass.range_constexpr(_VEC):
            weights[(i, 0), 0, 0] = params[at[i]]
        # (widened another way than for the squares: the same instructions let the compiler
        # keep the row's fp32 values from the first pass, 128 registers, and spill)
        y = values.load().to(Float32) * factor * weights.load()
        result = self._chunk_regs(self.out_dtype)
        if const_expr(self.quant):
            store_fp8(y, result, self.quant_max)
        else:
            result.store(y.to(self.out_dtype))
        return result

    @cute.jit
    def _weight_places(self, col: Int32) -> list:
        """Where the weights of a chunk of column ``col`` sit in the copy (``warp_rows.physical``
        of ``PAD + col + i``)."""
        places = []
        for i in cutlass.range_constexpr(_VEC):
            element = _PAD + col + i
            places.append(element + (element >> 3))
        return places

    @cute.jit
    def _store_full(self, result: cute.Tensor, dest: cute.Tensor):
        """One 128-bit (64-bit FP8) store of a chunk's output registers."""
        atom = cute.make_copy_atom(cute.nvgpu.CopyUniversalOp(), self.out_dtype,
                                   num_bits_per_copy=_VEC * self.out_dtype.width)
        cute.copy(atom, result, dest)

    @cute.jit
    def _full_chunk_out(self, args: KernelArgs, values: cute.Tensor, params: cute.Tensor, at: list,
                        out_first: Int64, j: Int32, col: Int32, n: Int32, factor: Float32):
        """A full chunk's output (none elsewhere) from its registers ``values``: computed
        whatever the chunk (its weights' reads stay inside the copy), stored under a
        predicate, so no branch keeps the next chunks' work behind this one's."""
        result = self._scaled(values, params, at, factor)
        if col >= 0 and col + _VEC <= n:
            self._store_full(result, cute.make_tensor(args.out + cute.assume(out_first + _VEC * j, divby=_VEC),
                                                      result.layout))

    @cute.jit
    def _chunk_out(self, args: KernelArgs, values: cute.Tensor, params: cute.Tensor, out_first: Int64, j: Int32,
                   lead: Int32, n: Int32, factor: Float32):
        """A partial chunk's output (``values``: its masked registers), stored in aligned
        pieces (``shifted.store_ends``)."""
        col = _VEC * j - lead
        result = self._scaled(values, params, self._weight_places(col), factor)
        dest = cute.make_tensor(args.out + cute.assume(out_first + _VEC * j, divby=_VEC), result.layout)
        store_ends(result, dest, 0, col, n)

    @cute.jit
    def _widen(self, values: cute.Tensor) -> cute.TensorSSA:
        return widen(values)
