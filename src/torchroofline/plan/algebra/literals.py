"""Zero and one tensors are literals: a known operand (:func:`..demand.known_values`: made from
shapes and constants, ``torch.zeros(1)`` in ``forward`` or a buffer) that is 0 or 1 throughout
acts as the number does.

Over the reals, for finite x: x·0 = 0 (∞·0 is NaN, which finite inputs never give), x·1 = x,
x / 1 = x, x + 0 = x − 0 = x. The product with zeros is written as a constant; the others are
x itself, where x has the output's shape, layout and dtype (no broadcast, no promotion),
neither is written in place afterwards, and the output is no output of the model (a kernel
writes its outputs: ``return x * ones`` still copies x).
"""

from __future__ import annotations

import torch

from ...costs import aten
from ...trace.refs import TensorRef
from ._core import Graph, Match, algebra_rule

#: op → (the literal that leaves the other operand as it is, the positions it may sit at)
_NEUTRAL = {aten.mul: (1, (0, 1)), aten.div: (1, (1,)), aten.add: (0, (0, 1)),
            aten.sub: (0, (1,))}


def _everywhere(graph: Graph, ref: TensorRef, number: float) -> bool:
    value = graph.value(ref)
    return value is not None and value.numel() > 0 and bool((value == number).all())


@algebra_rule([aten.mul])
def times_zero_tensor(graph: Graph, root: int) -> Match | None:
    """x · zeros = 0 (finite x)."""
    op = graph.op(root)
    if len(op.reads) != 2 or not op.writes[0].is_float or not any(
        _everywhere(graph, ref, 0) for ref in op.reads
    ):
        return None
    out = op.writes[0]
    shape, dtype = out.shape, getattr(torch, out.dtype)
    return Match("x·0 = 0", root, (), lambda: torch.full(shape, 0, dtype=dtype), root)


@algebra_rule(list(_NEUTRAL))
def neutral_tensor(graph: Graph, root: int) -> Match | None:
    """x·1 = x / 1 = x + 0 = x − 0 = x: the output is the other operand."""
    op = graph.op(root)
    if len(op.reads) != 2 or op.argument("alpha", 1) != 1 or (
        op.argument("rounding_mode") is not None
    ):
        return None
    number, positions = _NEUTRAL[op.func.overloadpacket]
    out = op.writes[0]
    if out.value_id in graph.trace.output_value_ids:
        return None
    for position in positions:
        other = op.reads[1 - position]
        if _everywhere(graph, op.reads[position], number) and (
            (other.shape, other.strides, other.dtype) == (out.shape, out.strides, out.dtype)
        ) and all(len(graph.writers.get(ref.storage_id, ())) <= 1 for ref in (other, out)):
            return Match(f"x {op.base} {number} = x", root, (other,), None, root)
    return None
