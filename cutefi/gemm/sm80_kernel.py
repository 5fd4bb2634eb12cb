"""Dense GEMM for the mma.sync family (sm_80 … sm_121a): a multistage cp.async kernel in CuTe
DSL. ABI, configurations and launch: ``launch.py`` (``sm80_contract``).

``C[l] = A[l] @ B[l] (+ bias)``, A row-major ``[M, K]``, B K-major (an nn.Linear weight's
``w.t()``) or N-major (row-major ``[K, N]``), C row-major; every size and stride at run time.
FP8 builds (e4m3 or e5m2 operands, sm_89 and newer: ``mma.sync`` m16n8k32 with FP8 inputs)
take a K-major B only, as the FP8 MMA does, and scale the fp32 sums by the two per-tensor
scales (read on the device) before the conversion.
Block-scaled FP8 builds (DeepSeek-style scales) take 128-deep K tiles, one scale block each,
promoted into the accumulators at each tile's end; grouped builds (segment GEMM, MoE experts)
take one work unit of ``cute/segments.py`` a CTA, the grid an upper bound.
A CTA computes one ``tile_m x tile_n`` tile, taken in grouped-raster order (``group_m`` M tiles
share their B tiles in L2). Stages:
  1. the tile's A and B K tiles stream into a ``stages``-deep shared-memory ring with 16-byte
     cp.async (rows past M or N zero-filled); K's remainder is the *first* K tile, shifted
     back so it ends where the second begins, so only that tile checks K;
  2. per K tile, each warp ldmatrix-loads its fragments (transposed for an N-major B) one
     16-wide K block ahead of the MMAs on the current one, while the ring refills;
  3. epilogue: bias added to the fp32 accumulators, converted to the output dtype, staged
     through shared memory (the ring, now free) and stored as 16-byte rows within M and N.
"""

from __future__ import annotations

import cutlass
import cutlass.cute as cute
from cutlass import Float32, Int32, Int64, const_expr
from cutlass.cute.nvgpu import cpasync, warp

from cutefi.cute import args as kernel_args
from cutefi.cute import block_scale, segments
from cutefi.cute.args import KernelArgs
from cutefi.cute.dtypes import cute_dtype
from cutefi.cute.mma_fp8 import MmaFP8MixedOp
from cutefi.cute.pdl import wait_for_inputs
from cutefi.cute.tile_scheduler import GroupedRaster
from cutefi.gemm import launch

VEC = 8  # 16-bit elements of a 16-byte copy (the output's)


