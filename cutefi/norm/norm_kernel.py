"""Row-wise norm kernel (RMSNorm and LayerNorm families) in CuTe DSL with an author-controlled ABI.

    rms:   y[m, :] = x[m, :] * rsqrt(mean(x[m, :]^2) + eps) * w'        w' = w or (1 + w)
    layer: y[m, :] = (x[m, :] - mean) * rsqrt(var + eps) * gamma + beta  (gamma, beta fp32)
    silu:  y[m, :] = silu(x[m, :] * rsqrt(mean(x[m, :]^2) + eps) * w)     (RMSNorm + SiLU builds)
    out = y, or for the FP8 quant builds out = fp8(clamp(y * (1 / scale[0]), -max, max))

fused_add variant (in place on residual, output may alias x):

    s              = float(x[m, :]) + float(residual[m, :])     (fp32)
    residual[m, :] = round(s)
    y[m, :]        = s * rsqrt(mean(s^2) + eps) * w'              (from the fp32 s: FlashInfer's
                                                                   definition, not the rounded one)

ABI and launch geometry: ``contract`` in ``launch.py`` (the kernel reads its parameters by
name from one ``KernelArgs``; the CuTe tensors are built from the raw pointers inside).
Each thread finds its own row's start (row ``r`` = token ``r // heads``, head ``r % heads``),
so 2-D rows and 3-D ``[tokens, heads, head_dim]`` views with any strides take one path.

Compile-time specialisation: kind (rms/layer), dtype (bf16/fp16), hidden-size class
``n_class`` (any N <= n_class runs on the build), ``fused_add``, ``gemma``, ``aligned`` (else
shifted: rows start anywhere in their first 16-byte chunk, see ``shifted.py``) and the quant
``out_dtype``; the geometry (``launch.geometry``) adds the row split and, for LayerNorm, the
persistent form: a loop over ``row_iters`` rows a thread with the next rows of x in flight
through a per-thread cp.async ring and gamma/beta read once into registers (shifted rows: in the
row frame of a thread's rows, which share a lead), see ``_persistent_rows``; and for the
classes in ``tuning.REREAD_ROWS`` (RMSNorm 8192, the fused add at 4096, LayerNorm 4096)
``reread``: x (and the residual) read a second time after the reduction (an L1 hit, with cache
priorities, ``cute/hinted_load``) instead of held in registers across it (``reread.py``).
The parameters (gamma, beta, the weight, FP8's 1/scale) are read by ``params.py``.
"""

from __future__ import annotations

import cutlass
import cutlass.cute as cute
from cutlass.cute.nvgpu import cpasync
from cutlass import Float32, const_expr
from cutlass.base_dsl import BaseDSL

from cutefi.cute import args as kernel_args
from cutefi.cute.activation import silu
from cutefi.cute.args import KernelArgs
from cutefi.cute.convert import store_fp8
from cutefi.cute.dtypes import cute_dtype
from cutefi.cute.hinted_load import l2_policy, load_chunks
from cutefi.cute.pack16 import widen
from cutefi.cute.pdl import wait_for_inputs
from cutefi.cute.reduce import row_reduce_sum
from cutefi.norm import launch
from cutefi.norm.lead_chunk import LeadChunk
from cutefi.norm.params import RowParams
from cutefi.norm.reread import RereadRows
from cutefi.norm.shifted import mask_words_outside_row, store_ends


