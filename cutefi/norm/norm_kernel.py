"""Row-wise norm kernel (RMSNorm and LayerNorm families) in CuTe DSL with an author-controlled ABI.

    rms:   out[m, :] = x[m, :] * rsqrt(mean(x[m, :]^2) + eps) * w'        w' = w or (1 + w)
    layer: out[m, :] = (x[m, :] - mean) * rsqrt(var + eps) * gamma + beta  (gamma, beta fp32)

fused_add variant (in place on residual, output may alias x):

    s              = float(x[m, :]) + float(residual[m, :])     (fp32)
    residual[m, :] = round(s)
    out[m, :]      = s * rsqrt(mean(s^2) + eps) * w'              (from the fp32 s: FlashInfer's
                                                                   definition, not the rounded one)

ABI and launch geometry: ``contract`` in ``launch.py`` (the kernel reads its parameters by
name from one ``KernelArgs``; the CuTe tensors are built from the raw pointers inside).

Compile-time specialisation: kind (rms/layer), dtype (bf16/fp16), hidden-size class
``n_class`` (any N % 8 == 0, N <= n_class runs on the build), ``fused_add``, ``gemma``.
"""

from __future__ import annotations

import cutlass
import cutlass.cute as cute
from cutlass import Float32, const_expr

from cutefi.cute import args as kernel_args
from cutefi.cute.args import KernelArgs
from cutefi.cute.dtypes import cute_dtype
from cutefi.cute.pdl import wait_for_inputs
from cutefi.cute.reduce import row_reduce_sum
from cutefi.norm import launch