class GemmSm80:
    # ------------------------------------------------------------------ #
    # 1. specialisation
    # ------------------------------------------------------------------ #
    def __init__(self, dtype: str, out_dtype: str, b_major: str, tile_m: int, tile_n: int, tile_k: int,
                 stages: int, warps_m: int, warps_n: int, b_dtype: str | None = None,
                 block_scaled: bool = False, grouped: bool = False) -> None:
        fp8 = dtype in launch.FP8_DTYPES
        outs = launch.DENSE_OUT_DTYPES if dtype in launch.DTYPES and not grouped else launch.OUT_DTYPES
        if (dtype not in launch.DTYPES and not fp8) or out_dtype not in outs or \
                b_major not in (("k",) if fp8 else launch.B_MAJORS) or \
                (b_dtype is not None and (not fp8 or b_dtype not in launch.FP8_DTYPES)) or \
                (block_scaled and (not fp8 or b_dtype is not None)) or (grouped and (fp8 != block_scaled)):
            raise ValueError(f"unsupported mma.sync GEMM build: {dtype} x {b_dtype or dtype} -> {out_dtype}, "
                             f"B {b_major}-major")
        self.contract = launch.sm80_contract(dtype, out_dtype, b_major, tile_m, tile_n, tile_k, stages, warps_m,
                                             warps_n, b_dtype, block_scaled, grouped)
        # block_scaled (DeepSeek-style FP8 scales, one per 128-element K block): each K tile is
        # one scale block; its MMAs sum into a scratch set, promoted into the accumulators times
        # scale_a[row, block] * scale_b[col // 128, block] (block_scale.mma_sync_promote)
        self.block_scaled = block_scaled
        # grouped: row segments of A (and out), each times its own weight (B's batch entry
        # weight_indices[s]); CTA i takes work unit i of cute/segments.py's numbering (the grid
        # is an upper bound: CTAs past the last unit exit), rows past its segment predicated off
        self.grouped = grouped
        self.config = launch.Sm80Config(tile_m, tile_n, tile_k, stages, warps_m, warps_n)
        self.dtype = cute_dtype(dtype)
        # B's element type: A's, or the other FP8 format (mixed e4m3 x e5m2, as FlashInfer takes)
        self.b_dtype = cute_dtype(b_dtype) if b_dtype else self.dtype
        self.out_dtype = cute_dtype(out_dtype)
        self.b_k_major = b_major == "k"
        self.fp8 = dtype in launch.FP8_DTYPES
        self.vec = launch.align_elems(dtype)  # operand elements of a 16-byte copy
        # the MMA: m16n8k16 on 16-bit operands, m16n8k32 on FP8 (both K-major)
        self.mma_k = 32 if self.fp8 else 16
        if block_scaled and (tile_k != block_scale.BLOCK or block_scale.BLOCK % tile_n):
            raise ValueError(f"a block-scaled build takes K tiles of {block_scale.BLOCK} and tiles within one weight "
                             f"block, got {tile_m}x{tile_n}x{tile_k}")

    @cute.jit
    def __call__(self, args: KernelArgs):
        kernel_args.launch(self.kernel, self.contract, args)

    # ---- layouts ----------------------------------------------------------
    def _ring_layout(self, rows: int, k_major: bool):
        """(rows, tile_k, stages), swizzled so 8 rows of 16-byte pieces hit 8 bank groups."""
        config = self.config
        line = 8 * self.vec  # elements of a 128-byte line
        if const_expr(k_major):
            width = min(config.tile_k, line)
            atom = cute.make_layout((8, width), stride=(width, 1))
        else:
            width = min(rows, line)
            atom = cute.make_layout((width, self.vec), stride=(1, width))
        # 16-byte pieces (vec elements, the swizzle's base) XOR-ed by row bits, 8 rows apart
        bits = min(3, (width // self.vec).bit_length() - 1)
        swizzled = cute.make_composed_layout(cute.make_swizzle(bits, self.vec.bit_length() - 1, 3), 0, atom)
        return cute.tile_to_shape(swizzled, (rows, config.tile_k, config.stages), (0, 1, 2))

    def _c_layout(self):
        """(tile_m, tile_n) row-major, rows padded by 16 bytes: the MMA's 8 rows x 4 columns of
        a store fall in 32 distinct banks, and 16-byte row pieces still line up."""
        config = self.config
        return cute.make_layout((config.tile_m, config.tile_n), stride=(config.tile_n + launch.SM80_C_PAD, 1))

    def _gmem_copy(self, atom, rows: int, k_major: bool, dtype):
        """Threads over a (rows, tile_k) tile, 16 bytes each, along its contiguous mode."""
        config = self.config
        vec = self.vec
        if const_expr(k_major):
            across = config.tile_k // vec
            threads = cute.make_layout((config.threads // across, across), stride=(across, 1))
            values = cute.make_layout((1, vec))
        else:
            across = rows // vec
            threads = cute.make_layout((across, config.threads // across), stride=(1, across))
            values = cute.make_layout((vec, 1))
        return cute.make_tiled_copy_tv(atom, threads, values)

    # ------------------------------------------------------------------ #
    # 2. the kernel
    # ------------------------------------------------------------------ #
    @cute.kernel
    def kernel(self, args: KernelArgs):
        config = self.config
        tidx, _, _ = cute.arch.thread_idx()
        linear, _, _ = cute.arch.block_idx()
        tile_m, tile_n = config.tile_m, config.tile_n
        if const_expr(self.grouped):
            prefix = cute.make_tensor(args.tile_prefix, cute.make_layout(args.groups + 1))
            if linear < prefix[args.groups]:
                m_tile, n_tile, weight, first_row, end_row = segments.find_unit(
                    prefix, args.seg_indptr, args.weight_indices, args.groups, tile_m, linear)
                # a weight index outside [0, weights) reads no weight: its segment comes out zero
                known = weight >= 0 and weight < args.batch
                weight = cutlass.select_(known, weight, 0)
                # rows of the segment inside [0, M) only: bounds are not checked on the host
                rows = cutlass.min(end_row, args.m) - first_row
                self._tile(args, m_tile, n_tile, (0, weight, 0), first_row, rows, weight, tidx,
                           cutlass.select_(known, args.n, 0), cutlass.max(-first_row, 0))
        else:
            raster = GroupedRaster((args.m + tile_m - 1) // tile_m, (args.n + tile_n - 1) // tile_n, args.batch,
                                   args.group_m)
            m_tile, n_tile, batch = raster.coords(linear)
            self._tile(args, m_tile, n_tile, (batch, batch, batch), Int32(0), args.m, Int32(0), tidx, args.n, None)

    @cute.jit
    def _tile(self, args, m_tile, n_tile, batches, first_row, rows, weight, tidx, b_rows, low):
        """One output tile: (A, B, out) batch entries ``batches``; A's and out's rows from
        ``first_row`` (a segment's), ``rows`` of them, from row ``low`` on (None: 0);
        ``weight``: B's entry (block scales); ``b_rows``: B's rows read (N, or 0: a missing
        weight, zeros)."""
        config = self.config
        tile_m, tile_n = config.tile_m, config.tile_n

        a_ring = self._ring_layout(tile_m, True)
        b_ring = self._ring_layout(tile_n, self.b_k_major)
        smem = cutlass.memory.SmemAllocator()
        s_a = smem.allocate_tensor(self.dtype, a_ring, 128)
        s_b = smem.allocate_tensor(self.b_dtype, b_ring, 128)

        # global views, (rows, K, L) and (M, N, L); strides are multiples of 16 bytes
        k = args.k
        vec = self.vec
        lda = cute.assume(args.lda, divby=vec)
        ldb = cute.assume(args.ldb, divby=vec)
        ldc = cute.assume(args.ldc, divby=VEC)
        m_a = cute.make_tensor((args.a + Int64(first_row) * lda).align(16), cute.make_layout(
            (rows, k, args.batch), stride=(lda, 1, cute.assume(args.batch_a, divby=vec))))
        b_strides = (ldb, 1) if const_expr(self.b_k_major) else (1, ldb)
        m_b = cute.make_tensor(args.b, cute.make_layout((b_rows, k, args.batch),
                                                        stride=(*b_strides, cute.assume(args.batch_b, divby=vec))))
        m_c = cute.make_tensor((args.c + Int64(first_row) * ldc).align(16), cute.make_layout(
            (rows, args.n, args.batch), stride=(ldc, 1, cute.assume(args.batch_c, divby=VEC))))

        if const_expr(self.fp8):
            mma_op = MmaFP8MixedOp(self.dtype, Float32, (16, 8, 32), self.b_dtype)
        else:
            mma_op = warp.MmaF16BF16Op(self.dtype, Float32, (16, 8, 16))
        tiled_mma = cute.make_tiled_mma(
            mma_op, cute.make_layout((config.warps_m, config.warps_n, 1)),
            permutation_mnk=(16 * config.warps_m, 16 * config.warps_n, self.mma_k))  # n16: one ldmatrix.x4 of B
        thr_mma = tiled_mma.get_slice(tidx)
        acc = cute.make_rmem_tensor(thr_mma.partition_shape_C((tile_m, tile_n)), Float32)
        acc.fill(0.0)

        wait_for_inputs()
        self._mainloop(args, m_a, m_b, s_a, s_b, tiled_mma, thr_mma, acc, m_tile, n_tile, batches, k, tidx,
                       (first_row, rows, weight, low))
        s_c = cute.make_tensor(cute.recast_ptr(s_a.iterator, dtype=self.out_dtype), self._c_layout())
        self._epilogue(args, m_c, s_c, thr_mma, acc, m_tile, n_tile, batches[2], tidx, low)

    # ------------------------------------------------------------------ #
    # 3. stages 1-2: the ring and the MMAs
    # ------------------------------------------------------------------ #
    @cute.jit
    def _mainloop(self, args, m_a, m_b, s_a, s_b, tiled_mma, thr_mma, acc, m_tile, n_tile, batches, k, tidx,
                  segment):
        config = self.config
        tile_m, tile_n, tile_k, stages = config.tile_m, config.tile_n, config.tile_k, config.stages
        batch_a, batch_b, _ = batches
        g_a = cute.local_tile(m_a[None, None, batch_a], (tile_m, tile_k), (m_tile, None))  # (bM, bK, K tiles)
        g_b = cute.local_tile(m_b[None, None, batch_b], (tile_n, tile_k), (n_tile, None))
        c_a = cute.local_tile(cute.make_identity_tensor(m_a.shape)[None, None, batch_a], (tile_m, tile_k),
                              (m_tile, None))
        c_b = cute.local_tile(cute.make_identity_tensor(m_b.shape)[None, None, batch_b], (tile_n, tile_k),
                              (n_tile, None))
        # K's remainder first: every tile moves back by it, so tile 0 starts before K = 0 (block
        # scales: K tiles are the scales' blocks from K = 0, and the last one ends past K)
        k_tiles = cute.size(g_a, mode=[2])
        residue = Int32(0) if const_expr(self.block_scaled) else k - Int32(tile_k) * k_tiles
        g_a = cute.domain_offset((0, residue, 0), g_a)
        g_b = cute.domain_offset((0, residue, 0), g_b)
        g_a = cute.make_tensor(g_a.iterator.align(16), g_a.layout)
        g_b = cute.make_tensor(g_b.iterator.align(16), g_b.layout)
        c_a = cute.domain_offset((0, residue, 0), c_a)
        c_b = cute.domain_offset((0, residue, 0), c_b)

        def cp_atom(dtype):
            return cute.make_copy_atom(cpasync.CopyG2SOp(cache_mode=cpasync.LoadCacheMode.GLOBAL), dtype,
                                       num_bits_per_copy=128)
        copy_a = self._gmem_copy(cp_atom(self.dtype), tile_m, True, self.dtype).get_slice(tidx)
        copy_b = self._gmem_copy(cp_atom(self.b_dtype), tile_n, self.b_k_major, self.b_dtype).get_slice(tidx)
        t_ga, t_sa, t_ca = copy_a.partition_S(g_a), copy_a.partition_D(s_a), copy_a.partition_S(c_a)
        t_gb, t_sb, t_cb = copy_b.partition_S(g_b), copy_b.partition_D(s_b), copy_b.partition_S(c_b)
        first_row, rows, weight, low = segment
        rows_a = self._row_predicate(t_ga, t_ca, m_a.shape[0], low)
        rows_b = self._row_predicate(t_gb, t_cb, m_b.shape[0])

        # prologue: zero the ring (predicated-off copies leave it as it is), then the first
        # stages - 1 K tiles; tile 0 only where its K is >= 0
        t_sa.fill(0)
        t_sb.fill(0)
        cute.arch.sync_threads()
        operands = ((copy_a, t_ga, t_sa, t_ca, rows_a), (copy_b, t_gb, t_sb, t_cb, rows_b))
        if const_expr(self.block_scaled):
            for stage in cutlass.range_constexpr(stages - 1):
                if stage < k_tiles:
                    self._load_k_tile(operands, stage, stage, k)
                cute.arch.cp_async_commit_group()
        else:
            for kk in cutlass.range_constexpr(cute.size(t_sa, mode=[2])):
                if cute.elem_less(Int32(-1), t_ca[0, 0, kk, 0][1]):
                    cute.copy(copy_a, t_ga[None, None, kk, 0], t_sa[None, None, kk, 0], pred=rows_a[None, None, kk])
            for kk in cutlass.range_constexpr(cute.size(t_sb, mode=[2])):
                if cute.elem_less(Int32(-1), t_cb[0, 0, kk, 0][1]):
                    cute.copy(copy_b, t_gb[None, None, kk, 0], t_sb[None, None, kk, 0], pred=rows_b[None, None, kk])
            cute.arch.cp_async_commit_group()
            for stage in cutlass.range_constexpr(1, stages - 1):
                if stage < k_tiles:
                    cute.copy(copy_a, t_ga[None, None, None, stage], t_sa[None, None, None, stage], pred=rows_a)
                    cute.copy(copy_b, t_gb[None, None, None, stage], t_sb[None, None, None, stage], pred=rows_b)
                cute.arch.cp_async_commit_group()
        sums = acc  # (block scales: the K tile's sums, promoted into acc at its end)
        if const_expr(self.block_scaled):
            sums = cute.make_fragment_like(acc)
            sums.fill(0.0)
            offsets = block_scale.mma_sync_offsets(args, thr_mma, (self.config.tile_m, self.config.tile_n),
                                                   first_row + m_tile * self.config.tile_m,
                                                   n_tile * self.config.tile_n, first_row + rows - 1,
                                                   weight * args.sb_batch if const_expr(self.grouped) else 0)

        # fragments and their ldmatrix views
        r_a = tiled_mma.make_fragment_A(thr_mma.partition_A(s_a)[None, None, None, 0])
        r_b = tiled_mma.make_fragment_B(thr_mma.partition_B(s_b)[None, None, None, 0])
        ld_a = cute.make_tiled_copy_A(cute.make_copy_atom(warp.LdMatrix8x8x16bOp(False, 4), self.dtype), tiled_mma)
        ld_b = cute.make_tiled_copy_B(cute.make_copy_atom(warp.LdMatrix8x8x16bOp(not self.b_k_major, 4), self.b_dtype),
                                      tiled_mma)
        thr_ld_a, thr_ld_b = ld_a.get_slice(tidx), ld_b.get_slice(tidx)
        s_a_ld, r_a_ld = thr_ld_a.partition_S(s_a), thr_ld_a.retile(r_a)
        s_b_ld, r_b_ld = thr_ld_b.partition_S(s_b), thr_ld_b.retile(r_b)
        k_blocks = cute.size(r_a, mode=[2])

        read = 0
        write = stages - 1
        cute.arch.cp_async_wait_group(stages - 2)
        cute.arch.sync_threads()
        cute.copy(ld_a, s_a_ld[None, None, 0, read], r_a_ld[None, None, 0])
        cute.copy(ld_b, s_b_ld[None, None, 0, read], r_b_ld[None, None, 0])
        for k_tile in range(k_tiles):
            if const_expr(self.block_scaled):
                factors = block_scale.mma_sync_load(args, offsets, k_tile)  # (in flight during the MMAs)
            for kb in cutlass.range(k_blocks, unroll_full=True):
                if kb == k_blocks - 1:  # the next K tile's stage: wait for it, move on
                    read = read + 1
                    if read == stages:
                        read = 0
                    cute.arch.cp_async_wait_group(stages - 2)
                    cute.arch.sync_threads()
                kb_next = (kb + 1) % k_blocks
                cute.copy(ld_a, s_a_ld[None, None, kb_next, read], r_a_ld[None, None, kb_next])
                cute.copy(ld_b, s_b_ld[None, None, kb_next, read], r_b_ld[None, None, kb_next])
                if kb == 0:  # refill the stage freed a K tile ago
                    fetch = k_tile + stages - 1
                    if fetch < k_tiles:
                        if const_expr(self.block_scaled):
                            self._load_k_tile(operands, fetch, write, k)
                        else:
                            cute.copy(copy_a, t_ga[None, None, None, fetch], t_sa[None, None, None, write],
                                      pred=rows_a)
                            cute.copy(copy_b, t_gb[None, None, None, fetch], t_sb[None, None, None, write],
                                      pred=rows_b)
                    cute.arch.cp_async_commit_group()
                    write = write + 1
                    if write == stages:
                        write = 0
                cute.gemm(tiled_mma, sums, r_a[None, None, kb], r_b[None, None, kb], sums)
            if const_expr(self.block_scaled):
                block_scale.mma_sync_promote(acc, sums, factors)
        cute.arch.cp_async_wait_group(0)
        cute.arch.sync_threads()

    @cute.jit
    def _load_k_tile(self, operands, fetch, write, k):
        """Block-scaled builds: K tile ``fetch`` of A and B into stage ``write``, 16-byte pieces
        past K (the last tile's) zero-filled (the stage holds an earlier tile)."""
        for copy, t_g, t_s, t_c, rows in operands:
            for kk in cutlass.range_constexpr(cute.size(t_s, mode=[2])):
                if cute.elem_less(t_c[0, 0, kk, fetch][1], k):
                    cute.copy(copy, t_g[None, None, kk, fetch], t_s[None, None, kk, write], pred=rows[None, None, kk])
                else:
                    t_s[None, None, kk, write].fill(0)

    @staticmethod
    @cute.jit
    def _row_predicate(t_g, t_c, rows, low=None):
        """One flag per 16-byte copy along the tile's rows (mode 1): inside M (or N), and from
        row ``low`` on where given (a grouped segment that starts before row 0); the same for
        every column (mode 2, stride 0)."""
        pred = cute.make_rmem_tensor(
            cute.make_layout((t_g.shape[0][1], cute.size(t_g, mode=[1]), cute.size(t_g, mode=[2])),
                             stride=(cute.size(t_g, mode=[1]), 1, 0)), cutlass.Boolean)
        for v in cutlass.range_constexpr(pred.shape[0]):
            for r in cutlass.range_constexpr(pred.shape[1]):
                row = t_c[(0, v), r, 0][0] if const_expr(cute.rank(t_c) == 3) else t_c[(0, v), r, 0, 0][0]
                if const_expr(low is None):
                    pred[v, r, 0] = cute.elem_less(row, rows)
                else:
                    pred[v, r, 0] = cute.elem_less(row, rows) and not cute.elem_less(row, low)
        return pred

    # ------------------------------------------------------------------ #
    # 4. stage 3: epilogue
    # ------------------------------------------------------------------ #
    @cute.jit
    def _epilogue(self, args, m_c, s_c, thr_mma, acc, m_tile, n_tile, batch, tidx, low):
        config = self.config
        tile_m, tile_n = config.tile_m, config.tile_n
        if args.has_bias != 0:
            bias = cute.make_tensor(args.bias, cute.make_layout(args.n))
            coords = thr_mma.partition_C(cute.make_identity_tensor((tile_m, tile_n)))
            for i in cutlass.range(cute.size(acc), unroll_full=True):
                col = cutlass.min(n_tile * tile_n + coords[i][1], args.n - 1)
                acc[i] = acc[i] + Float32(bias[col])
        if const_expr(self.fp8 and not self.block_scaled):  # the per-tensor scales, once on the fp32 sums
            scale = cute.make_tensor(args.scale_a, cute.make_layout(1))[0] * \
                cute.make_tensor(args.scale_b, cute.make_layout(1))[0]
            acc.store(acc.load() * scale)
        if const_expr(self.out_dtype.width == 32):
            self._store_pairs(m_c, thr_mma, acc, m_tile, n_tile, batch, low)
        else:
            self._store_staged(m_c, s_c, thr_mma, acc, m_tile, n_tile, batch, tidx, low)

    @cute.jit
    def _store_pairs(self, m_c, thr_mma, acc, m_tile, n_tile, batch, low):
        """fp32 out, from registers: each thread's two neighbouring columns of a row as one
        8-byte store (a quad of threads writes a row's 32-byte sector; staging the fp32 tile
        would take twice the ring's shared memory). N is a multiple of 8: a pair is whole."""
        config = self.config
        coords = thr_mma.partition_C(cute.make_identity_tensor((config.tile_m, config.tile_n)))
        first_row, first_col = m_tile * config.tile_m, n_tile * config.tile_n
        out = m_c[None, None, batch]
        for i in cutlass.range(0, cute.size(acc), 2, unroll_full=True):
            row = first_row + coords[i][0]
            col = first_col + coords[i][1]
            inside = row < m_c.shape[0] and col < m_c.shape[1]
            if const_expr(low is not None):
                inside = inside and row >= low
            if inside:
                pair = cute.make_rmem_tensor(cute.make_layout(2), Float32)
                pair[0] = acc[i]
                pair[1] = acc[i + 1]
                cute.autovec_copy(pair, cute.make_tensor((out.iterator + out.layout((row, col))).align(8),
                                                         cute.make_layout(2)))

    @cute.jit
    def _store_staged(self, m_c, s_c, thr_mma, acc, m_tile, n_tile, batch, tidx, low):
        """16-bit out: the tile through shared memory (the ring's), stored 16 bytes a thread."""
        config = self.config
        tile_m, tile_n = config.tile_m, config.tile_n
        out = cute.make_fragment_like(acc, self.out_dtype)
        out.store(acc.load().to(self.out_dtype))
        cute.autovec_copy(out, thr_mma.partition_C(s_c))
        cute.arch.sync_threads()

        store = self._gmem_copy_c().get_slice(tidx)
        g_c = cute.local_tile(m_c[None, None, batch], (tile_m, tile_n), (m_tile, n_tile))
        c_c = cute.local_tile(cute.make_identity_tensor(m_c.shape)[None, None, batch], (tile_m, tile_n),
                              (m_tile, n_tile))
        t_sc, t_gc, t_cc = store.partition_S(s_c), store.partition_D(g_c), store.partition_S(c_c)
        staged = cute.make_fragment_like(t_sc)
        cute.autovec_copy(t_sc, staged)
        rows = self._row_predicate(t_gc, t_cc, m_c.shape[0], low)  # (N is a multiple of 8: whole copies)
        for v in cutlass.range_constexpr(rows.shape[0]):
            for c in cutlass.range_constexpr(cute.size(t_gc, mode=[2])):
                if cute.elem_less(t_cc[(0, v), 0, c][1], m_c.shape[1]):
                    cute.copy(store, staged[None, None, c], t_gc[None, None, c], pred=rows[None, None, c])

    def _gmem_copy_c(self):
        """Threads over the (tile_m, tile_n) output tile, 16 bytes of a row each."""
        config = self.config
        atom = cute.make_copy_atom(cute.nvgpu.CopyUniversalOp(), self.out_dtype, num_bits_per_copy=128)
        across = config.tile_n // VEC
        threads = cute.make_layout((config.threads // across, across), stride=(across, 1))
        return cute.make_tiled_copy_tv(atom, threads, cute.make_layout((1, VEC)))
