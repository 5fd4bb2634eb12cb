"""fused_rmsnorm_silu routine (memory bound): ``out = silu(rmsnorm(x))``, FlashInfer's op.

bf16 input and weight (FlashInfer's only dtype; fp16 is refused by cutefi and FlashInfer alike).
``--out-bits 16`` writes bf16, ``8`` float8_e4m3fn (saturated, no scale). Bytes: the input
read, the output written, the weight. Peers: torch eager and torch.compile of the same math
(``F.silu(F.rms_norm(x))`` in fp32, rounded once), and FlashInfer's op when it imports.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from .base import Backend, Cost, ShapeFlag, poisoned, randn
from .norm import EPS, HIDDEN, ROWS, _RowNorm, _rms_reference, out_param_peers

FP8 = torch.float8_e4m3fn
FP8_MAX = torch.finfo(FP8).max  # (448)
OUT_BITS = ShapeFlag("out_bits", (16,), (16,), "fused_rmsnorm_silu's output: 16 (bf16) or 8 (float8_e4m3fn)",
                     minimum=8)


def _torch_rmsnorm_silu(x: torch.Tensor, weight: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    y = F.silu(F.rms_norm(x.float(), (x.shape[-1],), weight.float(), EPS))
    return (y.clamp(-FP8_MAX, FP8_MAX) if out.dtype == FP8 else y).to(out.dtype)


class FusedRmsNormSilu(_RowNorm):
    name = "fused_rmsnorm_silu"
    help = "out = silu(rmsnorm(x)), bf16 in, bf16 or fp8 e4m3 out (FlashInfer's fused_rmsnorm_silu)"
    flags = (ROWS, HIDDEN, OUT_BITS)
    optional_backends = ("flashinfer",)
    dtypes = ("bf16",)
    choice = ("out_bits", (16, 8), "16 (bf16) or 8 (float8_e4m3fn)")

    def tolerance(self, shape: dict[str, int], dtype: torch.dtype) -> tuple[float, float]:
        # one FP8 step is 1/8 of a value (e4m3): outputs may round the other way where y differs
        return (2e-2, 0.13) if shape["out_bits"] == 8 else (self.atol, self.rtol)

    def backends(self) -> dict[str, Backend]:
        return out_param_peers("fused_rmsnorm_silu", _torch_rmsnorm_silu)

    def make_inputs(self, shape: dict[str, int], dtype: torch.dtype) -> tuple[Any, ...]:
        rows, hidden = shape["rows"], shape["hidden"]
        out = poisoned(rows, hidden, dtype=dtype)
        if shape["out_bits"] == 8:
            out = torch.empty(rows, hidden, device="cuda", dtype=FP8)
        return randn(rows, hidden, dtype=dtype), randn(hidden, dtype=dtype), out

    def reference(self, inputs: tuple[Any, ...], shape: dict[str, int]) -> tuple[torch.Tensor, ...]:
        x, weight, out = inputs
        y = _rms_reference(x, weight)
        y = y * torch.sigmoid(y)
        return (y.clamp(-FP8_MAX, FP8_MAX) if out.dtype == FP8 else y,)

    def cost(self, shape: dict[str, int], dtype: torch.dtype) -> Cost:
        elem = torch.empty((), dtype=dtype).element_size()
        out_bytes = shape["out_bits"] // 8
        return Cost(bytes=shape["rows"] * shape["hidden"] * (elem + out_bytes) + shape["hidden"] * elem)
