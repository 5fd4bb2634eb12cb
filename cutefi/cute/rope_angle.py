"""Llama RoPE's rotation of head dim ``dim`` (< head_dim / 2) at a position, as the attention
kernels apply it inside (FlashInfer's ``pos_encoding_mode="ROPE_LLAMA"``): the angle is
``position / rope_scale * rope_theta^(-2 dim / head_dim)``, given as ``rcp_scale`` and
``log2_step = -2 log2(rope_theta) / head_dim``."""

from __future__ import annotations

import cutlass.cute as cute
from cutlass import Float32

INV_TWO_PI = 0.15915494309189535
TWO_PI_HI = 6.28125  # 8 significant bits
TWO_PI_LO = 6.283185307179586 - 6.28125
ROUND_MAGIC = 12582912.0  # 1.5 * 2^23: adding and subtracting it rounds to an integer


@cute.jit
def rope_cos_sin(position: Float32, dim, rcp_scale: Float32, log2_step: Float32):
    """(cos, sin) of the angle, reduced by whole turns first (2 pi in two parts: k * TWO_PI_HI
    is exact for k < 2^15 turns), so the fast sin/cos see |r| <= pi (no local-memory range
    reduction)."""
    angle = position * (rcp_scale * cute.math.exp2(Float32(dim) * log2_step, fastmath=True))
    turns = (angle * Float32(INV_TWO_PI) + Float32(ROUND_MAGIC)) - Float32(ROUND_MAGIC)  # nearest integer
    reduced = (angle - turns * Float32(TWO_PI_HI)) - turns * Float32(TWO_PI_LO)
    return cute.math.cos(reduced, fastmath=True), cute.math.sin(reduced, fastmath=True)
