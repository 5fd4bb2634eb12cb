"""Programmatic dependent launch (PDL) inside kernels, for the target being compiled.

A kernel whose contract says ``pdl=True`` calls :func:`wait_for_inputs` before its first read
of memory an earlier kernel may write: with PDL the kernel may start while its predecessor
is still running, and ``griddepcontrol.wait`` holds it until that grid has finished and
flushed. Launched without PDL the wait returns at once. ``griddepcontrol`` exists from
sm_90 on; on older targets the wait compiles to nothing (the loader never asks for PDL
there).
"""

from __future__ import annotations

import cutlass.cute as cute
from cutlass.cutlass_dsl import BaseDSL


def target_has_pdl() -> bool:
    return BaseDSL._get_dsl().get_arch_enum().major >= 9


def wait_for_inputs() -> None:
    if target_has_pdl():
        cute.arch.griddepcontrol_wait()

