"""Batch decode for GQA groups of up to 8 q heads a kv head, with the MMAs' roles swapped: the
tile's 16 tokens are the M rows and the q heads the N columns (S^T = K·Q^T, then O^T = V^T·P^T).

``decode_mma_kernel.py`` puts the heads on M, the MMA's 16 rows, so a group of 4 leaves 12 of
them empty. Here a group pads 8 columns instead: half the MMAs, half the O accumulators (a
thread holds 2 heads of 2·head_dim / 16 head dims) and half the exponentials per KV byte, which
leaves registers for more CTAs an SM. The work item, the K/V ring, Q staging and the warps'
merge are the parent's; what changes is where a thread's values sit:
  - K (16 tokens x head_dim) is the A operand of S^T, by the same ldmatrix as the parent's B
    (FP8: the same codes widen into A's register order);
  - Q (8 heads x head_dim) is S^T's B operand, in registers for the whole item;
  - S^T holds tokens lane/4, lane/4 + 8 of heads 2 (lane % 4) + {0, 1}: a head's softmax
    reduces over the lanes of one lane % 4; ``movmatrix.trans`` turns its two 8 x 8 halves
    into P^T's B operand;
  - V^T (head_dim x 16 tokens) is the A operand of O^T (ldmatrix.trans; FP8: each 16-bit unit
    holds two head dims, which become rows of two M tiles, ``_o_layout``).
RoPE builds stay on the parent's layout (``decode.narrow_build``).
"""

from __future__ import annotations

import cutlass
import cutlass.cute as cute
from cutlass import Float32, const_expr
from cutlass.cute.nvgpu import warp

from cutefi.attention import launch
from cutefi.attention.decode_mma_kernel import BatchDecodeMmaKernel
from cutefi.cute.attention_state import NEG_INF
from cutefi.cute.fp8_widen import widen_interleaved, widen_pair
from cutefi.cute.mma_frag import rows_view, transpose_8x8

HEADS = launch.MMA_DECODE_NARROW_ROWS  # the MMAs' N
TILE = launch.MMA_DECODE_TILE  # tokens a warp takes at a time: the MMAs' M


