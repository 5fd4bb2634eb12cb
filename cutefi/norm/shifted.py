"""Device helpers of the shifted row-norm builds (rows that do not start on a 16-byte boundary).

A shifted row is read and written in the aligned 8-element chunks that cover it: chunk ``k``
of a thread holds row columns ``col .. col + 7`` with ``col = tile_col - lead`` (``lead``, 0-7,
is where the row starts in its first chunk). The elements outside ``[0, N)`` at the row's ends
are masked, stores there go in aligned pieces or element by element (``store_ends``), and the
parameters (one aligned vector for all rows) are read in the row's frame: 16-bit ones as
32-bit words joined by a byte permute, fp32 ones an element at a time (the persistent
LayerNorm once for all the rows of a thread, which share a lead).
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
def store_ends(values: cute.Tensor, dest: cute.Tensor, k: cutlass.Constexpr[int], col: Int32, n: Int32,
               first_in_pieces: cutlass.Constexpr[bool] = True, last_in_pieces: cutlass.Constexpr[bool] = True,
               may_start: cutlass.Constexpr[bool] = True):
    """Store the in-row elements of chunk ``k`` (a chunk at a row's end, ``col < n``). A row's
    first chunk (columns [-col, 8), with ``first_in_pieces``) and its last ([0, n - col), with
    ``last_in_pieces``) go as at most three aligned pieces of 4, 2 and 1 elements (a vector
    store each, taken from the packed words) instead of an element a store; the rest element
    by element. ``may_start``: whether the chunk can start a row (a thread's first chunk; the
    others have ``col > 0``). (The pieces cost code and registers: the one-row shifted
    RMSNorm 4096, at its 64-register cap, spilled 2-14 registers with them; the persistent
    shifted LayerNorm, at 128, 16-22 with the last chunk's, which may be any of a thread's
    chunks, so every chunk has the code.)"""
    V = const_expr(cute.size(values, mode=[0]))
    if col >= 0 and const_expr(last_in_pieces):
        # the last chunk: [0, hi) is the pieces of hi's set bits, largest first
        hi = n - col
        for s in cutlass.range_constexpr(2, -1, -1):
            if hi & (1 << s):
                # (the largest piece starts the chunk)
                first = 0 if const_expr(s == 2) else hi & ~((2 << s) - 1)
                _store_piece(values, dest, k, first, 1 << s)
    elif const_expr(may_start and first_in_pieces) and col < 0 and col + V <= n:
        # the first chunk: [lo, V) is pieces of growing size, each at its own alignment
        lo = -col
        for s in cutlass.range_constexpr(3):
            if lo & (1 << s):
                # (the largest piece ends the chunk)
                _store_piece(values, dest, k, V - 4 if const_expr(s == 2) else lo, 1 << s)
            if const_expr(s < 2):
                lo = lo + (lo & (1 << s))
    else:
        _store_elements(values, dest, k, col, n)


@cute.jit
def _store_elements(values: cute.Tensor, dest: cute.Tensor, k: cutlass.Constexpr[int], col: Int32, n: Int32):
    """The in-row elements of chunk ``k`` one by one, each taken from its packed word:
    element reads would split every register of ``values`` (16- or 8-bit) into its parts
    first, for the whole chunk loop."""
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
def _word_at(words: cute.Tensor, k: cutlass.Constexpr[int], index) -> Uint32:
    """Packed word ``index`` of chunk ``k``: a select a word where ``index`` is a run-time value."""
    if const_expr(isinstance(index, int)):
        return words[(index, 0), 0, k]
    count = const_expr(cute.size(words, mode=[0]))
    value = words[(count - 1, 0), 0, k]
    for w in cutlass.range_constexpr(count - 2, -1, -1):
        value = cutlass.select_(index == w, words[(w, 0), 0, k], value)
    return value


@cute.jit
def _store_piece(values: cute.Tensor, dest: cute.Tensor, k: cutlass.Constexpr[int], first,
                 count: cutlass.Constexpr[int]):
    """One store of ``count`` elements of chunk ``k`` from element ``first`` (an int or a
    run-time multiple of ``count``, so the store is aligned to its width)."""
    width = const_expr(values.element_type.width)
    bits = const_expr(count * width)
    words = cute.recast_tensor(values, Uint32)
    constant = const_expr(isinstance(first, int))
    at = dest[None, None, k].iterator + (first if constant else cute.assume(first, divby=count))
    if const_expr(bits == 64):
        pair = cute.make_rmem_tensor(cute.make_layout(2), Uint32)
        pair[0] = _word_at(words, k, first >> 1)
        pair[1] = _word_at(words, k, (first >> 1) + 1)
        target = cute.make_tensor(cute.recast_ptr(at, dtype=Uint32), cute.make_layout(2))
        cute.copy(cute.make_copy_atom(cute.nvgpu.CopyUniversalOp(), Uint32, num_bits_per_copy=64), pair, target)
    else:
        bit = first * width
        piece = _word_at(words, k, bit >> 5)
        if const_expr(not constant or bit % 32):
            piece = piece >> (bit & 31)
        kind = {8: Uint8, 16: Uint16, 32: Uint32}[bits]
        target = cute.make_tensor(cute.recast_ptr(at, dtype=kind), cute.make_layout(1))
        target[0] = kind(piece)


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
