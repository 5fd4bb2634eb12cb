"""Llama RoPE applied before Hopper's TMA prefill kernel (which has none inside): q and k are
turned in copies by the rope family's kernel (``cutefi/rope``), at FlashInfer's
``pos_encoding_mode="ROPE_LLAMA"`` positions (q row ``r`` of a request at ``r + kv_len -
qo_len``, key ``t`` at ``t``), rounded to their dtype as the mma.sync kernel rounds them in
shared memory. A plan's ``rope_index`` holds what the rope kernel reads: int32
``[qo_indptr (b + 1), k_indptr (b + 1), kv_len - qo_len (b), zeros (b)]``, ``k_indptr`` the
requests' first key rows (ragged K/V; a paged plan's gathered pages: first page x page_size)."""

from __future__ import annotations

import numpy as np
import torch

from ..rope.api import _launch as rope_launch


def rope_index(qo_indptr: np.ndarray, k_indptr: np.ndarray, kv_len: np.ndarray | None = None) -> np.ndarray:
    """The host ``rope_index`` of a batch (``qo_indptr``, ``k_indptr``: [b + 1]; ``kv_len``: [b],
    by default ``diff(k_indptr)``)."""
    kv_len = np.diff(k_indptr) if kv_len is None else kv_len
    shift = kv_len - np.diff(qo_indptr)
    return np.concatenate([qo_indptr, k_indptr, shift, np.zeros_like(shift)]).astype(np.int32)


def _turn(rows: torch.Tensor, indptr: torch.Tensor, offsets: torch.Tensor, scalars, out: torch.Tensor) -> None:
    # (the rope kernel turns a q and a k of one length: here each alone, its partner empty)
    rope_launch(rows, rows[:, :0], out, out[:, :0], "indptr", indptr, offsets, None, None, False, scalars)


def _parts(index: torch.Tensor, rcp_scale: float, log2_step: float, head_dim: int):
    batch = (index.shape[0] - 2) // 4
    parts = (index[:batch + 1], index[batch + 1:2 * batch + 2], index[2 * batch + 2:3 * batch + 2],
             index[3 * batch + 2:])
    return parts, (rcp_scale, -log2_step * head_dim / 2, 0.0, 0.0)  # (rcp_scale, log2(theta), no smoothing)


def rotated(q: torch.Tensor, k: torch.Tensor, index: torch.Tensor, rcp_scale: float,
            log2_step: float) -> tuple[torch.Tensor, torch.Tensor]:
    """(q, k) turned, as new [tokens, heads, d] tensors: q [tokens, heads, d], k [tokens, kv_heads,
    d] (any strides the rope kernel takes); ``rcp_scale`` and ``log2_step`` as the prefill
    kernels take them (``-2 log2(rope_theta) / head_dim``)."""
    (qo_indptr, k_indptr, shift, zeros), scalars = _parts(index, rcp_scale, log2_step, q.shape[-1])
    outputs = []
    for rows, indptr, offsets in ((q, qo_indptr, shift), (k, k_indptr, zeros)):
        turned = torch.empty(rows.shape, dtype=rows.dtype, device=rows.device)
        _turn(rows, indptr, offsets, scalars, turned)
        outputs.append(turned)
    return outputs[0], outputs[1]


def rotated_pages(q: torch.Tensor, k_view: torch.Tensor, v_view: torch.Tensor, kv_indices: torch.Tensor, entries: int,
                  index: torch.Tensor, rcp_scale: float, log2_step: float):
    """(q turned, K pages, V pages, page table) for the paged TMA kernel: the pages of the first
    ``entries`` page-table entries gathered in entry order (ids clamped to the cache; entry e
    becomes page e), K turned in place. ``k_view``/``v_view``: [pages, kv_heads, page_size, d]."""
    (qo_indptr, k_indptr, shift, zeros), scalars = _parts(index, rcp_scale, log2_step, q.shape[-1])
    ids = kv_indices[:entries].long().clamp(0, k_view.shape[0] - 1)
    k_rows = k_view.transpose(1, 2).index_select(0, ids)  # [entries, page_size, kv_heads, d]: a key a row
    keys = k_rows.view(-1, *k_rows.shape[2:])
    _turn(keys, k_indptr, zeros, scalars, keys)
    q_turned = torch.empty(q.shape, dtype=q.dtype, device=q.device)
    _turn(q, qo_indptr, shift, scalars, q_turned)
    order = torch.arange(entries, dtype=torch.int32, device=kv_indices.device)
    return q_turned, k_rows.transpose(1, 2), v_view.index_select(0, ids), order
