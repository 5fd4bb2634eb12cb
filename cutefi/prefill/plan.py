"""Work partition of a prefill batch (pure Python and numpy; no device work).

A request of ``qo_len`` queries over ``kv_len`` keys is cut into q tiles of ``TILE_M`` rows;
each (request, q tile) pair is one row of the work array, and each pair is run once per q
head. A pair's cost is the KV tiles its rows see (all of them, or up to the causal diagonal,
from the sliding window's start); pairs are ordered most expensive first, so the persistent
CTAs, which take units in order, finish together (longest-processing-time first).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import launch


@dataclass(frozen=True)
class PrefillPartition:
    work: np.ndarray  # int32 [WORK_ROWS, pairs]
    pairs: int
    tiles: int        # KV tiles over all pairs (one head)


def kv_tile_range(qo_len: np.ndarray, kv_len: np.ndarray, m_block: np.ndarray, causal: bool, window_left: int,
                  tile_n: int) -> tuple[np.ndarray, np.ndarray]:
    """[first, end) KV tiles the rows of q tile ``m_block`` see (the kernel computes the same)."""
    first_row = m_block * launch.TILE_M
    last_row = np.minimum(first_row + launch.TILE_M, qo_len) - 1
    shift = kv_len - qo_len  # q row r is key position r + shift
    end = np.minimum(kv_len, last_row + shift + 1) if causal else kv_len
    start = np.maximum(first_row + shift - window_left, 0) if window_left >= 0 else np.zeros_like(kv_len)
    end_tile = np.maximum(-(-end // tile_n), 0)
    first_tile = np.minimum(start // tile_n, end_tile)
    return first_tile, end_tile


def partition(qo_indptr: np.ndarray, kv_indptr: np.ndarray, causal: bool, window_left: int,
              head_dim: int, mask_begin: np.ndarray | None = None) -> PrefillPartition:
    """The work array of a ragged batch given its host ``qo_indptr`` and ``kv_indptr``."""
    return partition_requests(qo_indptr, kv_indptr[:-1], kv_indptr[1:] - kv_indptr[:-1], causal, window_left,
                              launch.plan_tile_n(head_dim), mask_begin)


def partition_requests(qo_indptr: np.ndarray, kv_begin: np.ndarray, kv_len: np.ndarray, causal: bool,
                       window_left: int, tile_n: int, mask_begin: np.ndarray | None = None) -> PrefillPartition:
    """The work array of requests with queries ``qo_indptr[b] .. qo_indptr[b + 1]`` and keys
    ``kv_len[b]`` from ``kv_begin[b]`` (a row of the ragged K/V, or a paged request's first
    entry of kv_indices); ``mask_begin[b]``: the byte of its custom mask (``masks.py``)."""
    qo_len = (qo_indptr[1:] - qo_indptr[:-1]).astype(np.int64)
    kv_len = np.asarray(kv_len, dtype=np.int64)
    m_blocks = -(-qo_len // launch.TILE_M)
    request = np.repeat(np.arange(qo_len.shape[0]), m_blocks)
    # the q tile of each pair: its index among its request's pairs
    starts = np.cumsum(m_blocks) - m_blocks
    m_block = np.arange(request.shape[0]) - np.repeat(starts, m_blocks)
    first_tile, end_tile = kv_tile_range(qo_len[request], kv_len[request], m_block, causal, window_left, tile_n)
    cost = end_tile - first_tile
    order = np.argsort(-cost, kind="stable")
    masks = np.zeros_like(qo_len) if mask_begin is None else np.asarray(mask_begin, dtype=np.int64)
    work = np.stack([qo_indptr[:-1][request], qo_len[request], np.asarray(kv_begin)[request], kv_len[request],
                     m_block, masks[request]])[:, order].astype(np.int32)
    return PrefillPartition(np.ascontiguousarray(work), int(request.shape[0]), int(cost.sum()))
