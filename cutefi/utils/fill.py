"""``fill_``: write a raw bit pattern into every element (tests poison outputs with NaN bits).

Built with NVRTC from CUDA C++, which is how cutefi builds pieces where CuTe DSL does not
fit; it goes through the same targets, cache and loader as every other kernel.
"""

from __future__ import annotations

import torch

from .._checks import current_stream, require_contiguous, require_cuda
from ..jit.contract import LaunchContract, Param, ceil_div
from ..jit.lookup import get_kernel
from ..jit.policy import Family
from ..jit.registry import register
from ..jit.spec import KernelSpec

THREADS = 256
MAX_BLOCKS = 65535

_SOURCE = r"""
template <typename Word>
__device__ void fill_words(Word* __restrict__ out, long long count, Word value) {
    long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < count; i += stride) {
        out[i] = value;
    }
}
extern "C" __global__ void cutefi_fill_WIDTH(WORD* __restrict__ out, long long count, unsigned int value) {
    fill_words<WORD>(out, count, (WORD)value);
}
"""
_WORD = {8: "unsigned char", 16: "unsigned short", 32: "unsigned int"}


def cuda_source(bits: int) -> tuple[str, str]:
    """(CUDA C++ source, kernel name) of the fill kernel for ``bits``-wide elements."""
    name = f"cutefi_fill_{bits}"
    return _SOURCE.replace("WIDTH", str(bits)).replace("WORD", _WORD[bits]), name


def contract(bits: int) -> LaunchContract:
    return LaunchContract(
        params=(Param("out", "ptr"), Param("count", "i64"), Param("value", "i32")),
        block=(THREADS, 1, 1),
        grid=lambda problem: (min(MAX_BLOCKS, max(1, ceil_div(problem["count"], THREADS))), 1, 1),
        sample={"count": 4096},
    )


FILL_SPECS = {
    bits: KernelSpec.make("utils.fill", "nvrtc", "cutefi.utils.fill:cuda_source",
                          "cutefi.utils.fill:contract", Family.SIMT, bits=bits)
    for bits in _WORD
}
register(*FILL_SPECS.values())


def fill_(tensor: torch.Tensor, bits: int) -> torch.Tensor:
    """Fill ``tensor`` (CUDA, contiguous, 1/2/4-byte elements) with the raw pattern ``bits``."""
    device = require_cuda("tensor", tensor)
    require_contiguous("tensor", tensor)
    width = tensor.element_size() * 8
    if width not in FILL_SPECS:
        raise TypeError(f"fill_ takes 1-, 2- or 4-byte elements; tensor has {tensor.element_size()}-byte {tensor.dtype}")
    if not 0 <= bits < (1 << width):
        raise ValueError(f"bits must fit in {width} bits, got {bits:#x}")
    count = tensor.numel()
    if count == 0:
        return tensor
    kernel = get_kernel(FILL_SPECS[width], device)
    grid = kernel.contract.grid({"count": count})
    kernel.launch(grid, (tensor.data_ptr(), count, bits), current_stream(device), device)
    return tensor


_NAN_BITS = {torch.float16: 0x7FFF, torch.bfloat16: 0x7FFF, torch.float32: 0x7FFFFFFF}


def poison_(tensor: torch.Tensor) -> torch.Tensor:
    """Fill a floating tensor with NaN (tests: every element a kernel fails to write stays NaN)."""
    if tensor.dtype not in _NAN_BITS:
        raise TypeError(f"poison_ takes float16, bfloat16 or float32; got {tensor.dtype}")
    return fill_(tensor, _NAN_BITS[tensor.dtype])
