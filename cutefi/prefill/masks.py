"""Custom attention masks (FlashInfer's ``custom_mask`` / ``packed_custom_mask``), packed on the
device for the mma.sync kernel.

A request's mask is its [qo_len, kv_len] booleans (True: the score is kept) row-major; packed,
8 a byte with the first in the lowest bit (``bitorder="little"``), each request's bits starting
on a byte of their own (FlashInfer's ``segment_packbits``; a single request: ``packbits``).
"""

from __future__ import annotations

import numpy as np
import torch

from .._checks import require_tensor


def segment_bytes(qo_len: np.ndarray, kv_len: np.ndarray) -> tuple[np.ndarray, int]:
    """(first byte of each request's packed mask, bytes in all)."""
    sizes = -(-(np.asarray(qo_len, dtype=np.int64) * np.asarray(kv_len, dtype=np.int64)) // 8)
    starts = np.cumsum(sizes) - sizes
    return starts, int(sizes.sum())


def packed_mask(custom_mask, packed_custom_mask, qo_len: np.ndarray, kv_len: np.ndarray,
                device: torch.device) -> tuple[torch.Tensor, np.ndarray]:
    """(the packed uint8 mask on ``device``, each request's first byte) from a boolean
    ``custom_mask`` (its requests' masks flattened one after another) or an already
    ``packed_custom_mask`` (which wins, as in FlashInfer)."""
    starts, total = segment_bytes(qo_len, kv_len)
    bits = np.asarray(qo_len, dtype=np.int64) * np.asarray(kv_len, dtype=np.int64)
    if packed_custom_mask is not None:
        require_tensor("packed_custom_mask", packed_custom_mask)
        if packed_custom_mask.dtype != torch.uint8 or packed_custom_mask.dim() != 1:
            raise ValueError(f"packed_custom_mask must be a 1-D uint8 tensor; got {tuple(packed_custom_mask.shape)} "
                             f"{packed_custom_mask.dtype}")
        if packed_custom_mask.shape[0] < max(total, 1):
            raise ValueError(f"packed_custom_mask holds {packed_custom_mask.shape[0]} bytes; the requests' masks "
                             f"need {total} (each request's bits start on a new byte: segment_packbits)")
        return packed_custom_mask.to(device).contiguous(), starts
    require_tensor("custom_mask", custom_mask)
    flat = custom_mask.reshape(-1)
    if custom_mask.dtype != torch.bool or flat.shape[0] != int(bits.sum()):
        raise ValueError(f"custom_mask must be bool with sum(qo_len * kv_len) = {int(bits.sum())} elements (a "
                         f"single request: [qo_len, kv_len]); got {tuple(custom_mask.shape)} {custom_mask.dtype}")
    flat = flat.to(device)
    if total == 0:
        return torch.zeros(1, dtype=torch.uint8, device=device), starts
    # bit i of byte j of request b: element bit_start[b] + 8 (j - starts[b]) + i of the flat mask
    request = np.repeat(np.arange(len(starts)), -(-bits // 8))
    bit_start = np.cumsum(bits) - bits
    first = torch.from_numpy(bit_start[request] + 8 * (np.arange(total) - starts[request])).to(device)
    end = torch.from_numpy((bit_start + bits)[request]).to(device)
    position = first[:, None] + torch.arange(8, device=device)
    inside = position < end[:, None]
    values = flat[position.clamp(max=max(flat.shape[0] - 1, 0))] & inside
    weights = (1 << torch.arange(8, device=device)).to(torch.int32)
    return (values.to(torch.int32) * weights).sum(1).to(torch.uint8), starts


def check_mask_buffer(custom_mask_buf, device: int) -> torch.Tensor | None:
    """A wrapper's ``custom_mask_buf`` (CUDA graphs: the packed mask's fixed home)."""
    if custom_mask_buf is None:
        return None
    require_tensor("custom_mask_buf", custom_mask_buf)
    if custom_mask_buf.dtype != torch.uint8 or custom_mask_buf.dim() != 1 or not custom_mask_buf.is_cuda or \
            custom_mask_buf.get_device() != device:
        raise ValueError(f"custom_mask_buf must be a 1-D uint8 tensor on cuda:{device}; got "
                         f"{tuple(custom_mask_buf.shape)} {custom_mask_buf.dtype} on {custom_mask_buf.device}")
    return custom_mask_buf


def plan_mask(custom_mask, packed_custom_mask, qo_len: np.ndarray, kv_len: np.ndarray, device: int,
              fixed: torch.Tensor | None, use_cuda_graph: bool) -> tuple[torch.Tensor | None, np.ndarray | None]:
    """A wrapper plan's (packed mask, each request's first byte), or (None, None) without a
    mask; with CUDA graphs the mask is copied into ``fixed`` (its address must not change)."""
    if custom_mask is None and packed_custom_mask is None:
        return None, None
    mask, starts = packed_mask(custom_mask, packed_custom_mask, qo_len, kv_len, torch.device(f"cuda:{device}"))
    if use_cuda_graph:
        if fixed is None:
            raise ValueError("use_cuda_graph=True with a custom mask needs custom_mask_buf (a device uint8 tensor "
                             "that keeps its address) at construction")
        if mask.numel() > fixed.numel():
            raise ValueError(f"the packed mask needs {mask.numel()} bytes; custom_mask_buf holds {fixed.numel()}")
        fixed[:mask.numel()].copy_(mask, non_blocking=True)
        mask = fixed
    return mask, starts


def single_mask(custom_mask, packed_custom_mask, qo_len: int, kv_len: int, device: torch.device) -> torch.Tensor:
    """A single request's packed mask (torch operations only: torch.compile traces them)."""
    total = -(-qo_len * kv_len // 8)
    if packed_custom_mask is not None:
        return packed_mask(None, packed_custom_mask, np.array([qo_len]), np.array([kv_len]), device)[0]
    require_tensor("custom_mask", custom_mask)
    if custom_mask.dtype != torch.bool or tuple(custom_mask.shape) != (qo_len, kv_len):
        raise ValueError(f"custom_mask must be bool [qo_len, kv_len] = [{qo_len}, {kv_len}]; got "
                         f"{tuple(custom_mask.shape)} {custom_mask.dtype}")
    flat = torch.nn.functional.pad(custom_mask.reshape(-1).to(device=device, dtype=torch.int32),
                                   (0, 8 * total - qo_len * kv_len))
    weights = (1 << torch.arange(8, device=device, dtype=torch.int32))
    packed = (flat.view(total, 8) * weights).sum(1).to(torch.uint8)
    return packed if total else torch.zeros(1, dtype=torch.uint8, device=device)
