"""``quantize_fp8``: a 16- or 32-bit tensor to FP8 with a per-tensor scale or per-group scales
(1 x 128 activation groups, 128 x 128 weight blocks), in the layouts ``bmm_fp8`` / ``mm_fp8``
and ``gemm_fp8_nt_groupwise`` read. Written with torch operations (it prepares inputs; it is
not a kernel of its own), so the tests and benchmarks need no other library.

Each group's scale is ``amax / fp8_max`` (1.0 for an all-zero group), the values are divided
by it and saturated to the format's range, so ``x ~= q.float() * scale`` group by group.
"""

from __future__ import annotations

import torch

from .._capability import declare
from .._checks import require_tensor
from ..jit.logs import api_log

_FORMATS = (torch.float8_e4m3fn, torch.float8_e5m2)
GROUP_SHAPES = (None, (1, 128), (128, 128))


@api_log
def quantize_fp8(x: torch.Tensor, dtype: torch.dtype = torch.float8_e4m3fn,
                 group_shape: tuple[int, int] | None = None,
                 scale_major_mode: str = "K") -> tuple[torch.Tensor, torch.Tensor]:
    """``(q, scale)`` with ``q`` FP8 of ``x``'s shape (contiguous) and ``x ~= q * scale``.

    ``group_shape``: None (one float32 scale, shape ``[1]``: ``bmm_fp8``'s ``A_scale``), ``(1, 128)``
    (rows of 128 columns: ``[M, ceil(K / 128)]``) or ``(128, 128)`` (blocks: ``[ceil(M / 128),
    ceil(K / 128)]``) of a 2-D ``x`` ``[M, K]``; ``scale_major_mode`` ``"K"`` returns those scale
    shapes, ``"MN"`` their transposes (contiguous), as ``gemm_fp8_nt_groupwise`` takes them.
    """
    require_tensor("x", x)
    if dtype not in _FORMATS:
        raise TypeError(f"dtype must be torch.float8_e4m3fn or torch.float8_e5m2, got {dtype}")
    if not x.is_floating_point() or x.element_size() == 1:
        raise TypeError(f"x must be a 16- or 32-bit floating tensor, got {x.dtype}")
    if group_shape is not None:
        group_shape = tuple(group_shape)  # type: ignore[assignment]
    if group_shape not in GROUP_SHAPES:
        raise ValueError(f"group_shape must be None, (1, 128) or (128, 128), got {group_shape!r}")
    if scale_major_mode not in ("K", "MN"):
        raise ValueError(f"scale_major_mode must be 'K' or 'MN', got {scale_major_mode!r}")
    fp8_max = torch.finfo(dtype).max
    if group_shape is None:
        amax = x.abs().amax().float().reshape(1)
        scale = torch.where(amax > 0, amax / fp8_max, torch.ones_like(amax))
        return _saturate(x.float() / scale, dtype), scale
    if x.dim() != 2:
        raise ValueError(f"group scales take a 2-D x [M, K], got shape {tuple(x.shape)}")
    rows, cols = group_shape
    m, k = x.shape
    padded = torch.zeros(-(-m // rows) * rows, -(-k // cols) * cols, dtype=torch.float32, device=x.device)
    padded[:m, :k] = x
    groups = padded.reshape(padded.shape[0] // rows, rows, padded.shape[1] // cols, cols)
    amax = groups.abs().amax(dim=(1, 3))
    scale = torch.where(amax > 0, amax / fp8_max, torch.ones_like(amax))  # [M / rows, K / 128]
    q = _saturate((groups / scale[:, None, :, None]).reshape(padded.shape)[:m, :k], dtype)
    return q, (scale if scale_major_mode == "K" else scale.t().contiguous())


def _saturate(values: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    fp8_max = torch.finfo(dtype).max
    return values.clamp(-fp8_max, fp8_max).to(dtype).contiguous()


# (torch operations only: every GPU torch runs on, and torch.compile traces it as it is)
declare(quantize_fp8, (), ("bf16", "fp16", "fp32"))
