"""Build a spec for a target: CuTe DSL (or NVRTC) → cubin + PTX + checked metadata.

Runs on any machine, GPU or not: the DSL compiles against fake arguments made from the
kernel's contract, with ``--gpu-arch``. A CuTe DSL kernel's host function takes exactly one
argument, the contract's ``KernelArgs``, and launches through ``cutefi.cute.args.launch``,
which hands the DSL the contract's grid, block, cluster and shared memory: the parameter
list and the geometry are each stated once, so nothing has to be read back out of the DSL's
lowered host code. Before an artifact is returned, the contract is checked against the PTX
(each parameter's kind, size and alignment; ``.reqntid``, ``.minnctapersm`` and the cluster
directives) and the cubin's ELF target. A mismatch raises ``ContractMismatchError`` and
nothing is cached. ``cute.compile`` is not thread-safe: build in parallel with processes.
"""

from __future__ import annotations

import inspect
import tempfile
import time
from typing import Any

from .._version import __version__
from .cache import Artifact
from .contract import LaunchContract, Param
from .ptx import PtxEntry, PtxParam, cubin_target, ptx_entries
from .spec import KernelSpec, toolchain_id
from .targets import Target


class ContractMismatchError(RuntimeError):
    """The compiled kernel does not match the launch contract its author declared."""


def build(spec: KernelSpec, target: Target) -> Artifact:
    """Compile ``spec`` for ``target`` and check it against its launch contract."""
    contract = spec.launch_contract()
    started = time.perf_counter()
    if spec.kind == "cute":
        cubin, ptx = _build_cute(spec, contract, target)
    elif spec.kind == "nvrtc":
        from .nvrtc import compile_cuda

        source, _name = spec.builder_fn()(**spec.option_dict)
        cubin, ptx = compile_cuda(source, target)
    else:
        raise ValueError(f"unknown builder kind {spec.kind!r}")
    seconds = time.perf_counter() - started

    entry = check_contract(spec, contract, target, cubin, ptx)
    metadata = {
        "spec": spec.describe(),
        "name": spec.name,
        "kind": spec.kind,
        "entry": entry,
        "target": target.sm,
        "toolchain": toolchain_id(spec.kind),
        "cutefi": __version__,
        "fingerprint": spec.fingerprint(),
        "build_seconds": round(seconds, 3),
        "contract": contract.describe(),
    }
    return Artifact(cubin=cubin, metadata=metadata, ptx=ptx)


def _build_cute(spec: KernelSpec, contract: LaunchContract, target: Target) -> tuple[bytes, str]:
    import cutlass.cute as cute

    from ..cute.args import fake_args

    jit_fn = spec.builder_fn()(**spec.option_dict)
    _require_one_argument(spec, jit_fn)
    with tempfile.TemporaryDirectory(prefix="cutefi-build-") as dump_dir:
        compiled = cute.compile(
            jit_fn, fake_args(contract),
            options=f"--gpu-arch {target.sm} --keep-cubin --keep-ptx --dump-dir {dump_dir}",
        )
        cubin, ptx = compiled.__cubin__, compiled.__ptx__
    if not isinstance(cubin, (bytes, bytearray)) or not cubin:
        # e.g. a target the DSL takes as a flag but builds under another name (sm_110a with
        # the CUDA 12.9 DSL): __cubin__ is then a path to a file that was never written
        raise RuntimeError(f"CuTe DSL produced no cubin for {spec.describe()} on {target.sm} "
                           f"(got {type(cubin).__name__}); this DSL cannot build {target.sm}")
    return bytes(cubin), ptx


def _require_one_argument(spec: KernelSpec, jit_fn: Any) -> None:
    """A kernel's host function takes the contract's KernelArgs and nothing else: parameters
    listed by position could be ordered differently from the contract."""
    call = jit_fn if inspect.isfunction(jit_fn) else type(jit_fn).__call__
    params = [p for p in inspect.signature(inspect.unwrap(call)).parameters.values() if p.name != "self"]
    if len(params) != 1 or params[0].kind not in (params[0].POSITIONAL_ONLY, params[0].POSITIONAL_OR_KEYWORD):
        raise ContractMismatchError(
            f"{spec.describe()}: the kernel's host function must take one argument, the contract's "
            f"KernelArgs (cutefi.cute.args), not {[p.name for p in params]}: list parameters in the "
            f"contract only"
        )


