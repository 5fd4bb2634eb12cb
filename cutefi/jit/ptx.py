"""Reading what a build produced: PTX entry parameters and the cubin's ELF target."""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass

from .targets import Target

_ENTRY = re.compile(r"\.entry\s+([\w$]+)\s*\(([^)]*)\)", re.S)
_PARAM = re.compile(
    r"\.param\s+(?:\.align\s+(\d+)\s+)?\.(\w+)\s+(?:\.ptr\s+(?:\.\w+\s+)*(?:\.align\s+(\d+)\s+)?)?"
    r"([\w$]+)(?:\[(\d+)\])?"
)
_SCALAR_BYTES = {"u8": 1, "b8": 1, "s8": 1, "u16": 2, "b16": 2, "s16": 2, "f16": 2,
                 "u32": 4, "b32": 4, "s32": 4, "f32": 4, "u64": 8, "b64": 8, "s64": 8, "f64": 8}


@dataclass(frozen=True)
class PtxParam:
    name: str
    size: int
    align: int


def ptx_entries(ptx: str) -> dict[str, list[PtxParam]]:
    """Every ``.entry`` in ``ptx`` with its parameters' sizes and alignments."""
    entries = {}
    for match in _ENTRY.finditer(ptx):
        params = []
        for chunk in match.group(2).split(","):
            chunk = chunk.strip()
            if not chunk:
                continue
            param = _PARAM.search(chunk)
            if param is None:
                raise ValueError(f"cannot read PTX parameter {chunk!r}")
            align_prefix, kind, align_ptr, name, count = param.groups()
            elem = _SCALAR_BYTES[kind]
            size = elem * int(count or 1)
            align = int(align_prefix or 0) or elem
            params.append(PtxParam(name=name, size=size, align=align))
        entries[match.group(1)] = params
    return entries


def cubin_target(cubin: bytes) -> Target:
    """The target an NVIDIA cubin's ELF header names (both ELF ABI versions 7 and 8)."""
    if cubin[:4] != b"\x7fELF":
        raise ValueError("not an ELF file")
    e_flags = struct.unpack_from("<I", cubin, 48 if cubin[4] == 2 else 36)[0]
    if cubin[7] == 0x41:  # ABI v8 (CUDA 12.8+ for sm_100 and newer): arch in bits 8..15
        sm = (e_flags >> 8) & 0xFF
        suffix = "a" if e_flags & 0x8 else ("f" if e_flags & 0x2 else "")
    else:  # ABI v7: arch in bits 0..7, arch-specific flag 0x800
        sm = e_flags & 0xFF
        suffix = "a" if (e_flags >> 8) & 0x8 else ""
    return Target(sm // 10, sm % 10, suffix)
