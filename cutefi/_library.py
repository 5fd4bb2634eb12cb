"""torch.compile support: every public op is also a ``torch.library`` op in the ``cutefi``
namespace, with a fake (meta) implementation and its mutations in the schema.

Eager calls never go through the dispatcher (a custom op's eager dispatch costs tens of µs,
cutefi's whole call a few): each public function starts with ``if compiling(): return
<the torch.ops call>``, so Dynamo, which traces that branch, records one opaque op per call
(no graph break) while eager code pays one cheap check. Ops are declared with explicit
schemas through one ``FRAGMENT`` library (about 0.1 ms an op at import, where
``torch.library.custom_op`` costs 0.7 ms and ``torch.compiler.substitute_in_graph`` imports
Dynamo, about a second).
"""

from __future__ import annotations

from typing import Any, Callable

import torch

NAMESPACE = "cutefi"
compiling: Callable[[], bool] = torch.compiler.is_compiling
_library = torch.library.Library(NAMESPACE, "FRAGMENT")


def define(schema: str, impl: Callable[..., Any], fake: Callable[..., Any]) -> Any:
    """Declare ``cutefi::<schema>`` with its CUDA implementation and fake implementation.

    ``schema`` is a torch schema string, e.g. ``"rmsnorm_out(Tensor(a!) out, Tensor input,
    Tensor weight, float eps, bool? enable_pdl) -> ()"``; mutated tensors carry ``(a!)``.
    Returns the ``torch.ops.cutefi.<name>`` packet.
    """
    name = schema.split("(", 1)[0]
    _library.define(schema)
    _library.impl(name, impl, "CUDA")
    torch.library.register_fake(f"{NAMESPACE}::{name}", fake, lib=_library)
    return getattr(torch.ops.cutefi, name)