class RowNormKernel(RereadRows, LeadChunk, RowParams):
    # ------------------------------------------------------------------ #
    # 1. heuristics (compile-time), all numbers from launch.py and tuning.py
    # ------------------------------------------------------------------ #
    def __init__(self, norm: str, dtype_name: str, n_class: int, fused_add: bool = False, gemma: bool = False,
                 aligned: bool = True, out_dtype: str | None = None, fp8_in_software: bool = False,
                 latency: bool = False, params16: bool = False, silu: bool = False):
        kind = norm
        self.contract = launch.contract(norm, dtype_name, n_class, fused_add, gemma, aligned, out_dtype,
                                        fp8_in_software, latency, params16, silu)
        self.fp8_in_software = fp8_in_software
        if kind not in launch.KINDS or (kind == "layer" and (fused_add or gemma)):
            raise ValueError(f"unsupported norm kind {kind!r} (fused_add={fused_add}, gemma={gemma})")
        self.kind = kind
        self.layer = kind == "layer"
        # layernorm's gamma and beta are fp32 (or, params16 builds, the input's dtype, widened in
        # registers); rmsnorm's weight has the input dtype
        self.param_dtype = Float32 if self.layer and not params16 else cute_dtype(dtype_name)
        self.dtype = cute_dtype(dtype_name)
        self.quant = out_dtype is not None
        self.out_dtype = cute_dtype(out_dtype) if self.quant else self.dtype
        self.quant_max = launch.QUANT_MAX[out_dtype] if self.quant else 0.0
        self.fused_add = fused_add
        self.gemma = gemma
        # RMSNorm + SiLU: silu(x * rstd * w), then 1/scale (FP8): the scale is not folded into
        # the row's factor, which would scale SiLU's input
        self.silu = silu
        assert not silu or (kind == "rms" and not fused_add and not gemma)
        self.aligned = aligned
        shape = launch.geometry(norm, dtype_name, n_class, fused_add, aligned, out_dtype, latency)
        self.vec = shape.vec  # elements per access
        self.threads_per_row = shape.threads_per_row
        self.num_threads = shape.block_threads
        self.rows_per_cta = shape.rows_per_cta
        self.warps_per_row = shape.warps_per_row
        self.tile_n = shape.tile_n
        self.delay_w_load = shape.delay_weight_load
        self.shifted = shape.shifted
        self.lead_chunk = shape.lead_chunk_alone
        # the thread that takes the lead chunk: the row's last (its first masks the row's first
        # chunk, so the extra work before the row's reduction is split between two warps)
        self.lead_lane = self.threads_per_row - 1
        # (launch.geometry: plain RMSNorm, or the persistent LayerNorm whose ring holds the chunk)
        assert not self.lead_chunk or not (fused_add or (norm == "layer" and not shape.prefetch))
        self.prefetch = shape.prefetch
        self.reread = shape.reread
        assert not self.reread or not (self.prefetch or self.shifted)
        # the persistent FP8 LayerNorm holds gamma and beta in registers for all its rows: they
        # are multiplied by 1/scale once instead of every output element (RMSNorm folds it into
        # the row's factor)
        self.prescaled = self.quant and bool(self.prefetch) and self.layer
        # persistent LayerNorm builds with 16-bit gamma and beta take the one-row path for calls
        # of a row a thread, as RMSNorm's do. H100, alternated trees (layernorm_small_rows_ab_
        # h100_session50.txt), us at 128 / 512 rows of 4095: 3.04-3.07 / 5.47 -> 2.78-2.82 /
        # 4.64-4.67. (With fp32 ones 3.84-3.87 / 7.74-7.84 -> 3.49-3.52 / 7.42-7.46, and the FP8
        # builds' 2.43 / 4.00-4.03 -> 2.27 / 3.84 at 4096, but that code spilled 2-27 registers
        # on sm_90: the FP8 builds, and fp16 rows off 16-byte boundaries)
        self.one_row_path = not self.layer or self.param_dtype.width == 16
        self.ring_slot_elems = shape.block_threads * shape.chunks * shape.vec
        self.ring_elems = shape.ring_bytes // shape.elem_bytes  # the slots, then the lead chunks'
        # a thread reads back only the ring chunks it copied itself; the reduction buffers are
        # safe to reuse across rows: LayerNorm's two reductions a row order them, RMSNorm's one
        # takes two buffers in turn (_row's parity)
        assert not self.prefetch or not fused_add
        assert self.num_threads % 32 == 0
        assert self.threads_per_row <= 32 or self.threads_per_row % 32 == 0

    def _tiled_copy(self, dtype) -> cute.TiledCopy:
        # one row: threads_per_row threads, each owning vec contiguous elements per chunk
        # (an access of up to 128 bits; two per chunk for aligned fp32 parameters)
        atom_bits = min(128, self.vec * dtype.width)
        atom = cute.make_copy_atom(cute.nvgpu.CopyUniversalOp(), dtype, num_bits_per_copy=atom_bits)
        thr_layout = cute.make_layout((1, self.threads_per_row))
        val_layout = cute.make_layout((1, self.vec))
        return cute.make_tiled_copy_tv(atom, thr_layout, val_layout)

    # ------------------------------------------------------------------ #
    # 2. host wrapper: the contract's launch (grid = ceil(M / rows_per_cta))
    # ------------------------------------------------------------------ #
    @cute.jit
    def __call__(self, args: KernelArgs):
        kernel_args.launch(self.kernel, self.contract, args)

    # ------------------------------------------------------------------ #
    # 3. device kernel
    # ------------------------------------------------------------------ #
    @cute.kernel
    def kernel(self, args: KernelArgs):
        tidx, _, _ = cute.arch.thread_idx()
        bidx, _, _ = cute.arch.block_idx()
        lane = tidx % self.threads_per_row
        row = bidx * self.rows_per_cta + tidx // self.threads_per_row
        if const_expr(not self.prefetch):
            self._row(args, row, lane, None, 0, row, None, None)
        elif const_expr(self.layer and not self.one_row_path):
            self._persistent_rows(args, row, lane)
        else:
            # a call of a row a thread (decode-sized) takes the one-row path, without the ring's
            # round trip and the parameters' early load (RMSNorm 11% slower at 128 rows;
            # LayerNorm: one_row_path)
            if args.row_iters == 1:
                self._row(args, row, lane, None, 0, row, None, None)
            else:
                self._persistent_rows(args, row, lane)

    @cute.jit
    def _persistent_rows(self, args: KernelArgs, row: cutlass.Int32, lane: cutlass.Int32):
        """Prefetch builds: this thread's rows are ``step`` apart (``row_iters`` of them); the
        next ``prefetch`` are in flight in its own slots of the ring (each thread reads back
        only the chunks it copied itself, so the ring needs no barrier). gamma and beta cover
        the same columns every row, so they are read once, into registers: the per-row reloads
        were most of the L1 and L2 traffic of the one-row build. Shifted rows read them in the
        row frame of the thread's first row; the plan makes ``step`` a multiple of the rows
        over which a lead repeats (``launch.persistent_grid``), so every row of the thread has
        that lead."""
        grid_x, _, _ = cute.arch.grid_dim()
        step = grid_x * self.rows_per_cta
        ring = cute.arch.alloc_smem(self.dtype, self.ring_elems, alignment=16)
        # every row of the thread has its first row's lead: computed once and passed on, so
        # the row's columns, predicates and end chunks are loop invariants (hoisted)
        token, head = self._token_head(args, row)
        lead = self._lead(args, token, head)
        wait_for_inputs()
        for d in cutlass.range_constexpr(self.prefetch):
            self._prefetch(args, row + d * step, lane, ring, d, lead)
        param_copy = self._tiled_copy(self.param_dtype)
        thr_param = param_copy.get_slice(lane)
        tXgW = thr_param.partition_S(cute.make_tensor(args.weight, cute.make_layout((1, self.tile_n))))
        tXgB = thr_param.partition_S(cute.make_tensor(args.bias, cute.make_layout((1, self.tile_n))))
        tXcX = self._tiled_copy(self.dtype).get_slice(lane).partition_S(cute.make_identity_tensor((1, self.tile_n)))
        K = const_expr(cute.size(tXcX, mode=[2]))
        col = [tXcX[(0, 0), 0, k][1] - lead for k in range(K)]
        tXpW = cute.make_rmem_tensor(cute.make_layout((cute.size(tXgW, mode=[0, 1]), 1, K), stride=(0, 0, 1)),
                                     cutlass.Boolean)
        for k in cutlass.range_constexpr(K):
            tXpW[0, 0, k] = col[k] < args.N
        weights = cute.make_rmem_tensor_like(tXgW)
        weights.fill(0.0)
        self._load_param(param_copy, thr_param, args.weight, tXgW, weights, tXpW, col, lead, args.N)
        biases = None
        if const_expr(self.layer):
            biases = cute.make_rmem_tensor_like(tXgB)
            biases.fill(0.0)
            self._load_param(param_copy, thr_param, args.bias, tXgB, biases, tXpW, col, lead, args.N)
            if const_expr(self.param_dtype.width == 16):  # held as fp32 for all the rows, as fp32 ones are
                weights, biases = self._widened(weights), self._widened(biases)
        # 1/scale once for all the thread's rows (an IEEE division: not one a row)
        inv_scale = self._inv_scale(args) if const_expr(self.quant) else Float32(1.0)
        if const_expr(self.prescaled):  # 1/scale folded into gamma and beta once, not every row
            weights.store(weights.load() * inv_scale)
            biases.store(biases.load() * inv_scale)
        lead_params = None
        if const_expr(self.lead_chunk and (not self.layer or self._roomy_target())):
            lead_params = self._stage_lead_params(args, lane, lead, inv_scale)
        for it in cutlass.range(args.row_iters, unroll=1):
            cute.arch.cp_async_wait_group(self.prefetch - 1)  # this row's group has landed
            self._row(args, row + it * step, lane, ring, it % self.prefetch, row + (it + self.prefetch) * step,
                      weights, biases, lead, it % 2, inv_scale, lead_params)

    @cute.jit
    def _token_head(self, args: KernelArgs, row: cutlass.Int32):
        """``row``'s token and head: the integer division only where rows are heads of tokens
        (heads > 1, a uniform branch); 2-D rows and evenly spaced heads (planned as 2-D) skip
        its ~25 instructions, a row (two a row on the persistent builds, with the prefetch)."""
        token, head = row, cutlass.Int32(0)
        if args.heads != 1:
            token = row // args.heads
            head = row - token * args.heads
        return token, head

    @cute.jit
    def _lead(self, args: KernelArgs, token: cutlass.Int32, head: cutlass.Int32) -> cutlass.Int32:
        """Where the row of ``token`` and ``head`` starts in its first aligned chunk (0 on
        aligned builds): the same in x, out and residual (the API passes pointers whose rows
        sit alike in their chunks)."""
        lead = cutlass.Int32(0)
        if const_expr(self.shifted):
            start = cutlass.Int64(token) * args.x_row_stride + cutlass.Int64(head) * args.x_head_stride
            lead = cutlass.Int32((start + args.shift) % self.vec)
        return lead

    @cute.jit
    def _ring_slot(self, ring: cute.Pointer, slot: cutlass.Int32, like: cute.Tensor) -> cute.Tensor:
        """This thread's chunks of one ring slot, in the layout of its row registers ``like``:
        chunk k of thread t at (k * threads + t) * vec, so a warp's 128-bit accesses are
        consecutive (no bank conflicts)."""
        offset = cute.assume(slot * self.ring_slot_elems + cute.arch.thread_idx()[0] * self.vec, divby=self.vec)
        layout = cute.make_layout(like.shape, stride=((1, 0), 0, self.num_threads * self.vec))
        return cute.make_tensor(ring + offset, layout)

    @cute.jit
    def _lead_slot(self, ring: cute.Pointer, slot: cutlass.Int32) -> cute.Tensor:
        """The lead chunk of this thread's row in one ring slot (lead_chunk builds: after the
        slots, one chunk a row of the CTA a slot)."""
        row_in_cta = cute.arch.thread_idx()[0] // self.threads_per_row
        offset = self.prefetch * self.ring_slot_elems + (slot * self.rows_per_cta + row_in_cta) * self.vec
        return cute.make_tensor(ring + cute.assume(offset, divby=self.vec), cute.make_layout(((self.vec, 1), 1, 1)))

    @cute.jit
    def _prefetch(self, args: KernelArgs, row: cutlass.Int32, lane: cutlass.Int32, ring: cute.Pointer,
                  slot: cutlass.Int32, lead: cutlass.Int32):
        """Start the cp.async loads of ``row``'s x chunks (``lead``: where the row starts in its
        first aligned chunk) into ``slot`` (none past the last row or the row's end) and commit
        them as one group (empty ones keep the count)."""
        token, head = self._token_head(args, row)
        offset = cutlass.Int64(token) * args.x_row_stride + cutlass.Int64(head) * args.x_head_stride
        if const_expr(self.shifted):  # the row's first aligned chunk, as in _row
            offset = offset + args.shift - lead
        gX = cute.make_tensor(args.x + cute.assume(offset, divby=self.vec), cute.make_layout((1, self.tile_n)))
        thr = self._tiled_copy(self.dtype).get_slice(lane)
        tXgX = thr.partition_S(gX)
        tXcX = thr.partition_S(cute.make_identity_tensor((1, self.tile_n)))
        K = const_expr(cute.size(tXgX, mode=[2]))
        pred = cute.make_rmem_tensor(cute.make_layout((1, 1, K), stride=(0, 0, 1)), cutlass.Boolean)
        for k in cutlass.range_constexpr(K):
            pred[0, 0, k] = tXcX[(0, 0), 0, k][1] - lead < args.N and row < args.M
        atom = cute.make_copy_atom(cpasync.CopyG2SOp(cache_mode=cpasync.LoadCacheMode.GLOBAL), self.dtype,
                                   num_bits_per_copy=128)
        cute.copy(atom, tXgX, self._ring_slot(ring, slot, tXgX), pred=pred)
        if const_expr(self.lead_chunk):  # the row's chunk past the split: lead_lane's
            if lane == self.lead_lane and row < args.M and self.tile_n - lead < args.N:
                lead_src = cute.make_tensor(args.x + cute.assume(offset + self.tile_n, divby=self.vec),
                                            cute.make_layout(((self.vec, 1), 1, 1)))
                cute.copy(atom, lead_src, self._lead_slot(ring, slot))
        cute.arch.cp_async_commit_group()

    @cute.jit
    def _row(self, args: KernelArgs, row: cutlass.Int32, lane: cutlass.Int32, ring, slot: cutlass.Int32,
             next_row: cutlass.Int32, weights, biases, lead_of_rows=None, parity=None, inv_scale_of_rows=None,
             lead_params=None):
        """Normalise one row (threads_per_row threads). Prefetch builds take x from ``slot`` of
        the ring, refill it with ``next_row`` once x is in registers, and take gamma and beta
        from the registers ``weights`` and ``biases`` and the row's lead from ``lead_of_rows``
        (the thread's rows share it). One-row builds pass None for all of them and load or
        compute their own. ``parity`` (persistent RMSNorm: the row count mod 2) picks one of
        two reduction buffers, taken in turn (one reduction a row, see _reduction_buffer).
        ``inv_scale_of_rows``: 1/scale of the quant builds (persistent ones compute it once);
        ``lead_params``: the lead chunk's parameters staged once (persistent lead_chunk builds)."""
        M, N, eps = args.M, args.N, args.eps

        # ---- stage 0: this thread's row and its start in each tensor ------
        row_ok = row < M
        token, head = self._token_head(args, row)
        lead = lead_of_rows if const_expr(lead_of_rows is not None) else self._lead(args, token, head)

        def row_view(ptr, row_stride, head_stride):
            # the row's first aligned chunk: strides of aligned builds are multiples of vec
            # elements (the API checks), shifted builds round down by lead, so accesses stay
            # 128-bit
            offset = cutlass.Int64(token) * row_stride + cutlass.Int64(head) * head_stride
            if const_expr(self.shifted):
                offset = offset + args.shift - lead
            offset = cute.assume(offset, divby=self.vec)
            return cute.make_tensor(ptr + offset, cute.make_layout((1, self.tile_n)))

        def param_view(ptr, offset: int = 0):
            return cute.make_tensor(ptr + offset, cute.make_layout((1, self.tile_n)))

        def lead_chunk_view(ptr, row_stride, head_stride):
            # the aligned chunk at tile_n of the row's first aligned chunk (lead_chunk builds)
            offset = cutlass.Int64(token) * row_stride + cutlass.Int64(head) * head_stride + args.shift - lead
            offset = cute.assume(offset + self.tile_n, divby=self.vec)
            return cute.make_tensor(ptr + offset, cute.make_layout(((self.vec, 1), 1, 1)))

        gX = row_view(args.x, args.x_row_stride, args.x_head_stride)
        gO = row_view(args.out, args.out_row_stride, args.out_head_stride)
        cX = cute.make_identity_tensor((1, self.tile_n))  # (0, col) coordinates for predication

        # ---- stage 1: partition the row over its threads ----------------
        tiled_copy = self._tiled_copy(self.dtype)
        out_copy = self._tiled_copy(self.out_dtype)
        param_copy = self._tiled_copy(self.param_dtype)  # same thread/value layout
        thr = tiled_copy.get_slice(lane)
        thr_out = out_copy.get_slice(lane)
        thr_param = param_copy.get_slice(lane)
        tXgX = thr.partition_S(gX)  # ((vec,1), 1, K)
        tXgO = thr_out.partition_D(gO)
        tXgW = thr_param.partition_S(param_view(args.weight))
        tXcX = thr.partition_S(cX)

        tXrX = cute.make_rmem_tensor_like(tXgX)
        tXrW = cute.make_rmem_tensor_like(tXgW)
        tXrO = cute.make_rmem_tensor_like(tXgO)
        tXrX.fill(0.0)
        tXrW.fill(0.0)
        if const_expr(self.layer):
            tXgB = thr_param.partition_S(param_view(args.bias))
            tXrB = cute.make_rmem_tensor_like(tXgB)
            tXrB.fill(0.0)
        if const_expr(self.fused_add):
            tXgR = thr.partition_S(row_view(args.residual, args.residual_row_stride, args.residual_head_stride))
            tXrR = cute.make_rmem_tensor_like(tXgR)
            tXrR.fill(0.0)

        # ---- stage 2: predicates (one bool per access) -------------------
        # col: the row column of each chunk's first element. Aligned builds have N % vec == 0,
        # so a chunk is either fully in or fully out of the row; shifted rows have partial
        # chunks at their ends (in[k] and not full[k]), masked element by element.
        K = const_expr(cute.size(tXgX, mode=[2]))
        col = [tXcX[(0, 0), 0, k][1] - lead for k in range(K)]
        tXpX = cute.make_rmem_tensor(cute.make_layout((1, 1, K), stride=(0, 0, 1)), cutlass.Boolean)
        # col in bounds, per parameter access: a chunk of fp32 parameters is two 128-bit copies
        tXpW = cute.make_rmem_tensor(cute.make_layout((cute.size(tXgW, mode=[0, 1]), 1, K), stride=(0, 0, 1)),
                                     cutlass.Boolean)
        tXpO = cute.make_rmem_tensor(cute.make_layout((cute.size(tXgO, mode=[0, 1]), 1, K), stride=(0, 0, 1)),
                                     cutlass.Boolean)
        full = [None] * K
        for k in cutlass.range_constexpr(K):
            col_ok = col[k] < N
            tXpW[0, 0, k] = col_ok
            tXpX[0, 0, k] = col_ok and row_ok
            if const_expr(self.shifted):
                full[k] = col[k] >= 0 and col[k] + self.vec <= N
                tXpO[0, 0, k] = full[k] and row_ok
            else:
                tXpO[0, 0, k] = col_ok and row_ok

        # ---- stage 3: load (predicated; out-of-row chunks stay 0) ---------
        if const_expr(ring is not None):
            cute.copy(tiled_copy, self._ring_slot(ring, slot, tXrX), tXrX, pred=tXpX)
        else:
            # with PDL the previous kernel may still be writing x (or reading out): wait here
            wait_for_inputs()
            if const_expr(self.reread):
                # (x is read again after the reductions: kept in L1 and L2 until then)
                load_chunks(tXgX, tXrX, tXpX, l2_policy("evict_last"), "evict_last")
            else:
                cute.copy(tiled_copy, tXgX, tXrX, pred=tXpX)
        if const_expr(self.fused_add and self.reread):
            load_chunks(tXgR, tXrR, tXpX, l2_policy("evict_last"), "evict_last")
        elif const_expr(self.fused_add):
            cute.copy(tiled_copy, tXgR, tXrR, pred=tXpX)
        if const_expr(self.shifted):
            # the row's ends share their chunks with neighbouring data: keep only its columns
            # (a packed word at a time: element writes would split every register of x in two)
            for k in cutlass.range_constexpr(K):
                if not full[k]:
                    mask_words_outside_row(tXrX, k, col[k], N)
                    if const_expr(self.fused_add):
                        mask_words_outside_row(tXrR, k, col[k], N)
        if const_expr(self.lead_chunk):
            # the row's last chunk, past the threads' aligned split: lead_lane's alone
            col_e = self.tile_n - lead
            has_extra = lane == self.lead_lane and row_ok and col_e < N
            chunk_layout = cute.make_layout(((self.vec, 1), 1, 1))
            rXe = cute.make_rmem_tensor(chunk_layout, self.dtype)
            rXe.fill(0.0)
            gXe = lead_chunk_view(args.x, args.x_row_stride, args.x_head_stride)
            if has_extra:
                chunk_copy = cute.make_copy_atom(cute.nvgpu.CopyUniversalOp(), self.dtype, num_bits_per_copy=128)
                cute.copy(chunk_copy, self._lead_slot(ring, slot) if const_expr(ring is not None) else gXe, rXe)
                mask_words_outside_row(rXe, 0, col_e, N)
        # weight: loaded once per thread. Aligned RMSNorm builds (a fused add only at 16 elements
        # a thread or fewer, launch._delays_weight): issued with x so its latency overlaps the
        # reduction. Otherwise deferred past the reduction (x, residual and w in flight at once
        # would exceed the register budget and spill); parameters are L2-resident.
        if const_expr(not self.delay_w_load):  # (LayerNorm's latency builds: gamma and beta)
            self._load_param(param_copy, thr_param, args.weight, tXgW, tXrW, tXpW, col, lead, N)
            if const_expr(self.layer):
                self._load_param(param_copy, thr_param, args.bias, tXgB, tXrB, tXpW, col, lead, N)

        x = self._widen(tXrX)
        if const_expr(self.fused_add):
            # residual <- round(s), s = x + residual in fp32 (the rounded copy is staged in
            # registers of its own; x and residual stay to rebuild s later)
            x = x + self._widen(tXrR)
            if const_expr(not self.reread):  # (reread: stored with the output, from the second read)
                self._store_residual(tiled_copy, x, tXrR, tXgR, tXpO, full, col, N, row_ok)
        lead_sq = Float32(0.0)  # the lead chunk's sum of squares (its thread's; 0 elsewhere)
        lead_sum = Float32(0.0)  # (LayerNorm: its sum)
        if const_expr(self.lead_chunk and self.layer):
            if has_extra:
                lead_sum = Float32(self._widen(rXe).reduce(cute.ReductionOp.ADD, init_val=Float32(0.0),
                                                           reduction_profile=0))
        elif const_expr(self.lead_chunk):
            if has_extra:
                s_e = self._widen(rXe)
                lead_sq = Float32((s_e * s_e).reduce(cute.ReductionOp.ADD, init_val=Float32(0.0), reduction_profile=0))
        # ---- stage 4: row statistics --------------------------------------
        if const_expr(self.layer and self.reread):
            # one reduction of (count, mean, squared deviations), then x again a chunk at a time
            mean, rstd = self._moments(tXrX, tXpW, N, eps)
            self._layer_out_by_chunks(args, tXgX, tXrX, tXpO, param_copy, tXgW, tXrW, tXgB, tXrB, out_copy, tXgO,
                                      tXrO, mean, rstd, row_ok and N == self.tile_n)
        else:
            inv_n = cute.arch.rcp_approx(Float32(N))  # avoids the IEEE div slow path
            mean = Float32(0.0)
            if const_expr(self.layer):
                sum_x = x.reduce(cute.ReductionOp.ADD, init_val=Float32(0.0), reduction_profile=0) + lead_sum
                if const_expr(ring is not None):
                    # x is in registers (sum_x used it): the slot can take the next row
                    self._prefetch(args, next_row, lane, ring, slot, lead)
                mean = row_reduce_sum(sum_x, self.threads_per_row, self._reduction_buffer())
                mean = mean * inv_n
                tXrD = cute.make_rmem_tensor_like(tXrX, Float32)
                tXrD.store(x - mean)
                # the squares of the chunks in the row (a select a chunk, not an element). Shifted
                # rows' end chunks hold out-of-row elements as 0 (masked at the load), each adding
                # exactly mean^2: taken off as their count times mean^2 (integer work a chunk,
                # not a select an element), at most 14 a row
                sum_sq = Float32(0.0)
                outside = cutlass.Int32(0)
                for k in cutlass.range_constexpr(K):
                    centred = tXrD[None, None, k].load()
                    part = (centred * centred).reduce(cute.ReductionOp.ADD, init_val=Float32(0.0), reduction_profile=0)
                    if tXpW[0, 0, k]:
                        sum_sq = sum_sq + part
                    if const_expr(self.shifted):
                        if tXpW[0, 0, k]:
                            outside = outside + cutlass.max(-col[k], 0) + cutlass.max(col[k] + self.vec - N, 0)
                if const_expr(self.lead_chunk):
                    if has_extra:
                        centred_e = self._widen(rXe) - mean
                        sum_sq = sum_sq + (centred_e * centred_e).reduce(cute.ReductionOp.ADD, init_val=Float32(0.0),
                                                                         reduction_profile=0)
                        outside = outside + (col_e + self.vec - N)
                if const_expr(self.shifted):
                    # (rounding can take a constant row's sum a hair below 0)
                    sum_sq = cutlass.max(sum_sq - Float32(outside) * (mean * mean), Float32(0.0))
            else:
                sum_sq = (x * x).reduce(cute.ReductionOp.ADD, init_val=Float32(0.0), reduction_profile=0) + lead_sq
                if const_expr(ring is not None):
                    # x is in registers (its squares used it): the slot can take the next row
                    self._prefetch(args, next_row, lane, ring, slot, lead)
            sum_sq = row_reduce_sum(sum_sq, self.threads_per_row,
                                    self._reduction_buffer(parity if const_expr(not self.layer) else None))
            rstd = cute.math.rsqrt(sum_sq * inv_n + eps, fastmath=True)

            # ---- stage 5: scale, apply parameters, store (predicated) ---------
            if const_expr(weights is not None):
                tXrW, tXrB = weights, biases
            else:
                if const_expr(self.delay_w_load):
                    self._load_param(param_copy, thr_param, args.weight, tXgW, tXrW, tXpW, col, lead, N)
                    if const_expr(self.layer):
                        self._load_param(param_copy, thr_param, args.bias, tXgB, tXrB, tXpW, col, lead, N)
            if const_expr(self.layer):
                w = self._as_row_values(tXrW, tXrX)
                bias_row = self._as_row_values(tXrB, tXrX)
                if const_expr(tXrW.element_type.width == 16):  # (16-bit parameters read this row)
                    w, bias_row = w.to(Float32), bias_row.to(Float32)
            else:
                w = self._widen(cute.make_tensor(tXrW.iterator, tXrX.layout))
            if const_expr(self.gemma):
                w = w + Float32(1.0)
            # Re-expand x (and for fused add s = x + residual, in fp32: the same sum as before)
            # from the 16-bit registers instead of keeping the fp32 copy live across the
            # reduction: halves the registers held across the barrier (no spills).
            if const_expr(self.reread):  # x again (an L1 hit), its lines then the first to go
                load_chunks(tXgX, tXrX, tXpX, l2_policy("evict_first"), "evict_first")
                if const_expr(self.fused_add):
                    load_chunks(tXgR, tXrR, tXpX, l2_policy("evict_first"), "evict_first")
            x = self._widen(tXrX)
            if const_expr(self.fused_add):
                x = x + self._widen(tXrR)
                if const_expr(self.reread):
                    self._store_residual(tiled_copy, x, tXrR, tXgR, tXpO, full, col, N, row_ok)
            true_inv_scale = Float32(1.0)
            if const_expr(self.quant):
                true_inv_scale = (inv_scale_of_rows if const_expr(inv_scale_of_rows is not None)
                                  else self._inv_scale(args))
            # (prescaled: gamma and beta in registers hold it; not on the one-row path)
            prescaled = const_expr(self.prescaled and weights is not None)
            inv_scale = Float32(1.0) if prescaled else true_inv_scale
            if const_expr(self.layer):
                y = (x - mean) * rstd * w + bias_row
                if const_expr(self.quant and not prescaled):
                    y = y * inv_scale
            elif const_expr(self.silu):
                y = silu(x * rstd * w)
                if const_expr(self.quant):
                    y = y * inv_scale
            else:
                y = x * (rstd * inv_scale) * w  # RMSNorm: 1/scale folded into the row's factor
            if const_expr(self.quant):
                store_fp8(y, tXrO, self.quant_max, self.fp8_in_software)
            else:
                tXrO.store(y.to(self.out_dtype))
            self._store(out_copy, tXrO, tXgO, tXpO, full, col, N, row_ok)
            if const_expr(self.lead_chunk):
                gOe = lead_chunk_view(args.out, args.out_row_stride, args.out_head_stride)
                factor = rstd if const_expr(self.layer or self.silu) else rstd * inv_scale
                if has_extra:
                    self._lead_chunk_out(args, rXe, col_e, lead, factor, mean, gOe, true_inv_scale, lead_params)

    def _roomy_target(self) -> bool:
        """Whether the target being compiled is one (sm_90, sm_100, sm_103) where the persistent
        shifted LayerNorm, at its 128-register cap, fits the lead chunk's staged parameters and
        the first chunk's stores in pieces without spilling: sm_80/86 spilled 6 registers with
        the pieces, sm_120/121 16 with the staging (16384 columns, FP8)."""
        return BaseDSL._get_dsl().get_arch_enum().major in (9, 10)

    @cute.jit
    def _widen(self, values: cute.Tensor) -> cute.TensorSSA:
        """Row registers (16-bit) as fp32: a packed word at a time (``pack16.widen``) on shifted
        RMSNorm rows (with its 16-bit weight read in the row's frame, the DSL's conversion split
        every word first); the DSL's conversion elsewhere: a tie on aligned LayerNorm, 1-3%
        slower on its FP8 build (tune_norm_h200_session21_r9_*.json), and spills on the
        persistent shifted LayerNorm (13 registers at its 128) and FP8 RMSNorm 4096 (14 at 64).
        """
        if const_expr(not self.shifted or self.layer):
            return values.load().to(Float32)
        return widen(values)

    @cute.jit
    def _store(self, copy: cute.TiledCopy, values: cute.Tensor, dest: cute.Tensor, pred: cute.Tensor, full: list,
               col: list, n: cutlass.Int32, row_ok: cutlass.Boolean):
        """128-bit stores of the chunks ``pred`` selects; shifted rows then store the in-row
        elements of their partial end chunks one by one."""
        cute.copy(copy, values, dest, pred=pred)
        if const_expr(self.shifted):
            for k in cutlass.range_constexpr(cute.size(values, mode=[2])):
                if row_ok and not full[k] and col[k] < n:
                    # (pieces on the persistent builds, see store_ends; a thread's first chunk
                    # alone can start the row)
                    store_ends(values, dest, k, col[k], n, self.prefetch and (not self.layer or self._roomy_target()),
                               self.prefetch and not self.layer,
                               k == 0)

    @cute.jit
    def _reduction_buffer(self, parity=None):
        """A fresh static smem buffer for one cross-warp row reduction (None when a row
        fits in one warp). Each reduction gets its own, so no barrier is needed between
        a reduction's reads and the next one's writes; with a ``parity`` (0/1, the persistent
        RMSNorm's row count) the buffer is one of two that rows take in turn."""
        if const_expr(self.warps_per_row == 1):
            return None
        layout = cute.make_ordered_layout((self.rows_per_cta, self.warps_per_row), order=(1, 0))
        size = cute.cosize(layout)
        if const_expr(parity is None):
            return cute.make_tensor(cute.arch.alloc_smem(Float32, size, alignment=16), layout)
        pair = cute.arch.alloc_smem(Float32, 2 * size, alignment=16)
        return cute.make_tensor(pair + parity * size, layout)
