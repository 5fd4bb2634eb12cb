"""Decode-sized dense GEMM (M <= 16 tokens, B K-major) on mma.sync m16n8k16, in CuTe DSL, for
every target of the mma.sync family. ABI, configurations and launch: ``launch.py``
(``skinny_contract``); when it is chosen: ``plan.py``.

With a handful of tokens the work is reading the weight once, so the weight goes from DRAM
straight into registers, in the MMA's A operand ("swap AB": weight rows are the MMA's M,
tokens its N). The dot product over K does not care in which order K is summed, so a lane
loads 16 contiguous bytes of a row and feeds them to two MMAs: of a 32-wide K chunk, lane
(r = lane / 4, q = lane % 4) loads elements 8q..8q+7 of weight rows r and r + 8 and of token
r, and MMA h takes elements 8q + 4h .. 8q + 4h + 3 as the fragment's K positions 2q, 2q + 1,
2q + 8, 2q + 9: the same permutation of K in A and B, so no shuffles, no shared memory, and
whole 16-byte loads of both. Stages of a CTA (``16 * row_tiles * row_groups`` weight rows):
  1. the warps form ``row_groups`` groups of ``16 * row_tiles`` rows; the warps of a group
     (and the ``splits`` CTAs along grid y) take interleaved K steps of ``32 * unroll``, so
     the warps loading one K step (one per group) read the same tokens: one of them from L2,
     the others from L1. A step's 16-byte loads are issued while the step before is
     multiplied (rows and tokens clamped into range: what they feed is never stored); the
     last, partial step loads zeros past K;
  2. the warps' fp32 sums meet in shared memory;
  3. with ``splits`` > 1 the CTAs of a row block meet through the workspace
     (:mod:`cutefi.cute.split_k`); the CTA that sums adds the bias, converts, and stores
     the rows below N of the tokens below M.
"""

from __future__ import annotations

import cutlass
import cutlass.cute as cute
import cutlass.pipeline as pipeline
from cutlass import Float32, Int32, Int64, const_expr
from cutlass.cute.nvgpu import warp

from cutefi.cute import args as kernel_args
from cutefi.cute import split_k
from cutefi.cute.args import KernelArgs
from cutefi.cute.dtypes import cute_dtype
from cutefi.cute.pdl import wait_for_inputs
from cutefi.gemm import launch

VEC = 8  # 16-bit elements of a 16-byte load
MEET_BARRIER = 1  # named barrier of the split-K meeting (0 is __syncthreads)


