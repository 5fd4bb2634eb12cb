"""The decode kernel's last stage (a mixin of
:class:`cutefi.attention.decode_mma_kernel.BatchDecodeMmaKernel`): the four warps' states
merged through shared memory into the output (or a split request's partial state) and its
base-2 log-sum-exp, and, for a split request, the last of its CTAs to finish merging the
partial states of every part (``_merge_parts``)."""

from __future__ import annotations

import cutlass
import cutlass.cute as cute
import cutlass.pipeline as pipeline
from cutlass import Float32, Int32, Int64

from cutefi.attention import launch
from cutefi.cute import split_k
from cutefi.cute.attention_state import (NEG_INF, merge_state_finish, merge_state_init, merge_state_update,
                                         merge_states_update)

VEC = launch.VEC  # 16-bit elements of a 16-byte piece
WARPS = launch.MMA_DECODE_WARPS
LOG2E = 1.4426950408889634
MERGE_BARRIER = 1  # named barrier of a split request's merge (0 is __syncthreads)
MERGE_LOADS = 16  # parts a merging thread has in flight (MERGE_TAIL for the last few)
MERGE_TAIL = 4


class MergeStages:
    """Needs ``head_dim``, ``rows``, ``q_chunks``, ``dtype``, ``HEAD_LANES`` and the head-layout
    helpers (``_o_layout``, ``_head_index``, ``_head_writer``, ``_kv_factor``) of the kernel it
    is mixed into."""

    @cute.jit
    def _store_state(self, acc_o, row_max, row_sum, thr_mma, o_all, stats, warp_id, lane):
        """This warp's (O, max, sum) of its heads into shared memory."""
        o_mine = cute.make_tensor(o_all[warp_id, None, None].iterator, self._o_layout())
        cute.autovec_copy(acc_o, thr_mma.partition_C(o_mine))
        for h in cutlass.range_constexpr(2):
            total = row_sum[h]
            for offset in self.HEAD_LANES:
                total = total + cute.arch.shuffle_sync_bfly(total, offset=offset)
            if self._head_writer(lane):
                row = self._head_index(h, lane)
                stats[0, warp_id, row] = row_max[h]
                stats[1, warp_id, row] = total

    @cute.jit
    def _finish(self, a, smem, acc_o, row_max, row_sum, mma, tidx, warp_id, lane, request, partial_row, with_sink,
                first_head, heads_here):
        """Each warp's (O, max, sum) into shared memory, then every thread merges the four (and
        the head's sink: a logit with no value) for its 16-byte pieces of the output rows and
        writes them (and the rows' lse)."""
        d = self.head_dim
        f32 = cute.recast_ptr(smem, dtype=Float32)
        o_all = cute.make_tensor(f32, cute.make_layout((WARPS, self.rows, d), stride=(self.rows * d, d, 1)))
        stats = cute.make_tensor(f32 + WARPS * self.rows * d,
                                 cute.make_layout((2, WARPS, self.rows), stride=(WARPS * self.rows, self.rows, 1)))
        self._store_state(acc_o, row_max, row_sum, mma[1], o_all, stats, warp_id, lane)
        cute.arch.barrier()
        for task in cutlass.range_constexpr(-(-self.rows * self.q_chunks // (WARPS * 32))):
            piece = task * WARPS * 32 + tidx
            row = piece // self.q_chunks
            col = (piece % self.q_chunks) * VEC
            if row < heads_here:
                head = first_head + row
                sink = Float32(NEG_INF)
                if with_sink:
                    sink = cute.make_tensor(a.sinks, cute.make_layout(a.num_qo_heads))[head] * Float32(LOG2E)
                m = cute.arch.fmax(stats[0, 0, row], sink)
                for w in cutlass.range_constexpr(1, WARPS):
                    m = cute.arch.fmax(m, stats[0, w, row])
                ref = cutlass.select_(m == Float32(NEG_INF), Float32(0.0), m)
                acc = cute.make_rmem_tensor(cute.make_layout(VEC), Float32)
                acc.fill(0.0)
                total = cute.math.exp2(sink - ref, fastmath=True)
                for w in cutlass.range_constexpr(WARPS):
                    weight = cute.math.exp2(stats[0, w, row] - ref, fastmath=True)
                    total = total + stats[1, w, row] * weight
                    part = cute.make_tensor(o_all[w, row, None].iterator + col, cute.make_layout(VEC))
                    acc.store(acc.load() + part.load() * weight)
                nonempty = total > Float32(0.0)
                inv = cutlass.select_(nonempty, cute.arch.rcp_approx(total), Float32(0.0))
                lse = cutlass.select_(nonempty, m + cute.math.log2(total, fastmath=True), Float32(NEG_INF))
                result = cute.make_rmem_tensor(cute.make_layout(VEC), self.dtype)
                result.store((acc.load() * (inv * (a.out_scale * Float32(self._kv_factor())))).to(self.dtype))
                if partial_row < 0:
                    offset = Int64(request) * a.out_stride_batch + Int64(head) * a.out_stride_head + col
                    cute.make_tensor(a.out + cute.assume(offset, divby=VEC), cute.make_layout(VEC)).store(result.load())
                    if a.write_lse != 0 and col == 0:
                        cute.make_tensor(a.lse + Int64(request) * a.lse_stride_batch + Int64(head),
                                         cute.make_layout(1))[0] = lse
                else:
                    tmp_row = Int64(partial_row) * a.num_qo_heads + Int64(head)
                    offset = tmp_row * d + col
                    cute.make_tensor(a.tmp_v + cute.assume(offset, divby=VEC), cute.make_layout(VEC)).store(result.load())
                    if col == 0:
                        cute.make_tensor(a.tmp_s + tmp_row, cute.make_layout(1))[0] = lse
        if partial_row >= 0:  # (uniform: the CTA's work item is split or not)
            # the warps' states are read: their shared memory holds the merge's scratch and verdict
            verdict = cute.make_tensor(cute.recast_ptr(f32 + WARPS * self.rows * d, dtype=Int32), cute.make_layout(1))
            self._merge_parts(a, f32, verdict, tidx, request, first_head, heads_here)

    @cute.jit
    def _merge_loads(self, a, acc, md, first_part, parts, part, step, head, col, count: cutlass.Constexpr[int]):
        """Fold ``count`` parts (``part``, ``part + step``, ...) of a head's piece at ``col`` into
        (acc, md), their loads all issued before the math; a part past the last reads the
        first one's row at weight 0."""
        d = self.head_dim
        lses = [None] * count
        values = [None] * count
        for u in cutlass.range_constexpr(count):
            valid = part + u * step < parts
            tmp_row = Int64(first_part + cutlass.select_(valid, part + u * step, 0)) * a.num_qo_heads + Int64(head)
            lse = cute.make_tensor(a.tmp_s + tmp_row, cute.make_layout(1))[0]
            lses[u] = cutlass.select_(valid, lse, Float32(NEG_INF))
            values[u] = cute.make_tensor(a.tmp_v + cute.assume(tmp_row * d + col, divby=VEC), cute.make_layout(VEC)).load()
        merge_states_update(acc, md, lses, [value.to(Float32) for value in values])

    @cute.jit
    def _merge_parts(self, a, scratch, verdict, tidx, request, first_head, heads_here):
        """A split request's CTAs of one (kv head, row block) count themselves in its counter;
        the last to arrive merges the request's partial states (``state_indptr[request] ..``,
        in part order: the same result whichever CTA is last) for its q heads and writes the
        output and lse. A row's 16-byte pieces times the parts are spread over the CTA's
        threads: ``slices`` threads share a piece (each merging every slices-th part, MERGE_LOADS
        parts' loads in flight at a time, ``_merge_loads``), then meet through shared memory."""
        threads = WARPS * 32
        blocks = a.kv_heads * a.row_blocks
        cta, _, _ = cute.arch.block_idx()
        counter = a.counters + (Int64(request) * blocks + Int64(cta % blocks))
        indptr = cute.make_tensor(a.state_indptr, cute.make_layout(1 << 30))
        first_part = indptr[request]
        parts = indptr[request + 1] - first_part
        barrier = pipeline.NamedBarrier(barrier_id=MERGE_BARRIER, num_threads=threads)
        if split_k.arrive_last(counter, parts, verdict, tidx == 0, barrier):
            if tidx == 0:
                split_k.reset_counter(counter)
            pieces = heads_here * self.q_chunks
            slices = cutlass.max(threads // pieces, 1)
            for task in cutlass.range((pieces + threads - 1) // threads, unroll=1):
                index = task * threads + tidx
                piece = index % pieces
                part_slice = index // pieces  # (< slices where this thread has a share)
                row = piece // self.q_chunks
                col = (piece % self.q_chunks) * VEC
                head = first_head + row
                acc = cute.make_rmem_tensor(cute.make_layout(VEC), Float32)
                md = merge_state_init(acc)
                # this thread's parts: part_slice, + slices, ... (none past the slices), MERGE_LOADS
                # at a time, then the rest MERGE_TAIL at a time
                mine = cutlass.select_(part_slice < slices, (parts - part_slice + slices - 1) // slices, 0)
                whole = mine // MERGE_LOADS * MERGE_LOADS
                for group in cutlass.range(0, whole, MERGE_LOADS, unroll=1):
                    self._merge_loads(a, acc, md, first_part, parts, part_slice + group * slices, slices, head, col,
                                      MERGE_LOADS)
                for group in cutlass.range(whole, mine, MERGE_TAIL, unroll=1):
                    self._merge_loads(a, acc, md, first_part, parts, part_slice + group * slices, slices, head, col,
                                      MERGE_TAIL)
                if slices > 1:  # (then there is one task: every thread is here)
                    shared = cute.make_tensor(scratch + tidx * (VEC + 2), cute.make_layout(VEC + 2))
                    for e in cutlass.range_constexpr(VEC):
                        shared[e] = acc[e]
                    shared[VEC] = md[0]
                    shared[VEC + 1] = md[1]
                    barrier.arrive_and_wait()
                    if part_slice == 0:
                        for other in cutlass.range(1, slices, unroll=1):
                            theirs = cute.make_tensor(scratch + (other * pieces + piece) * (VEC + 2),
                                                      cute.make_layout(VEC + 2))
                            their_acc = cute.make_rmem_tensor(cute.make_layout(VEC), Float32)
                            for e in cutlass.range_constexpr(VEC):
                                their_acc[e] = theirs[e]
                            their_md = cute.make_rmem_tensor(cute.make_layout(2), Float32)
                            their_md[0] = theirs[VEC]
                            their_md[1] = theirs[VEC + 1]
                            their_values, their_lse = merge_state_finish(their_acc, their_md)
                            merge_state_update(acc, md, their_lse, their_values)
                if part_slice == 0:
                    merged, lse_out = merge_state_finish(acc, md)
                    result = cute.make_rmem_tensor(cute.make_layout(VEC), self.dtype)
                    result.store(merged.to(self.dtype))
                    offset = Int64(request) * a.out_stride_batch + Int64(head) * a.out_stride_head + col
                    cute.make_tensor(a.out + cute.assume(offset, divby=VEC), cute.make_layout(VEC)).store(result.load())
                    if a.write_lse != 0 and col == 0:
                        cute.make_tensor(a.lse + Int64(request) * a.lse_stride_batch + Int64(head),
                                         cute.make_layout(1))[0] = lse_out
