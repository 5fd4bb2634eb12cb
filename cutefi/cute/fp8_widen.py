"""FP8 -> f16 widening of MMA operands, for every target (sm_80/86 have no FP8 instructions).

A 32-bit register holds four FP8 codes; ``widen_pair`` picks two of them (bytes ``lo`` and
``hi``) and returns the f16x2 pair holding them (low half from ``lo``). f16 holds every finite
e4m3 and e5m2 value exactly, so q (bf16 included) and P meet FP8 K and V in f16 MMAs:

  e5m2: the code is f16's high byte: one PRMT, exact.
  e4m3, sm_89 and newer: ``cvt.rn.f16x2.e4m3x2`` (one instruction, exact; a PRMT first when the
        two codes are not in one half).
  e4m3, sm_80/86: the code's bits moved into f16's fields (PRMT, shift, two logic ops): the
        value times 2^-8 (``widen_factor``: the kernel folds 2^8 into its fp32 scales; the
        smallest e4m3 subnormal, 2^-9, is the f16 subnormal 2^-17), so still exact.

The e4m3fn NaN codes widen to NaN in hardware and to +-480 in software (as FlashInfer's fast
dequantisation); a cache holds no NaN codes.
"""

from __future__ import annotations

from cutlass import Uint32, const_expr
from cutlass._mlir.dialects import llvm
from cutlass.cutlass_dsl import T, dsl_user_op

from .convert import has_fp8_convert
from .pack16 import byte_perm

_SIGNS = 0x80008000


def widen_factor(kv_format: str, software: bool = False) -> float:
    """What a widened value is short of on the target being compiled (2^8: software e4m3).
    ``software``: the integer path even where the target converts in hardware (tests)."""
    return 256.0 if kv_format == "fp8e4m3" and (software or not has_fp8_convert()) else 1.0


@dsl_user_op
def _asm_u32(asm: str, *operands, loc=None, ip=None) -> Uint32:
    value = llvm.inline_asm(T.i32(), [Uint32(x).ir_value(loc=loc, ip=ip) for x in operands], asm,
                            "=r," + ",".join("r" * len(operands)), has_side_effects=False, is_align_stack=False,
                            asm_dialect=llvm.AsmDialect.AD_ATT)
    return Uint32(value)


def _select(codes: Uint32, selector: int) -> Uint32:
    return byte_perm(codes, Uint32(0), Uint32(selector))


def widen_pair(codes: Uint32, lo: int, hi: int, kv_format: str, software: bool = False) -> Uint32:
    """Bytes ``lo`` and ``hi`` (0..3) of ``codes`` as an f16x2 pair (low half from ``lo``)."""
    if const_expr(kv_format == "fp8e4m3" and has_fp8_convert() and not software):
        if const_expr((lo, hi) not in ((0, 1), (2, 3))):  # both codes into the low half
            codes = _select(codes, 0x4400 | lo | (hi << 4))
            lo, hi = 0, 1
        half = "l" if lo == 0 else "h"
        return _asm_u32("{ .reg .b16 l, h; mov.b32 {l, h}, $1; cvt.rn.f16x2.e4m3x2 $0, " + half + "; }", codes)
    # bytes [0, lo, 0, hi]: each code in the high byte of its 16-bit half
    placed = _select(codes, 0x0404 | (lo << 4) | (hi << 12))
    if const_expr(kv_format == "fp8e5m2"):
        return placed
    return ((placed >> 1) & Uint32(0x3F803F80)) | (placed & Uint32(_SIGNS))


def widen_interleaved(codes: Uint32, kv_format: str, software: bool = False) -> tuple[Uint32, Uint32]:
    """(bytes 0 and 2, bytes 1 and 3) of ``codes`` as f16x2 pairs: ``widen_pair(codes, 0, 2)``
    and ``widen_pair(codes, 1, 3)``, with one PRMT for both where the hardware converts (bytes
    to 0, 2, 1, 3: each pair in one half) instead of one each (FP8 V from ldmatrix.trans)."""
    if const_expr(kv_format == "fp8e4m3" and has_fp8_convert() and not software):
        paired = _select(codes, 0x3120)
        return tuple(_asm_u32("{ .reg .b16 l, h; mov.b32 {l, h}, $1; cvt.rn.f16x2.e4m3x2 $0, " + half + "; }", paired)
                     for half in ("l", "h"))
    return widen_pair(codes, 0, 2, kv_format, software), widen_pair(codes, 1, 3, kv_format, software)


def f16x2_to_bf16x2(pair: Uint32) -> Uint32:
    """An f16x2 pair as a bf16x2 pair (exact for widened FP8 values: 3 mantissa bits)."""
    return _asm_u32("{ .reg .b16 l, h; .reg .f32 fl, fh; mov.b32 {l, h}, $1; cvt.f32.f16 fl, l; cvt.f32.f16 fh, h; "
                    "cvt.rn.bf16x2.f32 $0, fh, fl; }", pair)
