"""cutefi's element-type names, once: bits, torch dtype and TMA data type of each.

Kernel contracts and specs name dtypes by these short strings ("bf16", "fp32"); API modules
turn torch dtypes into them with :func:`name_of` and the DSL side maps them to CuTe types
in ``cutefi.cute.dtypes``. Pure Python: torch is imported only by the torch helpers.
"""

from __future__ import annotations

from typing import Any

# name -> (bits, torch dtype attribute, CUtensorMapDataType code or None)
DTYPES: dict[str, tuple[int, str, int | None]] = {
    "bf16": (16, "bfloat16", 9),
    "fp16": (16, "float16", 6),
    "fp32": (32, "float32", 7),
    "i8": (8, "int8", None),
    "u8": (8, "uint8", 0),
    "i32": (32, "int32", 3),
    "i64": (64, "int64", 5),
    "fp8e4m3": (8, "float8_e4m3fn", 0),
    "fp8e5m2": (8, "float8_e5m2", 0),
}

# the largest finite value of each FP8 format: what the FP8-quantising kernels saturate to
FP8_MAX: dict[str, float] = {"fp8e4m3": 448.0, "fp8e5m2": 57344.0}


def bits(name: str) -> int:
    try:
        return DTYPES[name][0]
    except KeyError:
        raise ValueError(f"unknown dtype {name!r}; expected one of {sorted(DTYPES)}") from None


def tma_code(name: str) -> int:
    code = DTYPES[name][2]
    if code is None:
        raise ValueError(f"dtype {name!r} has no TMA data type")
    return code


_BY_TORCH: dict[Any, str] = {}


def name_of(dtype: Any) -> str:
    """cutefi's name for a torch dtype; ValueError for one cutefi has no name for."""
    if not _BY_TORCH:
        import torch

        _BY_TORCH.update({getattr(torch, attr): name for name, (_, attr, _) in DTYPES.items()
                          if hasattr(torch, attr)})
    try:
        return _BY_TORCH[dtype]
    except KeyError:
        raise ValueError(f"dtype {dtype} is not supported by cutefi kernels") from None
