"""A kernel's parameters as one CuTe DSL argument, built from its launch contract.

A CuTe DSL kernel of cutefi takes a single :class:`KernelArgs`; the DSL flattens it into the
entry's parameters in the contract's order (the JitArgument / DynamicExpression protocols),
and the body reads fields by name (``args.x``, ``args.eps``). So the parameter list is
written once, in the contract, and a kernel cannot take its parameters in another order.
"""

from __future__ import annotations

from typing import Any

import cutlass
import cutlass.cute as cute
from cutlass.base_dsl.typing import get_mlir_types
from cutlass.base_dsl.utils.mlir_value_tree import extract_mlir_attributes
from cutlass.cute.runtime import make_fake_compact_tensor, make_ptr
from cutlass.cutlass_dsl import extract_mlir_values, new_from_mlir_values

from cutefi.jit.contract import LaunchContract
from cutefi.cute.dtypes import cute_dtype

_SCALARS = {"i32": cutlass.Int32, "i64": cutlass.Int64, "f32": cutlass.Float32}


class KernelArgs:
    """Named kernel parameters; read them as attributes or, in grid formulas, by ``[name]``."""

    def __init__(self, names: tuple[str, ...], values: dict[str, Any]) -> None:
        object.__setattr__(self, "_names", names)
        object.__setattr__(self, "_values", values)

    def __getattr__(self, name: str) -> Any:
        try:
            return self._values[name]
        except KeyError:
            raise AttributeError(f"the kernel contract has no parameter {name!r}; it has "
                                 f"{', '.join(self._names)}") from None

    def __getitem__(self, name: str) -> Any:
        return self.__getattr__(name)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("KernelArgs are read-only: use replace(...)")

    def replace(self, **values: Any) -> "KernelArgs":
        """The same parameters with some values swapped (e.g. tensors for TMA atoms)."""
        unknown = set(values) - set(self._names)
        if unknown:
            raise AttributeError(f"no parameters {sorted(unknown)} in {self._names}")
        return KernelArgs(self._names, {**self._values, **values})

    # -- CuTe DSL argument protocols: flatten in contract order, rebuild by name ------------
    def __get_mlir_types__(self) -> list:
        return [t for name in self._names for t in get_mlir_types(self._values[name])]

    def __c_pointers__(self) -> list:
        return []  # never called through the DSL's runtime: cutefi's loader launches

    def __extract_mlir_values__(self) -> list:
        # remembered per field: a TMA atom's values are not all visible through its types
        per_field = [extract_mlir_values(self._values[name]) for name in self._names]
        object.__setattr__(self, "_counts", [len(v) for v in per_field])
        return [v for values in per_field for v in values]

    def __extract_mlir_attributes__(self) -> list:
        # per-value argument attributes (a TMA atom's descriptor is a grid constant)
        return [a for name in self._names for a in extract_mlir_attributes(self._values[name])]

    def __new_from_mlir_values__(self, values: list) -> "KernelArgs":
        counts = self.__dict__.get("_counts") or [len(get_mlir_types(self._values[n])) for n in self._names]
        rebuilt = {}
        for name, count in zip(self._names, counts):
            rebuilt[name] = new_from_mlir_values(self._values[name], values[:count])
            values = values[count:]
        return KernelArgs(self._names, rebuilt)


def fake_args(contract: LaunchContract) -> KernelArgs:
    """Placeholders to compile against: pointers of the declared dtype and alignment, scalars
    from the contract's sample, TMA tensors of the recipe's placeholder shape."""
    values: dict[str, Any] = {}
    sample = contract.sample_problem()
    for param in contract.params:
        if param.kind == "ptr":
            values[param.name] = make_ptr(cute_dtype(param.dtype), param.align, cute.AddressSpace.gmem,
                                          assumed_align=param.align)
        elif param.kind == "tma":
            recipe = contract.recipe(param.name)
            order = tuple(range(recipe.rank - 1, -1, -1))  # row-major: last mode contiguous
            values[param.name] = make_fake_compact_tensor(
                cute_dtype(recipe.dtype), recipe.placeholder, stride_order=order, assumed_align=128)
        else:
            values[param.name] = _SCALARS[param.kind](sample[param.name])
    return KernelArgs(contract.names, values)


def launch(kernel: Any, contract: LaunchContract, args: KernelArgs, device_args: Any = None) -> None:
    """Launch ``kernel`` from a host function with the contract's geometry (the only place a
    cutefi kernel's grid, block, cluster and shared memory are given to the DSL).

    ``device_args``: what the kernel receives when it is not ``args`` itself (TMA kernels
    pass ``args.replace(...)`` with the atoms built on the host).
    """
    if contract.entry:
        # a deterministic PTX entry name (the DSL appends "_0")
        kernel.set_name_prefix(contract.entry, remove_cutlass_symbol=True, keep_mangled_name=False)
    options: dict[str, Any] = dict(
        grid=list(contract.grid(args)), block=list(contract.block), smem=contract.smem_bytes,
        # -1: no carveout preference (otherwise the DSL asks a device at compile time)
        preferred_smem_carveout=-1,
    )
    if contract.cluster != (1, 1, 1):
        options["cluster"] = list(contract.cluster)
    if contract.min_ctas_per_sm:
        options["min_blocks_per_mp"] = contract.min_ctas_per_sm
    kernel(args if device_args is None else device_args).launch(**options)
