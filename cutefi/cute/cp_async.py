"""``cp.async`` forms the DSL's ``CopyG2SOp`` atom does not expose, from CuTe pointers:

- 16 bytes with an L2 prefetch size (``.L2::128B`` / ``.L2::256B``): the L2 fetches the whole
  aligned 128 or 256 bytes around the 16 requested from DRAM, so rows smaller than that (a 64-
  or 128-byte K/V row of one kv head, whose neighbour head's row another CTA reads at about the
  same time) come from DRAM in one access;
- 4 bytes, one scalar (a block scale staged by a GEMM's producer warp, ``staged_scales``).

Commit and wait with ``cute.arch.cp_async_commit_group/wait_group``, or tie them to an mbarrier
with ``cute.arch.cp_async_mbarrier_arrive_noinc``."""

from __future__ import annotations

from cutlass._mlir.dialects import llvm
from cutlass.cutlass_dsl import dsl_user_op


@dsl_user_op
def cp_async_16(dst, src, l2_prefetch: int, *, loc=None, ip=None) -> None:
    """Copy 16 bytes from global ``src`` to shared ``dst`` (CuTe pointers, 16-byte aligned),
    bypassing L1, with an L2 prefetch of ``l2_prefetch`` bytes (0, 64, 128 or 256)."""
    hint = f".L2::{l2_prefetch}B" if l2_prefetch else ""
    llvm.inline_asm(None, [dst.toint(loc=loc, ip=ip).ir_value(loc=loc, ip=ip), src.toint(loc=loc, ip=ip).ir_value(loc=loc, ip=ip)],
                    f"cp.async.cg.shared.global{hint} [$0], [$1], 16;", "r,l", has_side_effects=True,
                    is_align_stack=False, asm_dialect=llvm.AsmDialect.AD_ATT)


@dsl_user_op
def cp_async_4(dst, src, *, loc=None, ip=None) -> None:
    """Copy 4 bytes from global ``src`` to shared ``dst`` (CuTe pointers, 4-byte aligned), through L1."""
    llvm.inline_asm(None, [dst.toint(loc=loc, ip=ip).ir_value(loc=loc, ip=ip), src.toint(loc=loc, ip=ip).ir_value(loc=loc, ip=ip)],
                    "cp.async.ca.shared.global [$0], [$1], 4;", "r,l", has_side_effects=True,
                    is_align_stack=False, asm_dialect=llvm.AsmDialect.AD_ATT)
