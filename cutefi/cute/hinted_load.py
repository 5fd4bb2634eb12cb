"""64- and 128-bit global loads with L1 and L2 eviction priorities, which the DSL's copy atoms do not
expose together (``CopyG2ROp`` takes the L1 priority only):

    ld.global.L1::<priority>.L2::cache_hint.v{2,4}.b32 {..}, [addr], policy

where ``policy`` comes from ``createpolicy.fractional.L2::<priority>.b64 policy, 1.0``.

A row norm that reads its row twice (once for the statistics, once to scale it) marks the first
read evict-last, so the second is an L1 hit, and the second evict-first, so the lines leave the
caches before the output's (inductor's RMSNorm does the same; ``norm/launch.py`` has the
measurements)."""

from __future__ import annotations

import cutlass
import cutlass.cute as cute
from cutlass import Uint32, Uint64, const_expr
from cutlass._mlir.dialects import llvm
from cutlass.cutlass_dsl import T, dsl_user_op

PRIORITIES = ("evict_first", "evict_last", "evict_normal")


@dsl_user_op
def l2_policy(priority: str, *, loc=None, ip=None) -> Uint64:
    """A cache policy that gives every line it touches the L2 ``priority``."""
    if priority not in PRIORITIES[:2]:
        raise ValueError(f"L2 policy: priority must be one of {PRIORITIES[:2]}; got {priority!r}")
    value = llvm.inline_asm(T.i64(), [], f"createpolicy.fractional.L2::{priority}.b64 $0, 1.0;", "=l",
                            has_side_effects=False, is_align_stack=False, asm_dialect=llvm.AsmDialect.AD_ATT)
    return Uint64(value)


@dsl_user_op
def _load_words(address: Uint64, policy: Uint64, l1_priority: str, words: int, *, loc=None, ip=None):
    # (side effects: two loads of the same address with different priorities stay two loads,
    # in program order)
    result_type = llvm.StructType.get_literal([T.i32()] * words)
    outputs = ", ".join(f"${i}" for i in range(words))
    result = llvm.inline_asm(
        result_type, [Uint64(address).ir_value(loc=loc, ip=ip), Uint64(policy).ir_value(loc=loc, ip=ip)],
        f"ld.global.L1::{l1_priority}.L2::cache_hint.v{words}.b32 {{{outputs}}}, [${words}], ${words + 1};",
        ",".join(["=r"] * words + ["l", "l"]), has_side_effects=True, is_align_stack=False,
        asm_dialect=llvm.AsmDialect.AD_ATT)
    return [Uint32(llvm.extractvalue(T.i32(), result, [i], loc=loc, ip=ip)) for i in range(words)]


@cute.jit
def load_chunk(src: cute.Tensor, dst: cute.Tensor, k: cutlass.Constexpr, policy: Uint64,
               l1_priority: cutlass.Constexpr):
    """Chunk ``k`` of ``dst`` (registers, ``((vec, 1), 1, K)`` of 16-bit elements: 64 or 128 bits
    a chunk) = chunk ``k`` of ``src`` (global, aligned to the chunk), with the L2 ``policy``
    (``l2_policy``) and the L1 priority ``l1_priority``."""
    if const_expr(l1_priority not in PRIORITIES):
        raise ValueError(f"L1 priority must be one of {PRIORITIES}; got {l1_priority!r}")
    words = cute.recast_tensor(dst, Uint32)
    per_chunk = const_expr(cute.size(words, mode=[0]))
    assert per_chunk in (2, 4), "a chunk is one 64- or 128-bit access"
    values = _load_words(Uint64(src[None, None, k].iterator.toint()), policy, l1_priority, per_chunk)
    for i in cutlass.range_constexpr(per_chunk):
        words[i + per_chunk * k] = values[i]


@cute.jit
def load_chunks(src: cute.Tensor, dst: cute.Tensor, pred: cute.Tensor, policy: Uint64,
                l1_priority: cutlass.Constexpr):
    """Every chunk of ``src`` whose ``pred[0, 0, k]`` holds into ``dst`` (``load_chunk``); other
    chunks keep their values."""
    for k in cutlass.range_constexpr(cute.size(src, mode=[2])):
        if pred[0, 0, k]:
            load_chunk(src, dst, k, policy, l1_priority)
