"""Work partition of batch decode (host side, no cutlass import): which CTA covers which KV
tokens of which request, and where split requests leave their partial states.

Each request's attended range is ``[start, length)``: its KV length from the page table
(``(pages - 1) * page_size + last_page_len``, 0 without pages) and, with a sliding window,
``start = max(0, length - 1 - window_left)``. When the batch alone does not fill the GPU
(fewer CTAs than can be resident at once), ranges are cut into chunks of ``chunk`` tokens (a
multiple of the kernel's tile, at least ``MIN_CHUNK``) so that the work is spread evenly over
the SMs; a request cut into several chunks writes one partial state per chunk, merged
afterwards by the merge kernel's ``state_indptr`` mode. Everything here runs on host tensors
(int64 math, int32 results).
"""

from __future__ import annotations

from typing import NamedTuple

import torch

MIN_CHUNK = 256  # tokens: shorter chunks cost more in merging than they gain in parallelism


class DecodePartition(NamedTuple):
    work: torch.Tensor  # int32 [5, items]: request, kv_start, kv_end, partial row (-1: whole request),
    # and 1 on the one item a request's attention sink is counted in
    state_indptr: torch.Tensor  # int32 [batch + 1]: partial rows of each request (0 rows: not split)
    items: int
    partial_rows: int
    chunk: int  # tokens per chunk (0: no request split)


def kv_lengths(indptr: torch.Tensor, last_page_len: torch.Tensor, page_size: int) -> torch.Tensor:
    """KV tokens of each request (int64, host)."""
    pages = (indptr[1:] - indptr[:-1]).to(torch.int64)
    return torch.where(pages > 0, (pages - 1) * page_size + last_page_len.to(torch.int64), 0)


def choose_chunk(ranges: torch.Tensor, ctas_per_item: int, slots: int, tile: int, disable_split: bool,
                 fixed_chunk: int | None) -> int:
    """Tokens per chunk (0: no split): the smallest multiple of ``tile`` >= MIN_CHUNK that
    gives about ``slots`` (resident CTAs of the GPU) CTAs over the total work, unless the
    batch fills the GPU already."""
    if fixed_chunk is not None:
        return max(tile, -(-fixed_chunk // tile) * tile)
    batch = ranges.shape[0]
    if disable_split or batch * ctas_per_item >= slots or batch == 0:
        return 0
    target_items = -(-slots // ctas_per_item)
    total = int(ranges.sum())
    chunk = max(MIN_CHUNK, -(-total // target_items))
    chunk = -(-chunk // tile) * tile
    return chunk if int(ranges.max()) > chunk else 0


def partition(lengths: torch.Tensor, starts: torch.Tensor, chunk: int) -> DecodePartition:
    """Work items covering ``[starts[b], lengths[b])`` of every request in chunks of ``chunk``
    tokens (0: one item per request)."""
    batch = lengths.shape[0]
    ranges = (lengths - starts).clamp(min=0)
    if chunk == 0:
        work = torch.stack((torch.arange(batch, dtype=torch.int64), starts, lengths,
                            torch.full((batch,), -1, dtype=torch.int64), torch.ones(batch, dtype=torch.int64)))
        return DecodePartition(work.to(torch.int32), torch.zeros(batch + 1, dtype=torch.int32), batch, 0, 0)
    chunks = (-(-ranges // chunk)).clamp(min=1)  # an empty range is one (empty) item
    items = int(chunks.sum())
    request = torch.repeat_interleave(torch.arange(batch, dtype=torch.int64), chunks)
    first_item = torch.cumsum(chunks, 0) - chunks
    index = torch.arange(items, dtype=torch.int64) - first_item[request]
    kv_start = starts[request] + index * chunk
    kv_end = torch.minimum(kv_start + chunk, lengths[request])
    split = chunks > 1
    rows = torch.where(split, chunks, 0)
    state_indptr = torch.zeros(batch + 1, dtype=torch.int64)
    torch.cumsum(rows, 0, out=state_indptr[1:])
    partial_row = torch.where(split[request], state_indptr[request] + index, -1)
    work = torch.stack((request, kv_start, kv_end, partial_row, (index == 0).to(torch.int64))).to(torch.int32)
    return DecodePartition(work, state_indptr.to(torch.int32), items, int(state_indptr[-1]), chunk)
