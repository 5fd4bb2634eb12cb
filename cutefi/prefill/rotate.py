"""Llama RoPE applied before Hopper's TMA prefill kernel (which has none inside): q and k are
turned in copies by the rope family's kernel (``cutefi/rope``), at FlashInfer's
``pos_encoding_mode="ROPE_LLAMA"`` positions (q row ``r`` of a request at ``r + kv_len -
qo_len``, key ``t`` at ``t``), rounded to their dtype as the mma.sync kernel rounds them in
shared memory. A plan's ``rope_index`` holds what the rope kernel reads: int32
``[qo_indptr (b + 1), kv_indptr (b + 1), kv_len - qo_len (b), zeros (b)]``."""

from __future__ import annotations

import numpy as np
import torch

from ..rope.api import _launch as rope_launch


def rope_index(qo_indptr: np.ndarray, kv_indptr: np.ndarray) -> np.ndarray:
    """The host ``rope_index`` of a batch (``qo_indptr``, ``kv_indptr``: [b + 1])."""
    shift = np.diff(kv_indptr) - np.diff(qo_indptr)
    return np.concatenate([qo_indptr, kv_indptr, shift, np.zeros_like(shift)]).astype(np.int32)


def rotated(q: torch.Tensor, k: torch.Tensor, index: torch.Tensor, rcp_scale: float,
            log2_step: float) -> tuple[torch.Tensor, torch.Tensor]:
    """(q, k) turned, as new [tokens, heads, d] tensors: q [tokens, heads, d], k [tokens, kv_heads,
    d] (any strides the rope kernel takes); ``rcp_scale`` and ``log2_step`` as the prefill
    kernels take them (``-2 log2(rope_theta) / head_dim``)."""
    batch = (index.shape[0] - 2) // 4
    qo_indptr, kv_indptr = index[:batch + 1], index[batch + 1:2 * batch + 2]
    shift, zeros = index[2 * batch + 2:3 * batch + 2], index[3 * batch + 2:]
    scalars = (rcp_scale, -log2_step * q.shape[-1] / 2, 0.0, 0.0)  # (rcp_scale, log2(theta), no smoothing)
    outputs = []
    for rows, indptr, offsets in ((q, qo_indptr, shift), (k, kv_indptr, zeros)):
        turned = torch.empty(rows.shape, dtype=rows.dtype, device=rows.device)
        # (the rope kernel turns a q and a k of one length: here each alone, its partner empty)
        rope_launch(rows, rows[:, :0], turned, turned[:, :0], "indptr", indptr, offsets, None, None, False, scalars)
        outputs.append(turned)
    return outputs[0], outputs[1]
