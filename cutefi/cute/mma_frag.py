"""Views of mma.sync (m16n8k16) fragments shared by the attention kernels.

A thread's C fragment of a warp's 16 x 8 MMA tile holds rows ``lane / 4`` and ``lane / 4 + 8``,
columns ``2 (lane % 4) + {0, 1}``; a fragment of N such tiles is ((2, 2), 1, N) (column pair,
row half; M; N). Softmax works on its rows; P, the softmaxed scores, is then the A operand of
the next MMA, whose fragment holds the same elements (two 8-column tiles a 16-wide K block).
Also the KV tile range of a prefill q tile, which the Hopper and mma.sync kernels share.
"""

from __future__ import annotations

import cutlass
import cutlass.cute as cute
from cutlass import Uint32
from cutlass._mlir.dialects import llvm
from cutlass.cutlass_dsl import T, dsl_user_op


def rows_view(acc: cute.Tensor) -> cute.Tensor:
    """An accumulator fragment ((2, 2), M, N) seen as (2 M rows, 2 N columns) of this thread."""
    layout = acc.layout  # (also an identity tensor's partition: coordinates, not registers)
    return cute.make_tensor(acc.iterator, cute.make_layout(
        ((layout.shape[0][1], layout.shape[1]), (layout.shape[0][0], layout.shape[2])),
        stride=((layout.stride[0][1], layout.stride[1]), (layout.stride[0][0], layout.stride[2]))))


def acc_as_a(layout):
    """((2, 2), 1, N) accumulators -> ((2, 2, 2), 1, N / 2) A-operand values (pairs of n-tiles)."""
    divided = cute.logical_divide(layout, (None, None, 2))
    return cute.make_layout(
        ((divided.shape[0], divided.shape[2][0]), divided.shape[1], divided.shape[2][1]),
        stride=((divided.stride[0], divided.stride[2][0]), divided.stride[1], divided.stride[2][1]))


@dsl_user_op
def transpose_8x8(word: Uint32, *, loc=None, ip=None) -> Uint32:
    """``movmatrix.m8n8.trans.b16``: a warp's 8 x 8 matrix of 16-bit values, a thread's word
    holding row lane / 4, columns 2 (lane % 4) + {0, 1}, returned transposed in the same layout
    (a C fragment's pair of columns becomes a B fragment's pair of k rows). All lanes take part."""
    value = llvm.inline_asm(T.i32(), [Uint32(word).ir_value(loc=loc, ip=ip)],
                            "movmatrix.sync.aligned.m8n8.trans.b16 $0, $1;", "=r,r", has_side_effects=False,
                            is_align_stack=False, asm_dialect=llvm.AsmDialect.AD_ATT)
    return Uint32(value)


@cute.jit
def kv_tile_range(first_row, tile_m: cutlass.Constexpr, qo_len, kv_len, causal, window_left,
                  tile_n: cutlass.Constexpr):
    """[first, end) KV tiles of ``tile_n`` keys that q rows ``first_row .. first_row + tile_m
    - 1`` (of ``qo_len``) see: causal masks aligned to the end of the KV (row r is key position
    r + kv_len - qo_len), ``window_left >= 0`` hides keys more than that before it. The plan
    (``prefill/plan.kv_tile_range``) computes the same on the host."""
    last_row = cutlass.min(first_row + tile_m, qo_len) - 1
    end = kv_len
    if causal != 0:
        end = cutlass.min(kv_len, last_row + kv_len - qo_len + 1)
    start = cutlass.Int32(0)
    if window_left >= 0:
        start = cutlass.max(first_row + kv_len - qo_len - window_left, 0)
    end_tile = cutlass.max((end + tile_n - 1) // tile_n, 0)
    return cutlass.min(start // tile_n, end_tile), end_tile
