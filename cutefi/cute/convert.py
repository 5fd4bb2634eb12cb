"""float32 -> FP8 conversion that builds for every target.

sm_89 and later convert in hardware (``cvt.rn.satfinite.e4m3x2.f32``, which saturates). sm_80
and sm_86 have no FP8 instructions, so there the same round-to-nearest-even is done in
arithmetic on the clamped value: it is rounded to the FP8 quantum of its binade by adding and
subtracting a power of two (an fp32 add rounds to nearest even), then its fp32 bits are
re-biased into the FP8 code.
"""

from __future__ import annotations

import cutlass
import cutlass.cute as cute
from cutlass import Float32, Uint32, const_expr
from cutlass.base_dsl import Arch, BaseDSL

# (exponent bias, mantissa bits) of each FP8 format
_FORMATS = {cutlass.Float8E4M3FN: (7, 3), cutlass.Float8E5M2: (15, 2)}


def has_fp8_convert() -> bool:
    """Whether the target being compiled has FP8 conversion instructions (sm_89+)."""
    return BaseDSL._get_dsl().get_arch_enum() >= Arch.from_string("sm_89")


@cute.jit
def store_fp8(values: cute.TensorSSA, out: cute.Tensor, max_value: cutlass.Constexpr[float],
              software: cutlass.Constexpr[bool] = False):
    """Store float32 ``values`` into the FP8 register tensor ``out`` (same number of elements,
    compact), saturated to +-``max_value`` (a NaN to +max_value: CUDA's fminf, as FlashInfer
    clamps) and rounded to nearest even. ``software``: the arithmetic conversion even where
    the target has the instructions."""
    staged = cute.make_rmem_tensor(cute.make_layout(cute.size(out)), Float32)
    staged.store(values.reshape(staged.shape))
    hardware = const_expr(has_fp8_convert() and not software)
    for i in cutlass.range_constexpr(cute.size(out)):
        value = cute.arch.fmin(staged[i], Float32(max_value))  # NaN -> max, as fminf
        if const_expr(not hardware):  # the hardware conversion saturates the low end itself
            value = cute.arch.fmax(value, Float32(-max_value))
        staged[i] = value
    if const_expr(hardware):
        out.store(staged.load().to(out.element_type).reshape(out.shape))
    else:
        bias, mant_bits = _FORMATS[out.element_type]
        bits = cute.recast_tensor(staged, Uint32)
        codes = cute.recast_tensor(out, cutlass.Uint8)
        for i in cutlass.range_constexpr(cute.size(out)):
            codes[i] = _fp8_code(bits[i], bias, mant_bits)


@cute.jit
def _fp8_code(x_bits: Uint32, bias: cutlass.Constexpr[int], mant_bits: cutlass.Constexpr[int]) -> cutlass.Uint8:
    sign = (x_bits >> 24) & Uint32(0x80)
    a_bits = x_bits & Uint32(0x7FFFFFFF)
    # the FP8 quantum of a's binade (never below the subnormal quantum 2^(1-bias-mant_bits)),
    # times 2^23: adding it makes the fp32 ulp exactly that quantum
    exponent = cutlass.max(a_bits >> 23, Uint32(128 - bias))
    magic_bits = (exponent - Uint32(mant_bits) + Uint32(23)) << 23
    magic = cute.recast_tensor(_scalar_tensor(magic_bits), Float32)[0]
    a = cute.recast_tensor(_scalar_tensor(a_bits), Float32)[0]
    rounded = (a + magic) - magic
    r_bits = cute.recast_tensor(_scalar_tensor(rounded), Uint32)[0]
    # normal: re-bias the exponent and drop the low mantissa bits; subnormal (below
    # 2^(1-bias)): the value counted in quanta, an exact integer
    normal = (r_bits >> (23 - mant_bits)) - Uint32((127 - bias) << mant_bits)
    subnormal = Uint32(cutlass.Int32(rounded * Float32(2.0 ** (bias - 1 + mant_bits))))
    is_normal = (r_bits >> 23) >= Uint32(128 - bias)
    code = Uint32(cutlass.select_(is_normal, normal, subnormal))
    return cutlass.Uint8(code | sign)


@cute.jit
def _scalar_tensor(value):
    t = cute.make_rmem_tensor(cute.make_layout(1), type(value))
    t[0] = value
    return t
