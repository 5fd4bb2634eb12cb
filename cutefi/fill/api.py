"""``fill_`` and ``poison_``: write a raw bit pattern into every element (tests poison outputs
with NaN bits, so an element a kernel fails to write is seen)."""

from __future__ import annotations

import torch

from .._capability import declare
from .._checks import require_contiguous, require_cuda, require_int, require_tensor
from .._library import compiling, define
from ..jit.logs import api_log
from ..jit.lookup import get_kernel
from ..jit.policy import Family
from . import launch


@api_log
def fill_(tensor: torch.Tensor, bits: int) -> torch.Tensor:
    """Fill ``tensor`` (CUDA, contiguous, 1/2/4-byte elements) with the raw pattern ``bits``
    (an int in [0, 2**(8 * element size)))."""
    if compiling():  # torch.compile traces this: one cutefi op in the graph (see _library)
        _FILL(tensor, bits)
        return tensor
    # types, values and layout first (CPU tensors reach these too); the device last
    require_tensor("tensor", tensor)
    if type(bits) is not int:
        bits = require_int("bits", bits)
    require_contiguous("tensor", tensor)
    width = tensor.element_size() * 8
    if width not in launch.FILL_SPECS:
        raise TypeError(f"fill_ takes 1-, 2- or 4-byte elements; tensor has {tensor.element_size()}-byte {tensor.dtype}")
    if not 0 <= bits < (1 << width):
        raise ValueError(f"bits must fit in {width} bits (0 <= bits < 2**{width}), got {bits:#x}")
    device = require_cuda("tensor", tensor)
    count = tensor.numel()
    if count == 0:
        return tensor
    if bits >= 1 << 31:  # `value` is declared i32 (the kernel reads it unsigned): the same 32 bits
        bits -= 1 << 32
    kernel = get_kernel(launch.FILL_SPECS[width], device)
    kernel.launch(launch.fill_grid({"count": count}), device, out=tensor.data_ptr(), count=count, value=bits)
    return tensor


_NAN_BITS = {torch.float16: 0x7FFF, torch.bfloat16: 0x7FFF, torch.float32: 0x7FFFFFFF,
             torch.float8_e4m3fn: 0x7F, torch.float8_e5m2: 0x7F}  # 0x7F: NaN in both FP8 formats


@api_log
def poison_(tensor: torch.Tensor) -> torch.Tensor:
    """Fill a floating tensor with NaN (tests: every element a kernel fails to write stays NaN)."""
    if require_tensor("tensor", tensor).dtype not in _NAN_BITS:
        raise TypeError(f"poison_ takes float16, bfloat16, float32, float8_e4m3fn or float8_e5m2; "
                        f"got {tensor.dtype}")
    return fill_(tensor, _NAN_BITS[tensor.dtype])


# ---- torch.compile: the op Dynamo records (poison_ calls fill_) ---------------------------
def _fill_bits(tensor: torch.Tensor, bits: int) -> None:
    fill_(tensor, bits)


_FILL = define("fill_bits(Tensor(a!) tensor, int bits) -> ()", _fill_bits, lambda tensor, bits: None)
declare(fill_, (Family.SIMT,), ("1-, 2- or 4-byte elements",))
declare(poison_, (Family.SIMT,), ("fp16", "bf16", "fp32"))
