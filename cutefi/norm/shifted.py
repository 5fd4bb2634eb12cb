"""Device helpers of the shifted row-norm builds (rows that do not start on a 16-byte boundary).

A shifted row is read and written in the aligned 8-element chunks that cover it: chunk ``k``
of a thread holds row columns ``col .. col + 7`` with ``col = tile_col - lead`` (``lead``, 0-7,
is where the row starts in its first chunk). The elements outside ``[0, N)`` at the row's ends
are masked, stores there go element by element, and the parameters (one aligned vector for
all rows) are brought into the row's frame from two aligned chunks by a runtime word shift,
or (persistent LayerNorm) read from a copy in shared memory staged by element-in-chunk.
"""

from __future__ import annotations

import cutlass
import cutlass.cute as cute
from cutlass import Float32, Int32, Uint32


@cute.jit
def mask_outside_row(values: cute.Tensor, k: cutlass.Constexpr[int], col: Int32, n: Int32):
    """Zero the elements of chunk ``k`` of ``values`` ((8, 1), 1, K) outside columns [0, n)."""
    for i in cutlass.range_constexpr(cute.size(values, mode=[0])):
        if col + i < 0 or col + i >= n:
            values[(i, 0), 0, k] = values.element_type(0)


@cute.jit
def store_ends(values: cute.Tensor, dest: cute.Tensor, k: cutlass.Constexpr[int], col: Int32, n: Int32):
    """Store the in-row elements of chunk ``k`` one by one (a chunk at a row's end)."""
    for i in cutlass.range_constexpr(cute.size(values, mode=[0])):
        if col + i >= 0 and col + i < n:
            dest[(i, 0), 0, k] = values[(i, 0), 0, k]


@cute.jit
def shift_chunk(prev: cute.Tensor, cur: cute.Tensor, out: cute.Tensor, k: cutlass.Constexpr[int], lead: Int32):
    """``out[k] = (prev[k] ++ cur[k])[8 - lead : 16 - lead]``: two aligned chunks of a parameter
    vector seen from a row that starts ``lead`` elements into its chunk (8 elements of 16 or
    32 bits; ``lead`` 0-7 at run time)."""
    prev_words = cute.recast_tensor(prev, Uint32)
    cur_words = cute.recast_tensor(cur, Uint32)
    out_words = cute.recast_tensor(out, Uint32)
    words = cute.size(prev_words, mode=[0])  # 4 (16-bit) or 8 (32-bit) words a chunk
    per_word = 8 // words  # elements a word
    window = [prev_words[(w, 0), 0, k] for w in range(words)] + [cur_words[(w, 0), 0, k] for w in range(words)]
    begin = 8 - lead  # first element taken, 1-8
    first = begin // per_word  # its word, 0..words
    picked = []
    for t in cutlass.range_constexpr(words + 1):
        # window[first + t] for a run-time first: a chain of selects over its possible values
        value = window[t] if t < 2 * words else Uint32(0)
        for f in cutlass.range_constexpr(1, words + 1):
            candidate = window[f + t] if f + t < 2 * words else Uint32(0)
            value = Uint32(cutlass.select_(first == f, candidate, value))
        picked.append(value)
    if cutlass.const_expr(per_word == 1):
        for t in cutlass.range_constexpr(words):
            out_words[(t, 0), 0, k] = picked[t]
    else:
        odd = (begin & 1) == 1  # the first element is the high half of its word
        for t in cutlass.range_constexpr(words):
            joined = (picked[t] >> 16) | (picked[t + 1] << 16)
            out_words[(t, 0), 0, k] = Uint32(cutlass.select_(odd, joined, picked[t]))


@cute.jit
def stage_params(src: cute.Pointer, dst: cute.Pointer, n: Int32, chunks: cutlass.Constexpr[int],
                 threads: cutlass.Constexpr[int]):
    """An fp32 parameter vector (``n`` columns) into shared memory by element-in-chunk: column
    ``8 J + i`` at ``i * (chunks + 1) + J + 1``, and 0 at ``i * (chunks + 1)`` (the column
    before the row), so ``params_in_row_frame``'s reads of one ``i`` by a warp are consecutive
    words (no bank conflicts) whatever the row's lead. All threads take part; the caller
    synchronises before the reads."""
    tidx = cute.arch.thread_idx()[0]
    vector = cute.make_tensor(src, cute.make_layout(8 * chunks))
    staged = cute.make_tensor(dst, cute.make_layout(8 * (chunks + 1)))
    # loads in batches of 16, then their stores: a few memory latencies, not one a column (a
    # rolled loop cost ~40 us a CTA at 4096 columns), at 16 registers; past n: column n - 1's
    # value is loaded and 0 stored
    rounds = (8 * chunks + threads - 1) // threads
    for first in cutlass.range_constexpr(0, rounds, 16):
        batch = range(first, min(first + 16, rounds))
        loaded = [vector[cutlass.min(tidx + r * threads, n - 1)] for r in batch]
        for r, value in zip(batch, loaded):
            q = tidx + r * threads
            if q < 8 * chunks:
                staged[(q % 8) * (chunks + 1) + q // 8 + 1] = cutlass.select_(q < n, value, Float32(0.0))
    if tidx < 8:
        staged[tidx * (chunks + 1)] = Float32(0.0)


@cute.jit
def params_in_row_frame(params: cute.Pointer, first_chunk: Int32, lead: Int32, like: cute.Tensor,
                        chunks: cutlass.Constexpr[int], chunk_step: cutlass.Constexpr[int]) -> cute.TensorSSA:
    """A thread's parameter values in the row's frame from ``stage_params``' copy: element ``i``
    of its chunk ``k`` is column ``8 (first_chunk + k * chunk_step) + i - lead``, that is
    element ``i - lead`` of the same aligned chunk or ``i - lead + 8`` of the one before."""
    staged = cute.make_tensor(params, cute.make_layout(8 * (chunks + 1)))
    values = cute.make_rmem_tensor_like(like, Float32)
    for i in cutlass.range_constexpr(cute.size(like, mode=[0])):
        wraps = i < lead  # the column sits in the previous aligned chunk
        element = cutlass.select_(wraps, i + 8 - lead, i - lead)
        base = element * (chunks + 1) + 1 + first_chunk - cutlass.select_(wraps, 1, 0)
        for k in cutlass.range_constexpr(cute.size(like, mode=[2])):
            values[(i, 0), 0, k] = staged[base + k * chunk_step]
    return values.load()