class GemmSkinny:
    # ------------------------------------------------------------------ #
    # 1. specialisation
    # ------------------------------------------------------------------ #
    def __init__(self, dtype: str, out_dtype: str, token_tiles: int, row_tiles: int, warps: int,
                 unroll: int, row_groups: int = 1) -> None:
        if dtype not in launch.DTYPES or out_dtype not in launch.DENSE_OUT_DTYPES:
            raise ValueError(f"unsupported skinny GEMM build: {dtype} -> {out_dtype}")
        self.contract = launch.skinny_contract(dtype, out_dtype, token_tiles, row_tiles, warps, unroll, row_groups)
        self.config = launch.SkinnyConfig(token_tiles, row_tiles, warps, unroll, row_groups)
        self.dtype = cute_dtype(dtype)
        self.out_dtype = cute_dtype(out_dtype)

    @cute.jit
    def __call__(self, args: KernelArgs):
        kernel_args.launch(self.kernel, self.contract, args)

    # ------------------------------------------------------------------ #
    # 2. the kernel
    # ------------------------------------------------------------------ #
    @cute.kernel
    def kernel(self, args: KernelArgs):
        config = self.config
        tidx, _, _ = cute.arch.thread_idx()
        block, split, _ = cute.arch.block_idx()
        warp_id = cute.arch.make_warp_uniform(cute.arch.warp_idx())
        lane = tidx % 32

        @cute.struct
        class SharedStorage:
            verdict: cute.struct.MemRange[Int32, 1]
            sums: cute.struct.Align[cute.struct.MemRange[Float32, config.partial_elems * config.k_groups], 16]

        storage = cutlass.memory.SmemAllocator().allocate(SharedStorage)
        # (element, K group): lanes contiguous, so each warp's writes are conflict-free
        sums = storage.sums.get_tensor(cute.make_layout((config.partial_elems, config.k_groups)))
        verdict = storage.verdict.get_tensor(cute.make_layout(1))

        tiled_mma = cute.make_tiled_mma(warp.MmaF16BF16Op(self.dtype, Float32, (16, 8, 16)))
        thr_mma = tiled_mma.get_slice(lane)
        acc = [[cute.make_rmem_tensor(thr_mma.partition_shape_C((16, 8)), Float32)
                for _ in range(config.token_tiles)] for _ in range(config.row_tiles)]
        for t in cutlass.range_constexpr(config.row_tiles):
            for j in cutlass.range_constexpr(config.token_tiles):
                acc[t][j].fill(0.0)

        wait_for_inputs()
        # warps of one K group (same K steps, so the same tokens) take consecutive row groups
        row_group = warp_id % config.row_groups
        k_group = warp_id // config.row_groups
        self._mainloop(args, tiled_mma, thr_mma, acc, block, split, row_group, k_group, lane)
        self._meet_warps(args, sums, acc, row_group, k_group, lane)
        cute.arch.barrier()
        self._finish(args, sums, verdict, block, split, tidx)

    # ------------------------------------------------------------------ #
    # 3. stage 1: K steps
    # ------------------------------------------------------------------ #
    @cute.jit
    def _mainloop(self, args, tiled_mma, thr_mma, acc, block, split, row_group, k_group, lane):
        config = self.config
        r = lane // 4
        q = lane % 4
        lda = cute.assume(args.lda, divby=VEC)
        ldb = cute.assume(args.ldb, divby=VEC)
        k = cute.assume(args.k, divby=VEC)
        weight = cute.make_tensor(args.b, cute.make_layout((args.n, k), stride=(ldb, 1)))  # [N, K]
        tokens = cute.make_tensor(args.a, cute.make_layout((args.m, k), stride=(lda, 1)))  # [M, K]
        # rows and tokens past the end are clamped in: their products are never stored
        first_row = block * config.rows + row_group * 16 * config.row_tiles + r
        rows = [cutlass.min(first_row + 8 * h, args.n - 1) for h in range(2 * config.row_tiles)]
        toks = [cutlass.min(8 * j + r, args.m - 1) for j in range(config.token_tiles)]

        # (8 elements, row h of the tile's pair, row tile, chunk) and (8, token tile, chunk):
        # the step being multiplied and the next one, loading meanwhile
        w_shape = cute.make_layout((VEC, 2, config.row_tiles, config.unroll))
        x_shape = cute.make_layout((VEC, config.token_tiles, config.unroll))
        w_regs, w_next = (cute.make_rmem_tensor(w_shape, self.dtype) for _ in range(2))
        x_regs, x_next = (cute.make_rmem_tensor(x_shape, self.dtype) for _ in range(2))
        frags = (cute.make_rmem_tensor(thr_mma.partition_shape_A((16, 16)), self.dtype),
                 cute.make_rmem_tensor(thr_mma.partition_shape_B((8, 16)), self.dtype))
        load_w = cute.make_copy_atom(cute.nvgpu.CopyG2ROp(), self.dtype, num_bits_per_copy=128,
                                     l1c_evict_priority=cute.nvgpu.CacheEvictionPriority.NO_ALLOCATE)
        load_x = cute.make_copy_atom(cute.nvgpu.CopyG2ROp(), self.dtype, num_bits_per_copy=128, invariant=True)
        loads = (weight, tokens, rows, toks, load_w, load_x, w_next, x_next)

        # one step ahead: the next step's loads are in flight while this one's MMAs run (left
        # to itself the compiler interleaves loads and MMAs and keeps a few loads in flight)
        workers = args.splits * config.k_groups
        worker = split * config.k_groups + k_group
        full_steps = k // config.step_k
        if worker < full_steps:
            self._load_step(loads, worker * config.step_k, q, k, False)
        for step in cutlass.range(worker, full_steps, workers, unroll=1):
            w_regs.store(w_next.load())
            x_regs.store(x_next.load())
            if step + workers < full_steps:
                self._load_step(loads, (step + workers) * config.step_k, q, k, False)
            self._mma_step(tiled_mma, frags, acc, w_regs, x_regs)
        if k % config.step_k != 0 and worker == full_steps % workers:
            self._load_step(loads, full_steps * config.step_k, q, k, True)
            self._mma_step(tiled_mma, frags, acc, w_next, x_next)

    @cute.jit
    def _load_step(self, loads, first_k, q, k, partial: cutlass.Constexpr):
        """Issue every 16-byte load of one K step (zeros past K when ``partial``)."""
        weight, tokens, rows, toks, load_w, load_x, w_regs, x_regs = loads
        config = self.config
        if const_expr(partial):
            w_regs.fill(0.0)
            x_regs.fill(0.0)
        for u in cutlass.range_constexpr(config.unroll):
            piece = (first_k + launch.SKINNY_CHUNK_K * u) // VEC + q
            inside = True
            if const_expr(partial):
                inside = piece * VEC < k
            if inside:
                for t in cutlass.range_constexpr(config.row_tiles):
                    for h in cutlass.range_constexpr(2):
                        src = cute.local_tile(weight[rows[2 * t + h], None], (VEC,), (piece,))
                        cute.copy(load_w, src, w_regs[None, h, t, u])
                for j in cutlass.range_constexpr(config.token_tiles):
                    src = cute.local_tile(tokens[toks[j], None], (VEC,), (piece,))
                    cute.copy(load_x, src, x_regs[None, j, u])

    @cute.jit
    def _mma_step(self, tiled_mma, frags, acc, w_regs, x_regs):
        """Two MMAs per chunk, row tile and token tile (see the module's K permutation)."""
        config = self.config
        a_frag, b_frag = frags
        for u in cutlass.range_constexpr(config.unroll):
            for half in cutlass.range_constexpr(2):
                base = 4 * half
                for t in cutlass.range_constexpr(config.row_tiles):
                    # fragment order: (r, 2q), (r, 2q+1), (r+8, 2q), (r+8, 2q+1), then K + 8
                    for i in cutlass.range_constexpr(8):
                        a_frag[i] = w_regs[base + (i % 2) + 2 * (i // 4), (i // 2) % 2, t, u]
                    for j in cutlass.range_constexpr(config.token_tiles):
                        for i in cutlass.range_constexpr(4):
                            b_frag[i] = x_regs[base + i, j, u]
                        cute.gemm(tiled_mma, acc[t][j], a_frag, b_frag, acc[t][j])

    # ------------------------------------------------------------------ #
    # 4. stages 2-3: the warps meet, the splits meet, the store
    # ------------------------------------------------------------------ #
    @cute.jit
    def _meet_warps(self, args, sums, acc, row_group, k_group, lane):
        """Element row_group * group_elems + lane + 32 * (c + 4 * (t + row_tiles * j)), column k_group."""
        config = self.config
        for j in cutlass.range_constexpr(config.token_tiles):
            for t in cutlass.range_constexpr(config.row_tiles):
                for c in cutlass.range_constexpr(4):
                    e = row_group * config.group_elems + lane + 32 * (c + 4 * (t + config.row_tiles * j))
                    sums[e, k_group] = acc[t][j][c]

    @cute.jit
    def _finish(self, args, sums, verdict, block, split, tidx):
        config = self.config
        threads = 32 * config.warps
        per_thread = (config.partial_elems + threads - 1) // threads
        totals = cute.make_rmem_tensor(cute.make_layout(per_thread), Float32)
        for p in cutlass.range_constexpr(per_thread):
            e = tidx + threads * p
            totals[p] = Float32(0.0)
            if e < config.partial_elems:
                for g in cutlass.range_constexpr(config.k_groups):
                    totals[p] = totals[p] + sums[e, g]
        store = True
        if args.splits > 1:
            store = self._meet_splits(args, totals, verdict, block, split, tidx)
        if store:
            out = cute.make_tensor(args.c, cute.make_layout((args.m, args.n), stride=(args.ldc, 1)))
            bias = cute.make_tensor(args.bias, cute.make_layout(args.n))
            for p in cutlass.range_constexpr(per_thread):
                e = tidx + threads * p
                group = e // config.group_elems
                lane = e % 32
                c = (e // 32) % 4
                tile = (e % config.group_elems) // 128
                row = (block * config.rows + group * 16 * config.row_tiles + 16 * (tile % config.row_tiles)
                       + lane // 4 + 8 * (c // 2))
                token = 8 * (tile // config.row_tiles) + 2 * (lane % 4) + c % 2
                if e < config.partial_elems and row < args.n and token < args.m:
                    value = totals[p]
                    if args.has_bias != 0:
                        value = value + Float32(bias[row])
                    out[token, row] = value.to(self.out_dtype)

    @cute.jit
    def _meet_splits(self, args, totals, verdict, block, split, tidx) -> cutlass.Boolean:
        """This CTA's sums to its workspace slot; the last split of the row block to arrive
        adds up all the slots and returns True."""
        config = self.config
        threads = 32 * config.warps
        per_thread = cute.size(totals)
        slot_elems = config.partial_elems
        mine = self._slot(args, block, split)
        for p in cutlass.range_constexpr(per_thread):
            e = tidx + threads * p
            if e < slot_elems:
                mine[e] = totals[p]
        barrier = pipeline.NamedBarrier(barrier_id=MEET_BARRIER, num_threads=threads)
        last = split_k.arrive_last(args.counters + block, args.splits, verdict, tidx == 0, barrier)
        if last:
            # every split's slot in split order (this one's too): the same sums whichever arrives last
            for p in cutlass.range_constexpr(per_thread):
                totals[p] = Float32(0.0)
            for which in cutlass.range(args.splits, unroll=1):
                theirs = self._slot(args, block, which)
                for p in cutlass.range_constexpr(per_thread):
                    e = tidx + threads * p
                    if e < slot_elems:
                        totals[p] = totals[p] + theirs[e]
            if tidx == 0:
                split_k.reset_counter(args.counters + block)
        return last

    def _slot(self, args, block, split) -> cute.Tensor:
        """The workspace slot of one split of one row block: fp32, in the CTA's element order."""
        elems = self.config.partial_elems
        offset = (Int64(block) * args.splits + split) * elems
        return cute.make_tensor(args.workspace + offset, cute.make_layout(elems))
