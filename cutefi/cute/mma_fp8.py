"""Warp-level FP8 MMA (``mma.sync`` m16n8k32/k16) whose A and B take different FP8 formats.

PTX's FP8 ``mma.sync`` chooses ``.atype`` and ``.btype`` independently (e4m3 x e5m2 is legal,
as FlashInfer's ``bmm_fp8`` takes it), and the CuTe DSL atom type does too, but its
``MmaFP8Op`` passes one type for both: this op hands the atom both. Same instruction, same
fragments; only B's element type differs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Type

import cutlass._mlir.dialects.cute_nvgpu as _cute_nvgpu_ir
from cutlass import Float8E4M3FN, Float8E5M2, Float16, Float32
from cutlass.cute.atom import make_atom
from cutlass.cute.core import _pack_shape
from cutlass.cute.nvgpu import warp

FP8_TYPES = (Float8E4M3FN, Float8E5M2)


@dataclass(frozen=True)
class MmaFP8MixedOp(warp.MmaFP8Op):
    """``MmaFP8Op`` with A of ``ab_dtype`` and B of ``b_dtype`` (each e4m3 or e5m2)."""

    b_dtype: Type = Float8E4M3FN

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.b_dtype not in FP8_TYPES or self.acc_dtype not in (Float16, Float32):
            raise ValueError(f"b_dtype must be Float8E4M3FN or Float8E5M2, got {self.b_dtype}")

    def _make_trait(self, *, loc=None, ip=None, **kwargs) -> warp.MmaFP8Trait:
        shape_mnk = _pack_shape(self.shape_mnk, loc=loc, ip=ip)
        atom_type = _cute_nvgpu_ir.MmaAtomSM89Type.get(shape_mnk.type.attribute, self.ab_dtype.mlir_type,
                                                      self.b_dtype.mlir_type, self.acc_dtype.mlir_type)
        return warp.MmaFP8Trait(make_atom(atom_type, loc=loc, ip=ip))
