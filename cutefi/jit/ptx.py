"""Reading what a build produced: PTX entry parameters and directives, the cubin's ELF target."""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass

from .targets import Target

_ENTRY = re.compile(r"\.entry\s+([\w$]+)\s*\(([^)]*)\)([^{]*)\{", re.S)
_PARAM = re.compile(
    r"\.param\s+(?:\.align\s+(\d+)\s+)?\.(\w+)\s+(\.ptr\s+(?:\.\w+\s+)*?(?:\.align\s+(\d+)\s+)?)?"
    r"([\w$]+)(?:\[(\d+)\])?"
)
_DIRECTIVE = re.compile(r"\.(reqntid|maxntid|minnctapersm|reqnctapercluster|maxclusterrank)\s+([\d,\s]+)")
_SCALAR_BYTES = {"u8": 1, "b8": 1, "s8": 1, "u16": 2, "b16": 2, "s16": 2, "f16": 2,
                 "u32": 4, "b32": 4, "s32": 4, "f32": 4, "u64": 8, "b64": 8, "s64": 8, "f64": 8}


@dataclass(frozen=True)
class PtxParam:
    name: str
    type: str           # the PTX element type: u32, s64, f32, b8 ...
    size: int
    align: int
    pointer_align: int | None = None  # ``.ptr ... .align N`` (None: not marked as a pointer)


@dataclass(frozen=True)
class PtxEntry:
    name: str
    params: list[PtxParam]
    directives: dict[str, tuple[int, ...]]  # reqntid, minnctapersm, reqnctapercluster, ...


def ptx_entries(ptx: str) -> dict[str, PtxEntry]:
    """Every ``.entry`` in ``ptx`` with its parameters and performance directives."""
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
            align_prefix, kind, ptr, ptr_align, name, count = param.groups()
            elem = _SCALAR_BYTES[kind]
            params.append(PtxParam(
                name=name, type=kind, size=elem * int(count or 1), align=int(align_prefix or 0) or elem,
                pointer_align=(int(ptr_align) if ptr_align else 1) if ptr else None,
            ))
        directives = {name: tuple(int(v) for v in values.replace(",", " ").split())
                      for name, values in _DIRECTIVE.findall(match.group(3))}
        entries[match.group(1)] = PtxEntry(match.group(1), params, directives)
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
