"""Views of Hopper wgmma fragments shared by the warpgroup kernels.

A thread's accumulator fragment of a warpgroup's 64 x N wgmma is ((2, 2, N/8), M, N): column
pair, row half (rows ``lane / 4`` and ``+ 8`` of its warp's 16), 8-column group. Softmax works on
its rows; P, the softmaxed scores, is then the register A operand of the next wgmma, whose
fragment holds the same elements. B operands stored row-major are read MN-major through a
transposed view.
"""

from __future__ import annotations

import cutlass.cute as cute


def transposed(tensor: cute.Tensor) -> cute.Tensor:
    """(rows, cols, stages) seen as (cols, rows, stages): V's tile as the MN-major B of P V."""
    shape = (tensor.shape[1], tensor.shape[0], *tensor.shape[2:])
    return cute.composition(tensor, cute.make_ordered_layout(shape, order=(1, 0, *range(2, cute.rank(tensor)))))


def rows_view(tensor: cute.Tensor) -> cute.Tensor:
    """A wgmma accumulator fragment ((2, 2, N/8), M, N) seen as (rows, columns) of this thread:
    ((2, M), (2, N/8, N)); the four threads of a quad hold the same rows."""
    layout = tensor.layout
    return cute.make_tensor(tensor.iterator, cute.make_layout(
        ((layout.shape[0][1], layout.shape[1]), (layout.shape[0][0], layout.shape[0][2], layout.shape[2])),
        stride=((layout.stride[0][1], layout.stride[1]), (layout.stride[0][0], layout.stride[0][2], layout.stride[2]))))


def acc_as_a(layout):
    """((2, 2, N/8), 1, 1) accumulators -> ((2, 2, 2), 1, N/16) A-operand values: a thread
    holds the same elements of P as of S, two 8-column groups per K block."""
    divided = cute.logical_divide(layout, ((None, None, 2), None, None))
    return cute.make_layout(
        ((divided.shape[0][0], divided.shape[0][1], divided.shape[0][2][0]), divided.shape[1],
         (divided.shape[0][2][1], divided.shape[2])),
        stride=((divided.stride[0][0], divided.stride[0][1], divided.stride[0][2][0]), divided.stride[1],
                (divided.stride[0][2][1], divided.stride[2])))
