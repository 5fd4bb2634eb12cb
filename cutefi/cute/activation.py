"""Elementwise activations of float32 register values, for kernels' output stages.

``silu(y) = y * sigmoid(y) = y / (1 + 2^(-y * log2(e)))``, on the MUFU unit: one ex2 and one
rcp an element (approximate, about 2 ulp of float32: far below a bf16 or FP8 output's ulp; the
rcp flushes subnormals, which its argument, at least 1, never is). The exponent's overflow is harmless: for y below about -88, 2^(-y log2 e) is +inf, its reciprocal 0,
and the result -0 (the true value is below 1e-36); a NaN stays NaN.
"""

from __future__ import annotations

import cutlass.cute as cute
from cutlass import Float32

LOG2_E = 1.4426950408889634


@cute.jit
def silu(values: cute.TensorSSA) -> cute.TensorSSA:
    """SiLU of fp32 ``values`` (any shape)."""
    exponent = cute.math.exp2(values * Float32(-LOG2_E), fastmath=True)
    return values * cute.math.rcp(exponent + Float32(1.0), approx=True, ftz=True)
