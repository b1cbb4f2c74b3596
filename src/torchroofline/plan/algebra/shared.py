"""Work done once: the same product computed twice is computed once (a common subexpression),
and a product whose operand is broadcast along its rows is one row, broadcast."""

from __future__ import annotations

import torch

from ...costs import aten
from ...trace.refs import TracedOp
from ._core import Graph, Match, algebra_rule

#: Ops whose repeat a rule removes: the expensive, deterministic ones (a repeated cheap op
#: moves no bound)
_PRODUCTS = [aten.mm, aten.addmm, aten.bmm, aten.baddbmm, aten.convolution, aten.mv]


def _arguments(op: TracedOp) -> tuple:
    """``op``'s non-tensor arguments (tensors as None): equal for equal calls."""
    leaves = (*op.args, *sorted(op.kwargs.items()))
    return tuple(None if isinstance(a, torch.Tensor) else repr(a) for a in leaves)


@algebra_rule(_PRODUCTS)
def common_subexpression(graph: Graph, root: int) -> Match | None:
    """f(a, b) computed twice on the same values (the same versions: no write between) is one
    value: the second is the first. Neither output may be written in place afterwards."""
    op = graph.op(root)
    key = (op.name, op.reads, _arguments(op))
    first = graph.first_call.setdefault(key, root)
    if first == root:
        return None
    earlier = graph.op(first).writes[0]
    ours = op.writes[0]
    if (earlier.shape, earlier.strides) != (ours.shape, ours.strides) or any(
        len(graph.writers.get(ref.storage_id, ())) != 1 for ref in (earlier, ours)
    ):
        return None
    return Match("common subexpression", root, (earlier,), None, root)


@algebra_rule([aten.mm, aten.addmm])
def broadcast_rows(graph: Graph, root: int) -> Match | None:
    """x.expand(M, K) @ W has M equal rows: (x @ W) once, broadcast (a bias added to every row
    the same: (b + x @ W) once too)."""
    op = graph.op(root)
    *bias, left, right = op.reads
    rows = left.shape[0]
    if rows <= 1 or len(left.strides) != 2 or left.strides[0] != 0:
        return None
    if bias and len(bias[0].shape) == 2 and bias[0].shape[0] != 1 and bias[0].strides[0] != 0:
        return None
    beta, alpha = op.argument("beta", 1), op.argument("alpha", 1)

    def build(x: torch.Tensor, w: torch.Tensor, *b: torch.Tensor) -> torch.Tensor:
        row = x[:1]
        y = torch.addmm(b[0].expand(rows, -1)[:1], row, w, beta=beta, alpha=alpha) if b else (
            row @ w
        )
        return y.expand(rows, -1).contiguous()

    return Match("broadcast operand computed once", root, (left, right, *bias), build, root)
