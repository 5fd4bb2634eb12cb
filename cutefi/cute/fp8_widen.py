"""FP8 -> 16-bit widening in integer arithmetic, for every target (sm_80 has no FP8 instructions).

A 32-bit register holds four FP8 codes; ``widen_pair`` picks two of them (bytes ``lo`` and
``hi``) and returns one 16-bit pair (f16x2 or bf16x2) holding them. Each code's sign,
exponent and mantissa bits are moved into the wide format's fields unchanged, which yields the
value times a power of two (the exponent biases differ); subnormal codes land as subnormals of
the wide format, so the scaling is exact for every finite code:

  f16 from e5m2: the code is f16's high byte: exact.
  f16 from e4m3: value * 2^-8 (``launch.kv_widen_factor``: the host folds 2^8 into the scales;
                 the smallest e4m3 subnormal, 2^-9, is the f16 subnormal 2^-17).
  bf16 from e4m3 / e5m2: value * 2^-120 / 2^-112, put right by one bf16x2 FMA with the
                 power of two (exact), since such tiny values would fall below fp32's normal
                 range inside a tensor-core accumulation.

The e4m3fn NaN codes (0x7f, 0xff) widen to +-480, not NaN (as FlashInfer's fast dequantisation).
"""

from __future__ import annotations

from cutlass import Uint32, const_expr
from cutlass._mlir.dialects import llvm
from cutlass.cutlass_dsl import T, dsl_user_op

# (format, wide type) -> (mask of the moved exponent and mantissa bits once shifted, shift,
# bf16x2 pair of the power of two that restores the value, or None where the caller folds it)
_RULES = {
    ("fp8e5m2", "fp16"): (0x7F007F00, 0, None),
    ("fp8e4m3", "fp16"): (0x3F803F80, 1, None),
    ("fp8e4m3", "bf16"): (0x07F007F0, 4, 0x7B807B80),  # 2^120
    ("fp8e5m2", "bf16"): (0x0FE00FE0, 3, 0x77807780),  # 2^112
}
_SIGNS = 0x80008000


@dsl_user_op
def _asm_u32(asm: str, *operands, loc=None, ip=None) -> Uint32:
    value = llvm.inline_asm(T.i32(), [Uint32(x).ir_value(loc=loc, ip=ip) for x in operands], asm,
                            "=r," + ",".join("r" * len(operands)), has_side_effects=False, is_align_stack=False,
                            asm_dialect=llvm.AsmDialect.AD_ATT)
    return Uint32(value)


def widen_pair(codes: Uint32, lo: int, hi: int, kv_format: str, wide: str) -> Uint32:
    """Bytes ``lo`` and ``hi`` (0..3) of ``codes`` as a 16-bit pair (low half from ``lo``)."""
    mask, shift, restore = _RULES[(kv_format, wide)]
    # bytes [0, lo, 0, hi]: each code in the high byte of its 16-bit half
    placed = _asm_u32("prmt.b32 $0, $1, $2, $3;", codes, Uint32(0), Uint32(0x0404 | (lo << 4) | (hi << 12)))
    if const_expr(shift == 0):
        return placed
    moved = ((placed >> shift) & Uint32(mask)) | (placed & Uint32(_SIGNS))
    if const_expr(restore is None):
        return moved
    return _asm_u32("fma.rn.bf16x2 $0, $1, $2, $3;", moved, Uint32(restore), Uint32(_SIGNS))
