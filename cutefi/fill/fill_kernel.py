"""CUDA C++ source of the fill kernel, built by NVRTC (cutefi's path for pieces where CuTe DSL
does not fit); it goes through the same targets, cache, contract check and loader."""

from __future__ import annotations

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
WORDS = {8: "unsigned char", 16: "unsigned short", 32: "unsigned int"}


def cuda_source(bits: int) -> tuple[str, str]:
    """(CUDA C++ source, kernel name) of the fill kernel for ``bits``-wide elements."""
    return _SOURCE.replace("WIDTH", str(bits)).replace("WORD", WORDS[bits]), f"cutefi_fill_{bits}"