class BatchDecodeNarrowKernel(BatchDecodeMmaKernel):
    def __init__(self, dtype: str, kv_dtype: str, head_dim: int, stages: int):
        if (dtype, kv_dtype, head_dim, stages) not in launch.MMA_DECODE_NARROW_SPECS:
            raise ValueError(f"unsupported narrow decode build {dtype!r}, kv {kv_dtype!r}, head_dim={head_dim}, "
                             f"stages={stages}")
        self.contract = launch.mma_decode_narrow_contract(dtype, kv_dtype, head_dim, stages)
        self._configure(dtype, kv_dtype, head_dim, stages, rope=False, software_fp8=False)
        self.rows = HEADS
        self.packed = True

    # ------------------------------------------------------------------ #
    # where a thread's heads sit: columns 2 (lane % 4) + {0, 1} of every C fragment
    # ------------------------------------------------------------------ #
    def _by_head(self, acc: cute.Tensor) -> cute.Tensor:
        view = rows_view(acc)  # (rows: tokens or head dims, this thread's 2 heads)
        return cute.make_tensor(view.iterator, cute.select(view.layout, mode=[1, 0]))

    def _token_offset(self, c, lane):
        return lane // 4 + 8 * c

    HEAD_LANES = (4, 8, 16)

    def _head_index(self, h, lane):
        return 2 * (lane % 4) + h

    def _head_writer(self, lane):
        return lane < 4

    def _o_layout(self):
        """(O^T row, head) -> offset in a row-major (heads, head_dim) buffer. FP8 V: row
        16 T + i (M tile T = 2 b + e) holds head dim 32 b + 2 i + e (``_widen_v``)."""
        d = self.head_dim
        if self.fp8:
            return cute.make_layout(((16, 2, d // 32), HEADS), stride=((2, 1, 32), d))
        return cute.make_layout((d, HEADS), stride=(1, d))

    # ------------------------------------------------------------------ #
    # the MMAs
    # ------------------------------------------------------------------ #
    def _mma_setup(self, q_smem, lane):
        """The swapped MMA's partitions, Q's B operands (loaded once), O^T's accumulators and
        this thread's heads' running (max, sum)."""
        tiled_mma = cute.make_tiled_mma(warp.MmaF16BF16Op(self.mma_dtype, Float32, (16, 8, 16)),
                                        permutation_mnk=(TILE, HEADS, 16))
        thr_mma = tiled_mma.get_slice(lane)
        s_q = cute.make_tensor(q_smem, cute.make_layout((HEADS, self.head_dim), stride=(self.q_stride, 1)))
        load_q = cute.make_tiled_copy_B(cute.make_copy_atom(warp.LdMatrix8x8x16bOp(False, 2), self.mma_dtype),
                                        tiled_mma)
        load_a = cute.make_tiled_copy_A(cute.make_copy_atom(warp.LdMatrix8x8x16bOp(False, 4), self.mma_dtype),
                                        tiled_mma)
        load_at = cute.make_tiled_copy_A(cute.make_copy_atom(warp.LdMatrix8x8x16bOp(True, 4), self.mma_dtype),
                                         tiled_mma)
        r_q = thr_mma.make_fragment_B(thr_mma.partition_B(s_q))
        cute.copy(load_q, load_q.get_slice(lane).partition_S(s_q), load_q.get_slice(lane).retile(r_q))
        acc_o = cute.make_rmem_tensor(thr_mma.partition_shape_C((self.head_dim, HEADS)), Float32)
        acc_o.fill(0.0)
        row_max = cute.make_rmem_tensor(cute.make_layout(2), Float32)
        row_sum = cute.make_rmem_tensor(cute.make_layout(2), Float32)  # this thread's tokens only
        row_max.fill(NEG_INF)
        row_sum.fill(0.0)
        return (tiled_mma, thr_mma, load_a, load_at, r_q), acc_o, row_max, row_sum

    @cute.jit
    def _tile_scores(self, a, mma, stage_base, tile_start, lane) -> cute.Tensor:
        """S^T = K·Q^T of the tile at ``stage_base`` (fp32, C layout: tokens x heads), in two
        accumulators (halves of the k-blocks: half-length MMA chains)."""
        tiled_mma, thr_mma, load_a, load_at, r_q = mma
        s_k = cute.make_tensor(stage_base, self._kv_layout())
        r_kin = thr_mma.make_fragment_A(thr_mma.partition_A(s_k))
        k_from = load_a.get_slice(lane).partition_S(s_k)
        k_to = load_a.get_slice(lane).retile(r_kin)
        r_k = r_kin
        if const_expr(self.fp8):
            r_k = cute.make_rmem_tensor(thr_mma.partition_shape_A((TILE, self.head_dim)), self.mma_dtype)
        acc_s = cute.make_rmem_tensor(thr_mma.partition_shape_C((TILE, HEADS)), Float32)
        acc_hi = cute.make_rmem_tensor(thr_mma.partition_shape_C((TILE, HEADS)), Float32)
        acc_s.fill(0.0)
        acc_hi.fill(0.0)
        per_load = 2 if const_expr(self.fp8) else 1  # k-blocks an ldmatrix step holds
        half = cute.size(r_q, mode=[2]) // 2
        for first in cutlass.range_constexpr(0, half, per_load):
            for block in (first, first + half):
                if const_expr(not self.fp8):
                    cute.copy(load_a, k_from[None, None, block], k_to[None, None, block])
                else:
                    cute.copy(load_a, k_from[None, None, block // 2], k_to[None, None, block // 2])
                    self._widen_k(r_kin, r_k, block // 2)
            for b in cutlass.range_constexpr(first, first + per_load):
                for k in (b, b + half):
                    acc = acc_s if k < half else acc_hi
                    cute.gemm(tiled_mma, acc, r_k[None, None, k], r_q[None, None, k], acc)
        acc_s.store(acc_s.load() + acc_hi.load())
        return acc_s

    @cute.jit
    def _tile_pv(self, mma, acc_s: cute.Tensor, stage_base, acc_o: cute.Tensor, lane):
        """O^T += V^T·P^T of the tile at ``stage_base``. P^T's B operand is S^T's C fragment
        transposed: its halves (tokens 0-7, 8-15) are 8 x 8 matrices, one movmatrix each."""
        tiled_mma, thr_mma, load_a, load_at, r_q = mma
        r_p = cute.make_fragment_like(acc_s, self.mma_dtype)
        r_p.store(acc_s.load().to(self.mma_dtype))
        p_words = self._words(r_p)  # (tokens lane/4, lane/4 + 8) x heads 2 (lane % 4) + {0, 1}
        r_pt = cute.make_rmem_tensor(thr_mma.partition_shape_B((HEADS, TILE)), self.mma_dtype)
        pt_words = self._words(r_pt)  # head lane/4 x tokens 2 (lane % 4) + {0, 1} (+ 8)
        for half in cutlass.range_constexpr(2):
            pt_words[half] = transpose_8x8(p_words[half])
        s_vt = self._v_transposed(stage_base)
        r_vin = thr_mma.make_fragment_A(thr_mma.partition_A(s_vt))
        cute.copy(load_at, load_at.get_slice(lane).partition_S(s_vt), load_at.get_slice(lane).retile(r_vin))
        r_v = r_vin
        if const_expr(self.fp8):
            r_v = cute.make_rmem_tensor(thr_mma.partition_shape_A((self.head_dim, TILE)), self.mma_dtype)
            self._widen_v(r_vin, r_v)
        cute.gemm(tiled_mma, acc_o, r_v, r_pt, acc_o)

    # ------------------------------------------------------------------ #
    # FP8 widening into A's register order: an A fragment's values are (pair, M half, k half)
    # ------------------------------------------------------------------ #
    @cute.jit
    def _widen_k(self, raw: cute.Tensor, r_k: cute.Tensor, step: cutlass.Constexpr[int]):
        """FP8 ldmatrix step ``step`` (32 head dims) -> A operands of k-blocks 2 step, 2 step + 1.
        A lane's word (token half j, v) holds dims 32 step + 16 v + 4c .. +3 of token lane/4 + 8j
        (c = lane % 4): bytes 2h, 2h + 1 are k-slots 2c + 8h, +1 of block 2 step + v (q permuted
        to match, ``_q_permuted``)."""
        raw_words = self._words(raw)
        out_words = self._words(r_k)
        for j in cutlass.range_constexpr(2):
            for v in cutlass.range_constexpr(2):
                word = raw_words[raw.layout(((0, j, v), 0, step)) // 2]
                for h in cutlass.range_constexpr(2):
                    out_words[r_k.layout(((0, j, h), 0, 2 * step + v)) // 2] = widen_pair(
                        word, 2 * h, 2 * h + 1, self.kv_format)

    @cute.jit
    def _widen_v(self, raw: cute.Tensor, r_v: cute.Tensor):
        """FP8 V^T by ldmatrix.trans (16-bit rows = pairs of head dims) -> A operands. A lane's
        word (M half m, k half k) of M block b holds unit 16 b + lane/4 + 8m (dims 2u, 2u + 1) of
        tokens 2c + 8k, +1: bytes (e, e + 2) are dim 2u + e of the two tokens, a row of M tile
        2 b + e."""
        raw_words = self._words(raw)
        out_words = self._words(r_v)
        for b in cutlass.range_constexpr(cute.size(raw, mode=[1])):
            for m in cutlass.range_constexpr(2):
                for k in cutlass.range_constexpr(2):
                    word = raw_words[raw.layout(((0, m, k), b, 0)) // 2]
                    pairs = widen_interleaved(word, self.kv_format)  # (bytes 0, 2), (1, 3)
                    for e in cutlass.range_constexpr(2):
                        out_words[r_v.layout(((0, m, k), 2 * b + e, 0)) // 2] = pairs[e]
