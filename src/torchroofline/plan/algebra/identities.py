"""Values that are constant for every finite input: the output is written, nothing upstream is
needed. Each identity holds over the reals (x − x = 0, x·0 = 0, exp(x)·exp(−x) = 1; the rows of
a softmax sum to 1 and a normalised row has mean 0: :mod:`.norms`); a tolerance check accepts a
kernel that writes the constant, so the bound may not charge the work that computes it."""

from __future__ import annotations

import torch

from ...costs import aten
from ...trace.refs import TensorRef
from ._core import Graph, Match, algebra_rule, scalar_argument


def _constant(graph: Graph, root: int, rule: str, value: float) -> Match:
    """``root``'s output replaced by ``value`` everywhere (of its dtype and shape)."""
    out = graph.op(root).writes[0]
    shape, dtype = out.shape, getattr(torch, out.dtype)
    return Match(rule, root, (), lambda: torch.full(shape, value, dtype=dtype), root)


#: the name of a difference that is 0 (the same value twice, or terms that cancel: .contraction)
SELF_DIFFERENCE = "x − x = 0"


@algebra_rule([aten.sub])
def self_difference(graph: Graph, root: int) -> Match | None:
    """x − x = 0 (alpha 1)."""
    op = graph.op(root)
    if len(op.reads) != 2 or op.reads[0] != op.reads[1] or op.argument("alpha", 1) != 1:
        return None
    return _constant(graph, root, SELF_DIFFERENCE, 0)


@algebra_rule([aten.mul])
def times_zero(graph: Graph, root: int) -> Match | None:
    """x·0 = 0 (finite x: ∞·0 is NaN, which the tolerance check's finite inputs never give)."""
    op = graph.op(root)
    if len(op.reads) != 1 or scalar_argument(op, 1) != 0 or not op.writes[0].is_float:
        return None
    return _constant(graph, root, "x·0 = 0", 0)


_REFLEXIVE = {aten.eq: True, aten.le: True, aten.ge: True,
              aten.ne: False, aten.lt: False, aten.gt: False}


@algebra_rule(list(_REFLEXIVE))
def self_comparison(graph: Graph, root: int) -> Match | None:
    """x == x, x <= x, x >= x are true and x != x, x < x, x > x false (finite, so no NaN)."""
    op = graph.op(root)
    if len(op.reads) != 2 or op.reads[0] != op.reads[1]:
        return None
    truth = _REFLEXIVE[op.func.overloadpacket]
    return _constant(graph, root, f"x {op.base} x = {truth}", truth)


def _exp_of(graph: Graph, ref: TensorRef) -> TensorRef | None:
    """The argument of the ``exp`` that wrote ``ref``'s value (None: no exp wrote it)."""
    found = graph.producer(ref)
    if found is None or found[1].func is None or found[1].func.overloadpacket is not aten.exp:
        return None
    argument = found[1].reads[0]
    return argument if argument.shape == ref.shape else None


def _negation_of(graph: Graph, ref: TensorRef) -> TensorRef | None:
    found = graph.producer(ref)
    if found is None or found[1].func is None or found[1].func.overloadpacket is not aten.neg:
        return None
    return found[1].reads[0]


@algebra_rule([aten.mul])
def exp_times_exp_negated(graph: Graph, root: int) -> Match | None:
    """exp(x)·exp(−x) = 1 (exp(x) finite and nonzero: the product is 1 up to rounding)."""
    op = graph.op(root)
    if len(op.reads) != 2:
        return None
    arguments = [_exp_of(graph, ref) for ref in op.reads]
    if None in arguments:
        return None
    first, second = arguments
    if _negation_of(graph, second) != first and _negation_of(graph, first) != second:
        return None
    return _constant(graph, root, "exp(x)·exp(−x) = 1", 1)
