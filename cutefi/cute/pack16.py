"""float32 pairs -> packed 16-bit pairs in one instruction each (``cvt.rn.{bf16,f16}x2.f32``).

``TensorSSA.to(bf16)`` converts element by element where a fragment's pairs are not laid out
the way the DSL vectorises (e.g. a wgmma accumulator of 112 columns): one conversion and one
byte permute (PRMT) an element, which ptxas may also sink past a wgmma fence. Converting each
pair into one 32-bit register here keeps it at one instruction per two elements.
"""

from __future__ import annotations

import cutlass
import cutlass.cute as cute
from cutlass import Float32, Uint32, const_expr
from cutlass._mlir.dialects import llvm
from cutlass.cutlass_dsl import T, dsl_user_op


@dsl_user_op
def _cvt_pair(low: Float32, high: Float32, asm_type: str, *, loc=None, ip=None) -> Uint32:
    # (the instruction's first source fills the high half)
    value = llvm.inline_asm(T.i32(), [Float32(high).ir_value(loc=loc, ip=ip), Float32(low).ir_value(loc=loc, ip=ip)],
                            f"cvt.rn.{asm_type}x2.f32 $0, $1, $2;", "=r,f,f", has_side_effects=False,
                            is_align_stack=False, asm_dialect=llvm.AsmDialect.AD_ATT)
    return Uint32(value)


@dsl_user_op
def byte_perm(low: Uint32, high: Uint32, selector: Uint32, *, loc=None, ip=None) -> Uint32:
    """``prmt.b32``: byte ``i`` of the result is byte ``selector`` nibble ``i`` of ``high:low``
    (bytes 0-3 from ``low``, 4-7 from ``high``); a run-time selector costs no more."""
    operands = [Uint32(x).ir_value(loc=loc, ip=ip) for x in (low, high, selector)]
    value = llvm.inline_asm(T.i32(), operands, "prmt.b32 $0, $1, $2, $3;", "=r,r,r,r", has_side_effects=False,
                            is_align_stack=False, asm_dialect=llvm.AsmDialect.AD_ATT)
    return Uint32(value)


@cute.jit
def convert_pairs(src: cute.Tensor, dst: cute.Tensor):
    """``dst`` (bf16 or f16 registers) = ``src`` (fp32 registers, the same number of elements
    in the same flat order), rounded to nearest even, two elements an instruction."""
    asm_type = "bf16" if const_expr(dst.element_type == cutlass.BFloat16) else "f16"
    packed = cute.recast_tensor(dst, Uint32)
    for i in cutlass.range_constexpr(cute.size(packed)):
        packed[i] = _cvt_pair(src[2 * i], src[2 * i + 1], asm_type)


@cute.jit
def widen(src: cute.Tensor) -> cute.TensorSSA:
    """``src`` (bf16 or f16 registers) as float32 values in the same flat order. bf16 is read
    a packed word at a time (a shift or a mask an element): element-wise conversions of a
    tensor that is also loaded under a predicate made the compiler split every word into
    halves first (two byte permutes an element more)."""
    if const_expr(src.element_type != cutlass.BFloat16):
        return src.load().to(Float32)
    words = cute.recast_tensor(src, Uint32)
    values = cute.make_rmem_tensor_like(src, Float32)
    flat = cute.make_tensor(values.iterator, cute.make_layout(cute.size(values)))
    for i in cutlass.range_constexpr(cute.size(words)):
        word = words[i]
        flat[2 * i] = (word << 16).bitcast(Float32)
        flat[2 * i + 1] = (word & Uint32(0xFFFF0000)).bitcast(Float32)
    return values.load()
