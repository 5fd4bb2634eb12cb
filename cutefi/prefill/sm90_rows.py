"""The Hopper prefill consumer's per-row stages (a mixin of
:class:`cutefi.prefill.sm90_kernel.PrefillSm90`): the online softmax of a KV tile on a thread's
two accumulator rows, and the epilogue that normalises O and stores it with the rows' lse.

A consumer thread holds two rows of the warpgroup's 64 (the wgmma accumulator layout); a row's
values are spread over the quad of threads that share it, so row reductions end in two
butterfly shuffles.
"""

from __future__ import annotations

import cutlass
import cutlass.cute as cute
from cutlass import Float32, Int32, Int64, const_expr

from cutefi.cute.attention_state import finish_row, head_sink
from cutefi.cute.exp2_fma import exp2_fma
from cutefi.cute.wgmma_frag import rows_view
from cutefi.prefill import launch

CHAINS = 4  # independent partial reductions a row in the softmax
RESCALE_SLACK = 8.0  # how far (base 2) a row's maximum may outgrow its softmax reference
NEG_INF = float("-inf")


class RowStages:
    """Needs ``tile_n``, ``head_dim``, ``lazy_rescale`` and ``dtype`` of the kernel it is mixed into."""

    @cute.jit
    def _softmax(self, args, acc_s, coord_s, row_max, row_sum, rescale, mult, first_row, first_col, qo_len, kv_len,
                 every: cutlass.Constexpr[int]):
        """The online softmax of one KV tile on this thread's two rows: scores masked where the
        tile needs it, each row's new maximum (shared by the quad of threads holding the row),
        P = 2^(s * mult - max * mult) in place of S (every ``every``-th column's on the FMA
        pipe, ``launch.EXP2_ON_FMA``; 0: none), the rows' running sums (per thread; summed
        over the quad at the end), and in ``rescale`` the factor O's rows take.
        ``row_max`` is the reference the exponentials take: a row's maximum, or (lazy
        rescale) up to ``RESCALE_SLACK / mult`` below it (1 in ``rescale``)."""
        s_rows = rows_view(acc_s)
        columns = cute.size(s_rows, mode=[1])
        if args.cap_scale != Float32(0.0):
            for r in cutlass.range_constexpr(2):
                for c in cutlass.range_constexpr(columns):
                    s_rows[r, c] = args.cap_scale * cute.math.tanh(s_rows[r, c] * args.q_mult, fastmath=True)
        shift = kv_len - qo_len  # (q row r is key position r + shift)
        # a mask where some key of the tile is past the end, after a row's diagonal, or before
        # a row's window (the tile's rows span first_row .. first_row + TILE_M - 1)
        needs_mask = first_col + self.tile_n > kv_len
        if args.causal != 0:
            needs_mask = needs_mask or first_col + self.tile_n - 1 > first_row + shift
        if args.window_left >= 0:
            needs_mask = needs_mask or first_col < first_row + launch.TILE_M - 1 + shift - args.window_left
        if needs_mask:
            for r in cutlass.range_constexpr(2):
                row = first_row + coord_s[r, 0][0]
                high = kv_len  # keys [low, high) are visible to the row
                if args.causal != 0:
                    high = cutlass.min(high, row + shift + 1)
                low = Int32(0)
                if args.window_left >= 0:
                    low = row + shift - args.window_left
                for c in cutlass.range_constexpr(columns):
                    col = first_col + coord_s[r, c][1]
                    s_rows[r, c] = cutlass.select_(col < high, s_rows[r, c], Float32(NEG_INF))
                    s_rows[r, c] = cutlass.select_(col >= low, s_rows[r, c], Float32(NEG_INF))
        # (the reductions run as CHAINS independent chains a row and both rows side by side:
        # a single chain of dependent fmax / fadd would keep the warpgroup busy longer than the
        # other warpgroup's GEMMs take, leaving the tensor cores idle)
        tile_max = [[s_rows[r, c] for c in range(CHAINS)] for r in range(2)]
        for c in cutlass.range_constexpr(CHAINS, columns):
            for r in cutlass.range_constexpr(2):
                tile_max[r][c % CHAINS] = cute.arch.fmax(tile_max[r][c % CHAINS], s_rows[r, c])
        refs = []
        for r in cutlass.range_constexpr(2):
            m = _tree(tile_max[r], cute.arch.fmax)
            m = cute.arch.fmax(m, cute.arch.shuffle_sync_bfly(m, offset=1))
            m = cute.arch.fmax(m, cute.arch.shuffle_sync_bfly(m, offset=2))
            new_max = cute.arch.fmax(row_max[r], m)
            # lazy: the reference moves only when the maximum grew by more than RESCALE_SLACK
            # (base 2): P stays below 2^RESCALE_SLACK and O skips its rescale (FlashAttention-4's
            # trick; -inf to -inf is NaN: no move)
            if const_expr(self.lazy_rescale):
                grows = (new_max - row_max[r]) * mult > Float32(RESCALE_SLACK)
                kept = cutlass.select_(grows, new_max, row_max[r])
                # 0 while every key so far is masked: 2^(-inf - 0) = 0, never NaN
                ref = cutlass.select_(kept == Float32(NEG_INF), Float32(0.0), kept * mult)
                rescale[r] = cutlass.select_(grows, cute.math.exp2(row_max[r] * mult - ref, fastmath=True),
                                             Float32(1.0))
                row_max[r] = kept
            else:
                ref = cutlass.select_(new_max == Float32(NEG_INF), Float32(0.0), new_max * mult)
                rescale[r] = cute.math.exp2(row_max[r] * mult - ref, fastmath=True)
                row_max[r] = new_max
            refs.append(ref)
        totals = _exponentials(s_rows, refs, mult, every)
        for r in cutlass.range_constexpr(2):
            row_sum[r] = row_sum[r] * rescale[r] + totals[r]

    @cute.jit
    def _epilogue(self, args, acc_o, coord_o, row_max, row_sum, mult, q_begin, qo_len, first_row, head):
        """O / rowsum into ``out`` (two elements a store) and the rows' base-2 lse, for the rows
        before the request's end (the head's sink, if any, in the denominator); rows with
        nothing to see get 0 and -inf."""
        o_rows = rows_view(acc_o)
        coord_rows = rows_view(coord_o)
        lse = cute.make_rmem_tensor(cute.make_layout(2), Float32)
        inv = cute.make_rmem_tensor(cute.make_layout(2), Float32)
        sink = head_sink(args.sinks, args.heads, head, args.has_sinks)  # (a logit with no value)
        for r in cutlass.range_constexpr(2):
            total = row_sum[r]
            total = total + cute.arch.shuffle_sync_bfly(total, offset=1)
            total = total + cute.arch.shuffle_sync_bfly(total, offset=2)
            inv[r], lse[r] = finish_row(total, row_max[r] * mult, sink)
            inv[r] = inv[r] * args.out_scale  # (FlashInfer's v_scale)
        head_offset = Int64(head) * args.out_stride_head
        columns = cute.size(o_rows, mode=[1])
        # (a thread's columns of a row: pairs 8 apart from its first, 2 * (lane % 4): the
        # wgmma accumulator layout; the stores then take one base address a row)
        values = cute.make_rmem_tensor(cute.make_layout((2, columns // 2)), self.dtype)
        for r in cutlass.range_constexpr(2):
            row = first_row + coord_rows[r, 0][0]
            if row < qo_len:
                token = Int64(q_begin + row)
                for c in cutlass.range_constexpr(columns):
                    # (O is read, never written: the next unit's S may be in flight, and ptxas
                    # serialises every wgmma if an accumulator is written by other code then)
                    values[c % 2, c // 2] = (o_rows[r, c] * inv[r]).to(self.dtype)
                start = cute.assume(token * args.out_stride_token + head_offset + coord_rows[r, 0][1], divby=2)
                cute.autovec_copy(values, cute.make_tensor(args.out + start, cute.make_layout(
                    (2, columns // 2), stride=(1, 8))))
                if args.write_lse != 0 and coord_rows[r, 0][1] == 0:
                    lse_at = token * args.lse_stride_token + Int64(head) * args.lse_stride_head
                    cute.make_tensor(args.lse + lse_at, cute.make_layout(1))[0] = lse[r]


@cute.jit
def scale_rows(acc: cute.Tensor, factors: cute.Tensor):
    """Each of this thread's two accumulator rows times its factor."""
    rows = rows_view(acc)
    for r in cutlass.range_constexpr(2):
        for c in cutlass.range_constexpr(cute.size(rows, mode=[1])):
            rows[r, c] = rows[r, c] * factors[r]


@cute.jit
def _exponentials(s_rows: cute.Tensor, refs: list, mult: Float32, every: cutlass.Constexpr[int]) -> tuple:
    """P = 2^(s * mult - ref) in place of the scores of a thread's two rows (every ``every``-th
    column on the FMA pipe, ``exp2_fma``; 0: none); returns the rows' sums over this thread's
    columns."""
    sums = [[Float32(0.0)] * CHAINS for _ in range(2)]
    for c in cutlass.range_constexpr(cute.size(s_rows, mode=[1])):
        for r in cutlass.range_constexpr(2):
            p = Float32(0.0)
            if const_expr(c % max(every, 1) == every - 1):
                p = exp2_fma(s_rows[r, c] * mult - refs[r])
            else:
                p = cute.math.exp2(s_rows[r, c] * mult - refs[r], fastmath=True)
            s_rows[r, c] = p
            sums[r][c % CHAINS] = sums[r][c % CHAINS] + p
    return tuple(_tree(sums[r], lambda a, b: a + b) for r in range(2))


def _tree(values: list, combine):
    """``combine`` over ``values`` pairwise (a tree: log2 steps of dependent operations)."""
    while len(values) > 1:
        values = [combine(values[i], values[i + 1]) if i + 1 < len(values) else values[i]
                  for i in range(0, len(values), 2)]
    return values[0]