_PTX_TYPES = {"ptr": ("u64", "b64", "s64"), "i64": ("u64", "b64", "s64"), "i32": ("u32", "b32", "s32"),
              "f32": ("f32", "b32"), "tma": ("b8",)}


def _param_mismatch(declared: Param, found: PtxParam, strict_pointers: bool) -> str | None:
    if found.type not in _PTX_TYPES[declared.kind] or found.size != declared.size:
        return f"PTX has .{found.type} of {found.size} bytes"
    if declared.kind == "tma" and found.align != 64:
        return f"PTX aligns it to {found.align}, a descriptor needs 64"
    if strict_pointers and (declared.kind == "ptr") != (found.pointer_align is not None):
        return "PTX marks it as a pointer" if found.pointer_align else "PTX does not mark it as a pointer"
    if strict_pointers and declared.kind == "ptr" and found.pointer_align != declared.align:
        return f"PTX assumes {found.pointer_align}-byte alignment"
    return None


def check_contract(spec: KernelSpec, contract: LaunchContract, target: Target, cubin: bytes,
                   ptx: str) -> str:
    """Raise ContractMismatchError unless the build matches ``contract``; return the entry name."""
    where = f"{spec.describe()} on {target.sm}"
    built_for = cubin_target(cubin)
    # Compilers mark a cubin with no arch-specific instructions as portable ('f' or plain)
    # even when built for an 'a' target, so the suffix may be weaker, never stronger.
    weaker = {"a": ("a", "f", ""), "f": ("f", ""), "": ("",)}[target.suffix]
    if built_for.cc != target.cc or built_for.suffix not in weaker:
        raise ContractMismatchError(f"{where}: cubin ELF header names {built_for.sm}")

    entries = ptx_entries(ptx)
    if len(entries) != 1:
        raise ContractMismatchError(f"{where}: expected one kernel entry, PTX has {sorted(entries)}")
    (entry,) = entries.values()
    if contract.entry and not entry.name.startswith(contract.entry):
        raise ContractMismatchError(f"{where}: entry {entry.name!r} does not carry the contract's "
                                    f"name {contract.entry!r}")
    if len(entry.params) != len(contract.params):
        raise ContractMismatchError(
            f"{where}: contract declares {len(contract.params)} parameters "
            f"({', '.join(contract.names)}), PTX entry has {len(entry.params)}: "
            f"{[(p.type, p.size) for p in entry.params]}"
        )
    # DSL kernels mark pointers with their assumed alignment; NVRTC's plain C++ does not
    strict = spec.kind == "cute"
    for position, (declared, found) in enumerate(zip(contract.params, entry.params)):
        problem = _param_mismatch(declared, found, strict)
        if problem:
            raise ContractMismatchError(
                f"{where}: parameter {position} {declared.name!r} is declared {declared.kind}"
                f"{f' ({declared.dtype}, align {declared.align})' if declared.kind == 'ptr' else ''}; "
                f"{problem}"
            )
    if strict:
        _check_geometry(where, contract, entry)
    return entry.name


def _check_geometry(where: str, contract: LaunchContract, entry: PtxEntry) -> None:
    """The directives the DSL writes from the launch it was given (by cutefi.cute.args.launch).

    The cluster shape leaves no trace in PTX or cubin (the DSL 4.8 writes no
    ``.reqnctapercluster``); it reaches the DSL and the driver from the one contract field.
    """
    expected = {"reqntid": tuple(contract.block)}
    if contract.min_ctas_per_sm:
        expected["minnctapersm"] = (contract.min_ctas_per_sm,)
    if "reqnctapercluster" in entry.directives:
        expected["reqnctapercluster"] = tuple(contract.cluster)
    for directive, value in expected.items():
        found = entry.directives.get(directive)
        if found is not None and len(found) < len(value):
            found = found + (1,) * (len(value) - len(found))
        if found != value:
            raise ContractMismatchError(
                f"{where}: the contract implies .{directive} {value}, the PTX entry has {found}: was the "
                f"kernel launched through cutefi.cute.args.launch?"
            )
    unexpected = set(entry.directives) - set(expected) - {"maxntid", "maxclusterrank"}
    if unexpected:
        raise ContractMismatchError(f"{where}: PTX entry has directives {sorted(unexpected)} the contract "
                                    f"does not declare")
