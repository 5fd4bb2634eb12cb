"""cutefi dtype names (``cutefi.dtypes``) → CuTe DSL numeric types."""

from __future__ import annotations

import cutlass

CUTE_DTYPES = {
    "bf16": cutlass.BFloat16,
    "fp16": cutlass.Float16,
    "fp32": cutlass.Float32,
    "i8": cutlass.Int8,
    "u8": cutlass.Uint8,
    "i32": cutlass.Int32,
    "i64": cutlass.Int64,
    "fp8e4m3": cutlass.Float8E4M3FN,
    "fp8e5m2": cutlass.Float8E5M2,
}


def cute_dtype(name: str):
    try:
        return CUTE_DTYPES[name]
    except KeyError:
        raise ValueError(f"no CuTe DSL type for dtype {name!r}; expected one of {sorted(CUTE_DTYPES)}") from None
