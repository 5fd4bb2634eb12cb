"""Every build of the RoPE kernel (pure python): dtype x position source x index dtype x style."""

from __future__ import annotations

from ..jit.policy import Family
from ..jit.registry import register
from ..jit.spec import KernelSpec
from . import rope_launch as launch

ROPE_SPECS = {
    (dtype, positions, index_dtype, interleave): KernelSpec.make(
        "rope.rope", "cute", "cutefi.rope.rope_kernel:dsl_entry", "cutefi.rope.rope_launch:contract",
        Family.SIMT, dtype=dtype, positions=positions, index_dtype=index_dtype, interleave=interleave,
    )
    for dtype in launch.DTYPES for positions in launch.POSITION_SOURCES
    for index_dtype in launch.INDEX_DTYPES for interleave in (False, True)
}
register(*ROPE_SPECS.values())
