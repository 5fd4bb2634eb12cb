"""Where an appended token goes in a paged KV cache (FlashInfer's ``append_paged_kv_cache``
addressing), for the kernels that write into one: token ``t`` of request ``b =
batch_indices[t]`` at position ``p = positions[t]`` goes to page ``kv_indices[kv_indptr[b] +
p // page_size]``, entry ``p % page_size``. Every index is checked before it is read, so a
padding token (``b < 0``), a position past the request's pages or a page id outside the cache
gives page -1: the caller writes nothing for it.
"""

from __future__ import annotations

import cutlass.cute as cute
from cutlass import Int32


@cute.jit
def page_entry(batch_indices: cute.Pointer, positions: cute.Pointer, kv_indptr: cute.Pointer,
               kv_indices: cute.Pointer, token: Int32, batch: Int32, num_indices: Int32, page_size: Int32,
               num_pages: Int32):
    """(page, entry) of ``token``; page -1 where the token has no valid slot."""
    b = cute.make_tensor(batch_indices, cute.make_layout(token + 1))[token]
    p = cute.make_tensor(positions, cute.make_layout(token + 1))[token]
    indptr = cute.make_tensor(kv_indptr, cute.make_layout(batch + 1))
    page = Int32(-1)
    entry = Int32(0)
    if b >= 0 and b < batch and p >= 0:
        slot = indptr[b] + p // page_size
        if slot < indptr[b + 1] and slot >= 0 and slot < num_indices:
            found = cute.make_tensor(kv_indices, cute.make_layout(num_indices))[slot]
            if found >= 0 and found < num_pages:
                page = found
                entry = p - (p // page_size) * page_size
    return page, entry
