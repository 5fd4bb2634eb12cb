"""Every routine ``cutefi-bench`` can run; an op family adds its routines to ``ROUTINES``."""

from __future__ import annotations

from .append_kv import AppendPagedKvCache, AppendPagedMlaKvCache
from .base import DTYPES, BenchInputError, Cost, Routine, ShapeFlag
from .ceilings import Attention, Copy, Matmul
from .decode import BatchDecode, SingleDecode
from .gemm import BmmBf16, MmBf16, MmFp32Out
from .gemm_fp8 import BmmFp8, GemmFp8Groupwise
from .grouped import GroupGemmFp8, SegmentGemm
from .merge import MergeStates
from .norm import FusedAddRmsNorm, LayerNorm, RmsNorm
from .norm_quant import FusedAddRmsNormQuant, LayerNormQuant, RmsNormQuant
from .norm_silu import FusedRmsNormSilu
from .prefill import BatchPrefill, SinglePrefill
from .rope import Rope
from .rope_quant import RopeQuantizeFp8
from .rope_quant_append import RopeQuantizeFp8AppendPagedKvCache

ROUTINES: dict[str, type[Routine]] = {
    routine.name: routine for routine in (
        RmsNorm, FusedAddRmsNorm, LayerNorm, RmsNormQuant, FusedAddRmsNormQuant, LayerNormQuant, FusedRmsNormSilu,
        Rope,
        RopeQuantizeFp8, RopeQuantizeFp8AppendPagedKvCache, MergeStates, AppendPagedKvCache, AppendPagedMlaKvCache,
        BatchDecode, SingleDecode, BatchPrefill, SinglePrefill,
        MmBf16, MmFp32Out, BmmBf16, BmmFp8, GemmFp8Groupwise, SegmentGemm, GroupGemmFp8, Copy, Matmul, Attention)
}

__all__ = ["DTYPES", "ROUTINES", "BenchInputError", "Cost", "Routine", "ShapeFlag"]