class RowNormKernel:
    # ------------------------------------------------------------------ #
    # 1. heuristics (compile-time), all numbers from norm_launch
    # ------------------------------------------------------------------ #
    def __init__(self, norm: str, dtype_name: str, n_class: int, fused_add: bool = False, gemma: bool = False):
        kind = norm
        self.contract = launch.contract(norm, dtype_name, n_class, fused_add, gemma)
        if kind not in launch.KINDS or (kind == "layer" and (fused_add or gemma)):
            raise ValueError(f"unsupported norm kind {kind!r} (fused_add={fused_add}, gemma={gemma})")
        self.kind = kind
        self.layer = kind == "layer"
        # layernorm's gamma and beta are fp32; rmsnorm's weight has the input dtype
        self.param_dtype = Float32 if self.layer else cute_dtype(dtype_name)
        self.dtype_name = dtype_name
        self.dtype = cute_dtype(dtype_name)
        self.n_class = n_class
        self.fused_add = fused_add
        self.gemma = gemma
        self.vec = launch.vec_elems(dtype_name)  # 8 elems = 128 bit
        self.threads_per_row = launch.threads_per_row(n_class, dtype_name, kind)
        self.num_threads = launch.block_threads(n_class, dtype_name, kind)
        self.rows_per_cta = launch.rows_per_cta(n_class, dtype_name, kind)
        self.warps_per_row = launch.warps_per_row(n_class, dtype_name, kind)
        self.chunks = launch.chunks_per_thread(n_class, dtype_name, kind)  # K
        self.tile_n = launch.tile_n(n_class, dtype_name, kind)
        self.delay_w_load = launch.delay_weight_load(n_class, dtype_name, fused_add, kind)
        assert self.num_threads % 32 == 0
        assert self.threads_per_row <= 32 or self.threads_per_row % 32 == 0

    def _tiled_copy(self, dtype) -> cute.TiledCopy:
        # 128-bit universal copy atom; threads (rows_per_cta, threads_per_row)
        # row-major, each thread owns 1 x vec contiguous elements per chunk
        # (two 128-bit accesses per chunk for fp32 parameters).
        atom = cute.make_copy_atom(cute.nvgpu.CopyUniversalOp(), dtype, num_bits_per_copy=128)
        thr_layout = cute.make_ordered_layout(
            (self.rows_per_cta, self.threads_per_row), order=(1, 0)
        )
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
        tiler = (self.rows_per_cta, self.tile_n)
        M, N, eps = args.M, args.N, args.eps

        # ---- stage 0: global views built from raw pointers ---------------
        # Row strides are multiples of 8 elements (contract) -> every 8-wide
        # chunk starts on a 16-byte boundary, enabling 128-bit accesses.
        def row_major(ptr, stride):
            stride = cute.assume(stride, divby=self.vec)
            return cute.make_tensor(ptr, cute.make_layout((M, N), stride=(stride, 1)))

        def broadcast_rows(ptr):
            # a [N] parameter seen by every row of the CTA tile (stride 0 in m)
            return cute.make_tensor(ptr, cute.make_layout((self.rows_per_cta, N), stride=(0, 1)))

        mX = row_major(args.x, args.x_row_stride)
        mO = row_major(args.out, args.out_row_stride)
        mC = cute.make_identity_tensor((M, N))  # (row, col) coordinates for predication

        # ---- stage 1: tile (one CTA = rows_per_cta rows x tile_n cols) ----
        gX = cute.local_tile(mX, tiler, (bidx, 0))
        gO = cute.local_tile(mO, tiler, (bidx, 0))
        gW = cute.local_tile(broadcast_rows(args.weight), tiler, (0, 0))
        cX = cute.local_tile(mC, tiler, (bidx, 0))

        # ---- stage 2: partition over threads -----------------------------
        tiled_copy = self._tiled_copy(self.dtype)
        param_copy = self._tiled_copy(self.param_dtype)  # same thread/value layout
        thr = tiled_copy.get_slice(tidx)
        thr_param = param_copy.get_slice(tidx)
        tXgX = thr.partition_S(gX)  # ((vec,1), 1, K)
        tXgO = thr.partition_D(gO)
        tXgW = thr_param.partition_S(gW)
        tXcX = thr.partition_S(cX)

        tXrX = cute.make_rmem_tensor_like(tXgX)
        tXrW = cute.make_rmem_tensor_like(tXgW)
        tXrO = cute.make_rmem_tensor_like(tXgO)
        tXrX.fill(0.0)
        tXrW.fill(0.0)
        if const_expr(self.layer):
            tXgB = thr_param.partition_S(cute.local_tile(broadcast_rows(args.bias), tiler, (0, 0)))
            tXrB = cute.make_rmem_tensor_like(tXgB)
            tXrB.fill(0.0)
        if const_expr(self.fused_add):
            mR = row_major(args.residual, args.residual_row_stride)
            gR = cute.local_tile(mR, tiler, (bidx, 0))
            tXgR = thr.partition_S(gR)
            tXrR = cute.make_rmem_tensor_like(tXgR)
            tXrR.fill(0.0)

        # ---- stage 3: predicates (one bool per 128-bit chunk) -------------
        # N % 8 == 0, so a chunk is either fully in or fully out of the row.
        K = const_expr(cute.size(tXgX, mode=[2]))
        pred_layout = cute.make_layout((1, 1, K), stride=(0, 0, 1))
        tXpX = cute.make_rmem_tensor(pred_layout, cutlass.Boolean)  # row & col in bounds
        # col in bounds, per parameter copy: a chunk of fp32 parameters is two 128-bit copies
        atoms_per_chunk = const_expr(self.vec * self.param_dtype.width // 128)
        tXpW = cute.make_rmem_tensor(
            cute.make_layout((atoms_per_chunk, 1, K), stride=(0, 0, 1)), cutlass.Boolean
        )
        row = tXcX[(0, 0), 0, 0][0]
        row_ok = row < M
        for k in cutlass.range_constexpr(K):
            col_ok = tXcX[(0, 0), 0, k][1] < N
            tXpW[0, 0, k] = col_ok
            tXpX[0, 0, k] = col_ok and row_ok

        # ---- stage 4: load (128-bit, predicated; OOB chunks stay 0) -------
        # with PDL the previous kernel may still be writing x (or reading out): wait here
        wait_for_inputs()
        cute.copy(tiled_copy, tXgX, tXrX, pred=tXpX)
        if const_expr(self.fused_add):
            cute.copy(tiled_copy, tXgR, tXrR, pred=tXpX)
        # weight: loaded once per thread (same columns for every row it handles).
        # Unfused rmsnorm: issued with x so its latency overlaps the reduction.
        # Fused / layernorm: deferred past the reduction (x, residual and w in
        # flight at once would exceed the 128-register budget and spill); the
        # parameters are L2-resident.
        if const_expr(not self.delay_w_load):
            cute.copy(param_copy, tXgW, tXrW, pred=tXpW)

        x = tXrX.load().to(Float32)
        if const_expr(self.fused_add):
            # residual <- round(s), s = x + residual in fp32; the rounded copy is staged in the
            # output registers (free until stage 6), so x and residual stay to rebuild s later
            x = x + tXrR.load().to(Float32)
            tXrO.store(x.to(self.dtype))
            cute.copy(tiled_copy, tXrO, tXgR, pred=tXpX)

        # ---- stage 5: row statistics --------------------------------------
        inv_n = cute.arch.rcp_approx(Float32(N))  # avoids the IEEE div slow path
        mean = Float32(0.0)
        if const_expr(self.layer):
            sum_x = x.reduce(cute.ReductionOp.ADD, init_val=Float32(0.0), reduction_profile=0)
            mean = row_reduce_sum(sum_x, self.threads_per_row, self._reduction_buffer())
            mean = mean * inv_n
            # centred values of in-row columns only: out-of-row chunks hold 0,
            # which would otherwise add mean^2 each to the variance
            tXrD = cute.make_rmem_tensor_like(tXrX, Float32)
            tXrD.store(x - mean)
            for k in cutlass.range_constexpr(K):
                if not tXpW[0, 0, k]:
                    tXrD[None, None, k].fill(0.0)
            x = tXrD.load()
        sum_sq = (x * x).reduce(cute.ReductionOp.ADD, init_val=Float32(0.0), reduction_profile=0)
        sum_sq = row_reduce_sum(sum_sq, self.threads_per_row, self._reduction_buffer())
        rstd = cute.math.rsqrt(sum_sq * inv_n + eps, fastmath=True)

        # ---- stage 6: scale, apply parameters, store (128-bit, predicated) -
        if const_expr(self.delay_w_load):
            cute.copy(param_copy, tXgW, tXrW, pred=tXpW)
        if const_expr(self.layer):
            cute.copy(param_copy, tXgB, tXrB, pred=tXpW)
        w = self._as_row_values(tXrW, tXrX).to(Float32)
        if const_expr(self.gemma):
            w = w + Float32(1.0)
        # Re-expand x (and for fused add s = x + residual, in fp32: the same sum as before)
        # from the packed 16-bit registers instead of keeping the fp32 copy live across the
        # reduction: halves the registers held across the barrier (no spills).
        x = tXrX.load().to(Float32)
        if const_expr(self.fused_add):
            x = x + tXrR.load().to(Float32)
        if const_expr(self.layer):
            y = (x - mean) * rstd * w + self._as_row_values(tXrB, tXrX)
        else:
            y = x * rstd * w
        tXrO.store(y.to(self.dtype))
        cute.copy(tiled_copy, tXrO, tXgO, pred=tXpX)

    @cute.jit
    def _as_row_values(self, params: cute.Tensor, like: cute.Tensor) -> cute.TensorSSA:
        """The parameter registers seen with the layout of the row registers: fp32 chunks are
        partitioned as (4, 2) values per 128-bit pair, the row as (8, 1); both are compact in
        the same element order, so this is a view, not a copy."""
        return cute.make_tensor(params.iterator, like.layout).load()

    @cute.jit
    def _reduction_buffer(self):
        """A fresh static smem buffer for one cross-warp row reduction (None when a row
        fits in one warp). Each reduction gets its own, so no barrier is needed between
        a reduction's reads and the next one's writes."""
        if const_expr(self.warps_per_row == 1):
            return None
        layout = cute.make_ordered_layout((self.rows_per_cta, self.warps_per_row), order=(1, 0))
        return cute.make_tensor(cute.arch.alloc_smem(Float32, cute.cosize(layout), alignment=16), layout)
