"""Work partition of batch decode (host side, no cutlass import): which CTA covers which KV
tokens of which request, and where split requests leave their partial states.

Each request's attended range is ``[start, length)``: its KV length from the page table
(``(pages - 1) * page_size + last_page_len``, 0 without pages) and, with a sliding window,
``start = max(0, length - 1 - window_left)``. When the batch alone does not fill the GPU
(fewer CTAs than can be resident at once), ranges are cut into chunks of ``chunk`` tokens (a
multiple of the kernel's tile, at least ``MIN_CHUNK``) so that the work is spread evenly over
the SMs; a request cut into several chunks writes one partial state per chunk, merged
afterwards by the merge kernel's ``state_indptr`` mode. Everything here runs on host tensors
(numpy, int64 math, int32 results: a few microseconds where torch's CPU ops cost
several each).
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import numpy as np

from . import launch

WORK_ROWS = launch.DECODE_WORK_ROWS
MIN_CHUNK = 256  # tokens: shorter chunks cost more in merging than they gain in parallelism
SPLIT_GAIN = 0.85  # the estimated span of a split plan against that of whole requests


class DecodePartition(NamedTuple):
    work: np.ndarray  # int32 [WORK_ROWS, items]: request, kv_start, kv_end, partial row (-1: whole
    # request), 1 on the one item a request's attention sink is counted in, the request's KV length,
    # and its first page slot in kv_indices (indptr[request])
    state_indptr: np.ndarray  # int32 [batch + 1]: partial rows of each request (0 rows: not split)
    items: int
    partial_rows: int
    chunk: int  # tokens per chunk (0: no request split)


def kv_lengths(indptr: np.ndarray, last_page_len: np.ndarray, page_size: int,
               pages: np.ndarray | None = None, some_empty: bool | None = None) -> np.ndarray:
    """KV tokens of each request (int64); ``pages``: indptr's differences, and ``some_empty``
    whether a request has no pages, where known."""
    pages = indptr[1:] - indptr[:-1] if pages is None else pages
    lengths = pages.astype(np.int64)  # in place from here: plan's hot path, a few ops a call
    lengths *= page_size
    lengths += last_page_len
    lengths -= page_size
    if some_empty or (some_empty is None and not pages.all()):
        lengths[pages == 0] = 0
    return lengths


def choose_chunk(ranges: np.ndarray, ctas_per_item: int, slots: int, tile: int, disable_split: bool,
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
    longest = int(ranges.max())
    # split only where it shortens the run by a margin: the span of a CTA slot (tokens) is at
    # least the longest item's and the work spread over every slot. A batch that nearly fills
    # the GPU gains little (on the H200, 64 x 4096 at 4 CTAs an SM split into 4032 + 64-token
    # chunks ran 4% slower than whole requests); a ragged one gains much (its longest request
    # alone was 8% slower at 64 requests of 512..32768)
    spread = -(-total * ctas_per_item // slots)
    return chunk if max(chunk, spread) <= SPLIT_GAIN * max(longest, spread) else 0


def partition(lengths: np.ndarray, starts: np.ndarray | None, indptr: np.ndarray, chunk: int,
              one_wave: int | None = None) -> DecodePartition:
    """Work items covering ``[starts[b], lengths[b])`` of every request (``starts`` None: from 0)
    in chunks of ``chunk`` tokens (0: one item per request); ``indptr``: the page table's (each
    item carries its request's first page slot, sparing the kernel a dependent load). With more
    items than ``one_wave`` (the items the GPU runs at once), the items go longest first: CTAs
    start in launch order, so a long one launched last would run alone at the end (on the H200,
    ragged batches whose CTAs span several waves lost ~5% to that tail)."""
    batch = lengths.shape[0]
    if chunk == 0:
        return _whole_requests(lengths, starts, indptr, one_wave)
    if batch == 1:
        return _one_request(int(lengths[0]), 0 if starts is None else int(starts[0]), int(indptr[0]), chunk,
                            one_wave)
    ranges = lengths if starts is None else lengths - starts  # starts <= lengths
    chunks = -(-ranges // chunk)
    np.maximum(chunks, 1, out=chunks)  # an empty range is one (empty) item
    items = int(chunks.sum())
    request = np.repeat(np.arange(batch), chunks)
    first_item = np.cumsum(chunks)
    first_item -= chunks
    index = np.arange(items)
    index -= first_item[request]
    request_length = lengths[request]
    kv_start = index * chunk
    if starts is not None:
        kv_start += starts[request]
    split = chunks > 1
    state_indptr = np.zeros(batch + 1, dtype=np.int64)
    np.cumsum(chunks * split, out=state_indptr[1:])
    work = np.empty((WORK_ROWS, items), dtype=np.int32)  # rows written in place: no stack
    work[0], work[1], work[5], work[6] = request, kv_start, request_length, indptr[request]
    work[2] = np.minimum(kv_start + chunk, request_length)
    work[3] = np.where(split[request], state_indptr[request] + index, -1)
    work[4] = index == 0
    if one_wave is not None and items > one_wave:
        spans = work[2] - work[1]
        if spans.min() != spans.max():  # stable: a request's chunks keep their order
            work = np.ascontiguousarray(work[:, np.argsort(-spans, kind="stable")])
    return DecodePartition(work, state_indptr.astype(np.int32), items, int(state_indptr[-1]), chunk)


def _one_request(length: int, start: int, first_page: int, chunk: int, one_wave: int | None) -> DecodePartition:
    """``partition`` of one request (a batch of 1, split over the SMs), in Python ints where
    the general form's gathers would cost more than the request's few items."""
    items = max(1, -(-(length - start) // chunk))
    index = np.arange(items)
    work = np.empty((WORK_ROWS, items), dtype=np.int32)
    work[0], work[5], work[6] = 0, length, first_page
    kv_start = index * chunk
    kv_start += start
    work[1] = kv_start
    kv_start += chunk
    work[2] = np.minimum(kv_start, length)
    work[3] = index if items > 1 else -1
    work[4] = index == 0
    partial_rows = items if items > 1 else 0
    # (only the last chunk can be shorter: longest first keeps the order, so no sort)
    return DecodePartition(work, np.array([0, partial_rows], dtype=np.int32), items, partial_rows, chunk)


def _whole_requests(lengths: np.ndarray, starts: np.ndarray | None, indptr: np.ndarray,
                    one_wave: int | None) -> DecodePartition:
    """One item per request (the batch fills the GPU): plan's common case, so each row is
    written once, already in launch order."""
    batch = lengths.shape[0]
    base, no_states = _whole_request_rows(batch)
    work = base.copy()  # one copy of the rows every such plan shares, then the per-request ones
    order = None
    if one_wave is not None and batch > one_wave:
        spans = lengths if starts is None else lengths - starts
        if np.minimum.reduce(spans) != np.maximum.reduce(spans):
            order = np.argsort(-spans, kind="stable")
    if order is None:
        work[2], work[5], work[6] = lengths, lengths, indptr[:batch]
        if starts is not None:
            work[1] = starts
    else:
        work[0] = order
        work[2], work[6] = lengths[order], indptr[order]
        work[5] = work[2]
        if starts is not None:
            work[1] = starts[order]
    return DecodePartition(work, no_states, batch, 0, 0)


@functools.lru_cache(maxsize=16)
def _whole_request_rows(batch: int) -> tuple[np.ndarray, np.ndarray]:
    """(the work rows of a whole-request plan that do not depend on the lengths: request b at
    item b, KV from 0, no partial row, the sink counted; no partial states), read-only."""
    work = np.empty((WORK_ROWS, batch), dtype=np.int32)
    work[0], work[1], work[3], work[4] = np.arange(batch), 0, -1, 1
    no_states = np.zeros(batch + 1, dtype=np.int32)
    work.flags.writeable = no_states.flags.writeable = False
    return work, no_states
