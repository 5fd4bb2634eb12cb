"""Contract and specs of the fill kernel (``fill_kernel.py``, CUDA C++ through NVRTC)."""

from __future__ import annotations

from ..jit.contract import LaunchContract, Param, ceil_div
from ..jit.policy import Family
from ..jit.registry import register
from ..jit.spec import KernelSpec

THREADS = 256
MAX_BLOCKS = 65535
WORD_DTYPES = {8: "u8", 16: "i32", 32: "i32"}  # what the pointer is declared as (NVRTC: unchecked)


def fill_grid(problem):
    return (min(MAX_BLOCKS, max(1, ceil_div(problem["count"], THREADS))), 1, 1)


def contract(bits: int) -> LaunchContract:
    return LaunchContract(
        params=(Param("out", "ptr", WORD_DTYPES[bits]), Param("count", "i64"), Param("value", "i32")),
        block=(THREADS, 1, 1), grid=fill_grid, sample={"count": 4096},
    )


FILL_SPECS = {
    bits: KernelSpec.make("fill.fill", "nvrtc", "cutefi.fill.fill_kernel:cuda_source",
                          "cutefi.fill.launch:contract", Family.SIMT, bits=bits)
    for bits in (8, 16, 32)
}
register(*FILL_SPECS.values())
