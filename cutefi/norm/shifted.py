"""Device helpers of the shifted row-norm builds (rows that do not start on a 16-byte boundary).

A shifted row is read and written in the aligned 8-element chunks that cover it: chunk ``k``
of a thread holds row columns ``col .. col + 7`` with ``col = tile_col - lead`` (``lead``, 0-7,
is where the row starts in its first chunk). The elements outside ``[0, N)`` at the row's ends
are masked, stores there go element by element, and the parameters (one aligned vector for
all rows) are read in the row's frame: 16-bit ones as 32-bit words joined by a byte permute,
fp32 ones an element at a time (the persistent LayerNorm once for all the rows of a thread,
which share a lead).
"""

from __future__ import annotations

import cutlass
import cutlass.cute as cute
from cutlass import Int32, Uint8, Uint16, Uint32, const_expr

from cutefi.cute.pack16 import byte_perm


@cute.jit
def mask_words_outside_row(values: cute.Tensor, k: cutlass.Constexpr[int], col: Int32, n: Int32):
    """Zero the elements of chunk ``k`` of 16-bit ``values`` ((8, 1), 1, K) outside columns
    [0, n), one AND a packed word."""
    words = cute.recast_tensor(values, Uint32)
    for w in cutlass.range_constexpr(cute.size(words, mode=[0])):
        low, high = col + 2 * w, col + 2 * w + 1
        keep = (cutlass.select_(low >= 0 and low < n, Uint32(0x0000FFFF), Uint32(0))
                | cutlass.select_(high >= 0 and high < n, Uint32(0xFFFF0000), Uint32(0)))
        words[(w, 0), 0, k] = words[(w, 0), 0, k] & keep


@cute.jit
def store_ends(values: cute.Tensor, dest: cute.Tensor, k: cutlass.Constexpr[int], col: Int32, n: Int32):
    """Store the in-row elements of chunk ``k`` one by one (a chunk at a row's end), each taken
    from its packed word: element reads would split every register of ``values`` (16- or
    8-bit) into its parts first, for the whole chunk loop."""
    width = const_expr(values.element_type.width)
    narrow = Uint16 if const_expr(width == 16) else Uint8
    words = cute.recast_tensor(values, Uint32)
    dest_bits = cute.recast_tensor(dest, narrow)
    per_word = 32 // width
    for i in cutlass.range_constexpr(cute.size(values, mode=[0])):
        if col + i >= 0 and col + i < n:
            word = words[(i // per_word, 0), 0, k]
            dest_bits[(i, 0), 0, k] = narrow(word >> (width * (i % per_word)))


@cute.jit
def params16_in_row_frame(ptr: cute.Pointer, values: cute.Tensor, col: list, lead: Int32, n: Int32,
                          n_class: cutlass.Constexpr[int]):
    """A 16-bit parameter vector in the row's frame: element ``i`` of chunk ``k`` of ``values``
    ((8, 1), 1, K) is ``p[col[k] + i]`` (0 or whatever the vector's chunk holds outside [0, n):
    never stored). Read as 32-bit words from the even column at or before ``col[k]`` (``col``
    is odd exactly when ``lead`` is), five words joined a pair at a time by one byte permute
    whose selector (run-time) takes either the words as they are or their middle halves: the
    memory system does the shift, with no selects over the possible leads."""
    words = cute.recast_tensor(values, Uint32)
    source = cute.make_tensor(cute.recast_ptr(ptr, dtype=Uint32), cute.make_layout(n_class // 2))
    odd = lead & 1
    selector = cutlass.select_(odd == 1, Uint32(0x5432), Uint32(0x3210))
    per_chunk = cute.size(words, mode=[0])  # 4 words a chunk
    for k in cutlass.range_constexpr(len(col)):
        first = (col[k] - odd) >> 1  # word index (col[k] - odd is even)
        loaded = []
        for j in cutlass.range_constexpr(per_chunk + 1):
            word = first + j
            # the word's first column lies in [0, n): inside the vector's last 16-byte chunk at most
            wanted = word >= 0 and 2 * word < n
            if const_expr(j == per_chunk):
                wanted = wanted and odd == 1
            value = Uint32(0)
            if wanted:
                value = Uint32(source[word])
            loaded.append(value)
        for t in cutlass.range_constexpr(per_chunk):
            words[(t, 0), 0, k] = byte_perm(loaded[t], loaded[t + 1], selector)
