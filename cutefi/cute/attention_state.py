"""Attention states and their online merge (device helpers; FlashInfer's convention).

An attention state of a row is its partial output ``v`` (normalised) and ``s``, the base-2
log-sum-exp of the scores it covers. States of disjoint index sets merge exactly:

    m = max(s_a, s_b);  w_x = 2^(s_x - m);  v = (w_a v_a + w_b v_b) / (w_a + w_b);  s = m + log2(w_a + w_b)

:func:`merge_state_update` does this online over any number of states, in registers. A state with
``s = -inf`` (an empty index set) has weight 0; if every state is empty the merged row is 0
with ``s = -inf`` (FlashInfer's merge_states does the same for zero states; its pairwise
merge would give NaN there).
"""

from __future__ import annotations

import cutlass
import cutlass.cute as cute
from cutlass import Float32

NEG_INF = float("-inf")


def merge_state_init(acc: cute.Tensor) -> cute.Tensor:
    """Start a merge: zero ``acc`` (the weighted sum of rows: an fp32 register fragment of this
    thread's elements) and return ``md``, a 2-element register tensor holding the running max
    ``m`` and weight sum ``d`` (registers, so that dynamic loops carry them)."""
    acc.fill(0.0)
    md = cute.make_rmem_tensor(cute.make_layout(2), Float32)
    md[0] = Float32(NEG_INF)
    md[1] = Float32(0.0)
    return md


@cute.jit
def merge_state_update(acc: cute.Tensor, md: cute.Tensor, lse: Float32, values: cute.TensorSSA):
    """Fold in one state: its log-sum-exp and its row (fp32, this thread's elements)."""
    m = md[0]
    m_new = cutlass.max(m, lse)
    # the reference the weights are taken against: 0 while every state so far is empty,
    # so that 2^(-inf - ref) is 0 and never 2^(-inf + inf) = NaN
    ref = cutlass.select_(m_new == Float32(NEG_INF), Float32(0.0), m_new)
    old = cute.math.exp2(m - ref, fastmath=True)
    weight = cute.math.exp2(lse - ref, fastmath=True)
    acc.store(acc.load() * old + values * weight)
    md[1] = md[1] * old + weight
    md[0] = m_new


def merge_states_update(acc: cute.Tensor, md: cute.Tensor, lses: list, values: list):
    """:func:`merge_state_update` of several states at once: one running-max update and one
    rescale for all of them, their weights independent of each other (no chain of
    exponentials from one state to the next)."""
    m = md[0]
    m_new = m
    for lse in lses:
        m_new = cutlass.max(m_new, lse)
    ref = cutlass.select_(m_new == Float32(NEG_INF), Float32(0.0), m_new)
    old = cute.math.exp2(m - ref, fastmath=True)
    weights = [cute.math.exp2(lse - ref, fastmath=True) for lse in lses]
    total = acc.load() * old
    d = md[1] * old
    for weight, value in zip(weights, values):
        total = total + value * weight
        d = d + weight
    acc.store(total)
    md[1] = d
    md[0] = m_new


@cute.jit
def merge_state_finish(acc: cute.Tensor, md: cute.Tensor):
    """(the merged row, normalised, as fp32 values; its base-2 log-sum-exp)."""
    d = md[1]
    nonempty = d > Float32(0.0)
    inv = cutlass.select_(nonempty, cute.arch.rcp_approx(d), Float32(0.0))
    lse = cutlass.select_(nonempty, md[0] + cute.math.log2(d, fastmath=True), Float32(NEG_INF))
    return acc.load() * inv, lse


@cute.jit
def finish_row(total: Float32, row_max: Float32, sink: Float32):
    """(O's multiplier, lse) of a softmax row: ``total`` its sum of 2^(s - row_max) over the
    keys (base-2 logits; ``row_max`` -inf and ``total`` 0 while nothing is visible) and
    ``sink`` a base-2 logit with no value that joins the denominator (-inf: none). A row with
    nothing at all gets 0 and -inf."""
    top = cute.arch.fmax(row_max, sink)
    ref = cutlass.select_(top == Float32(NEG_INF), Float32(0.0), top)
    keys = total * cute.math.exp2(row_max - ref, fastmath=True)
    denominator = keys + cute.math.exp2(sink - ref, fastmath=True)
    nonempty = denominator > Float32(0.0)
    inv = cutlass.select_(nonempty, cute.arch.rcp_approx(denominator), Float32(0.0)) * \
        cute.math.exp2(row_max - ref, fastmath=True)
    lse = cutlass.select_(nonempty, ref + cute.math.log2(denominator, fastmath=True), Float32(NEG_INF))
    return inv, lse


@cute.jit
def head_sink(sinks, heads, head, has_sinks) -> Float32:
    """Head ``head``'s attention sink as a base-2 logit (``sinks``: float32 [heads] in natural-log
    units, FlashInfer's), or -inf where the launch has none."""
    sink = Float32(NEG_INF)
    if has_sinks != 0:
        sink = cute.make_tensor(sinks, cute.make_layout(heads))[head] * Float32(1.4426950408889634)
    return sink
