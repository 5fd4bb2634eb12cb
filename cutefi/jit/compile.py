"""Build a spec for a target: CuTe DSL (or NVRTC) → cubin + PTX + checked metadata.

Runs on any machine, GPU or not: the DSL compiles against fake arguments with
``--gpu-arch``. Before an artifact is returned, the author's launch contract is checked
against what the compiler produced: the PTX ``.entry`` parameters (count, size, alignment),
the launch geometry in the lowered host module for the contract's sample problem, and the
target named by the cubin's ELF header. A mismatch raises ``ContractMismatchError`` and
nothing is cached. ``cute.compile`` is not thread-safe: build in parallel with processes.
"""

from __future__ import annotations

import tempfile
import time
from typing import Any

from .._version import __version__
from .cache import Artifact
from .contract import LaunchContract
from .hostir import evaluate_launch
from .ptx import cubin_target, ptx_entries
from .spec import KernelSpec, toolchain_id
from .targets import Target


class ContractMismatchError(RuntimeError):
    """The compiled kernel does not match the launch contract its author declared."""


def build(spec: KernelSpec, target: Target) -> Artifact:
    """Compile ``spec`` for ``target`` and check it against its launch contract."""
    contract = spec.launch_contract()
    started = time.perf_counter()
    if spec.kind == "cute":
        cubin, ptx, host_ir = _build_cute(spec, target)
    elif spec.kind == "nvrtc":
        from .nvrtc import compile_cuda

        source, _name = spec.builder_fn()(**spec.option_dict)
        cubin, ptx = compile_cuda(source, target)
        host_ir = None
    else:
        raise ValueError(f"unknown builder kind {spec.kind!r}")
    seconds = time.perf_counter() - started

    entry = check_contract(spec, contract, target, cubin, ptx, host_ir)
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


def _build_cute(spec: KernelSpec, target: Target) -> tuple[bytes, str, str]:
    import cutlass.cute as cute

    jit_fn, fake_args = spec.builder_fn()(**spec.option_dict)
    with tempfile.TemporaryDirectory(prefix="cutefi-build-") as dump_dir:
        compiled = cute.compile(
            jit_fn, *fake_args,
            options=f"--gpu-arch {target.sm} --keep-cubin --keep-ptx --dump-dir {dump_dir}",
        )
        cubin, ptx, host_ir = compiled.__cubin__, compiled.__ptx__, str(compiled.ir_module)
    if not cubin:
        raise RuntimeError(f"CuTe DSL produced no cubin for {spec.describe()} on {target.sm}")
    return bytes(cubin), ptx, host_ir


def check_contract(spec: KernelSpec, contract: LaunchContract, target: Target, cubin: bytes,
                   ptx: str, host_ir: str | None) -> str:
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
    (entry, params), = entries.items()
    if len(params) != len(contract.params):
        raise ContractMismatchError(
            f"{where}: contract declares {len(contract.params)} parameters "
            f"({', '.join(p.name for p in contract.params)}), PTX entry has {len(params)}: "
            f"{[(p.size, p.align) for p in params]}"
        )
    for declared, found in zip(contract.params, params):
        if (declared.size, declared.align) != (found.size, found.align):
            raise ContractMismatchError(
                f"{where}: parameter {declared.name!r} declared {declared.kind} "
                f"(size {declared.size}, align {declared.align}), PTX has size {found.size}, "
                f"align {found.align}"
            )

    if host_ir is not None:
        geometry = evaluate_launch(host_ir, contract.host_arg_values(contract.sample))
        expected: dict[str, Any] = {
            "grid": tuple(contract.grid(contract.sample)),
            "block": tuple(contract.block),
            "smem_bytes": contract.smem_bytes,
            "cluster": tuple(contract.cluster),
        }
        found_geometry = {
            "grid": geometry.grid, "block": geometry.block,
            "smem_bytes": geometry.smem_bytes, "cluster": geometry.cluster,
        }
        for name, value in expected.items():
            if found_geometry[name] != value:
                raise ContractMismatchError(
                    f"{where}: for the sample problem {dict(contract.sample)} the contract says "
                    f"{name}={value}, the DSL host code launches with {found_geometry[name]}"
                )
    return entry
