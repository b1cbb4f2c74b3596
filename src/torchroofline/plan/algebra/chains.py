"""Matrix chains in their cheapest order: (A @ B) @ C = A @ (B @ C), so a chain of products may
be evaluated in any association, and the classic dynamic program finds the one with the fewest
multiply-adds. This covers (A @ B) @ v → A @ (B @ v), a low-rank operand x @ (u @ vᵀ) →
(x @ u) @ vᵀ, and two linear layers with no nonlinearity between, whose weights a kernel
multiplies first: (x @ W₁ + b₁) @ W₂ + b₂ = x @ (W₁ @ W₂) + (b₁ @ W₂ + b₂); and an outer
product operand (``torch.outer``) applied factor by factor.

Exact over the reals; the conditions: every inner product is read by the next one alone (else
it must be computed anyway) and is no view of another shape (a reshape between two products
is no chain)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from ...costs import aten
from ...trace.refs import TensorRef, TracedOp
from ._core import Graph, Match, algebra_rule

RULE = "matrix chain reassociated"
LINEAR_RULE = "linear layers multiplied out"


def _is_product(op: TracedOp, packets: Sequence = (aten.mm,)) -> bool:
    return op.func is not None and op.func.overloadpacket in packets


def _inner(
    graph: Graph, ref: TensorRef, reader: int, packets: Sequence
) -> tuple[int, TracedOp] | None:
    """The product that wrote ``ref`` (as it laid it out), if only ``reader`` reads it."""
    found = graph.producer(ref)
    if found is None or not _is_product(found[1], packets) or not graph.read_only_by(ref, reader):
        return None
    return found if found[1].writes[0] == ref else None


def _factors(graph: Graph, ref: TensorRef, reader: int) -> list[TensorRef]:
    """The matrices whose product ``ref`` is, through plain products read once."""
    found = _inner(graph, ref, reader, (aten.mm,))
    if found is None:
        return [ref]
    index, op = found
    return [f for operand in op.reads for f in _factors(graph, operand, index)]


def chain_order(dims: Sequence[int]) -> tuple[int, dict[tuple[int, int], int]]:
    """The fewest multiply-adds of a chain of matrices p₀×p₁, p₁×p₂, …, and where each
    sub-chain (i, j) splits in that order (the classic O(n³) dynamic program)."""
    count = len(dims) - 1
    cost = {(i, i): 0 for i in range(count)}
    split: dict[tuple[int, int], int] = {}
    for length in range(2, count + 1):
        for i in range(count - length + 1):
            j = i + length - 1
            cost[i, j], split[i, j] = min(
                (cost[i, k] + cost[k + 1, j] + dims[i] * dims[k + 1] * dims[j + 1], k)
                for k in range(i, j)
            )
    return cost[0, count - 1], split


def _as_written(graph: Graph, ref: TensorRef, reader: int) -> int:
    """Multiply-adds of the products as the program nests them."""
    found = _inner(graph, ref, reader, (aten.mm,))
    if found is None:
        return 0
    index, op = found
    left, right = op.reads
    return math.prod(left.shape) * right.shape[-1] + sum(
        _as_written(graph, operand, index) for operand in op.reads
    )


def _product(tensors: Sequence[torch.Tensor], split: dict, i: int, j: int) -> torch.Tensor:
    if i == j:
        return tensors[i]
    k = split[i, j]
    return _product(tensors, split, i, k) @ _product(tensors, split, k + 1, j)


@algebra_rule([aten.mm, aten.mv])
def reassociated_chain(graph: Graph, root: int) -> Match | None:
    """A chain of plain products (``mm``, a final ``mv``) evaluated in the order the dynamic
    program finds, where that takes fewer multiply-adds than the program's own."""
    op = graph.op(root)
    left, right = op.reads
    factors = _factors(graph, left, root) + _factors(graph, right, root)
    if len(factors) < 3 or any(len(f.shape) != 2 for f in factors[:-1]):
        return None
    vector = len(factors[-1].shape) == 1
    dims = [factors[0].shape[0], *(f.shape[-1] if len(f.shape) == 2 else 1 for f in factors)]
    best, split = chain_order(dims)
    traced = (
        _as_written(graph, left, root) + _as_written(graph, right, root)
        + math.prod(left.shape) * (1 if vector else right.shape[-1])
    )
    if best >= traced:
        return None

    def build(*tensors: torch.Tensor) -> torch.Tensor:
        tensors = [*tensors[:-1], tensors[-1].unsqueeze(-1) if vector else tensors[-1]]
        result = _product(tensors, split, 0, len(tensors) - 1)
        return result.squeeze(-1) if vector else result

    return Match(RULE, root, tuple(factors), build, root)


def _outer_factors(graph: Graph, ref: TensorRef, reader: int) -> tuple[TensorRef, TensorRef] | None:
    """(a, b) where ``ref`` is the outer product a[:, None] · b[None, :] a ``mul`` of a column
    and a row made (``torch.outer``), read by ``reader`` alone; None otherwise."""
    found = graph.producer(ref)
    if found is None or found[1].func is None or found[1].func.overloadpacket is not aten.mul:
        return None
    index, op = found
    if len(op.reads) != 2 or op.writes[0] != ref or not graph.read_only_by(ref, reader):
        return None
    rows, columns = ref.shape
    shapes = [(1,) * (2 - len(r.shape)) + tuple(r.shape) for r in op.reads]
    for (column, row), (a, b) in ((shapes, op.reads), (shapes[::-1], op.reads[::-1])):
        if column == (rows, 1) and row == (1, columns):
            return a, b
    return None


@algebra_rule([aten.mm])
def rank_one_operand(graph: Graph, root: int) -> Match | None:
    """x @ (a bᵀ) = (x @ a) bᵀ and (a bᵀ) @ y = a (bᵀ @ y): a product with an outer product is a
    matrix-vector product and a scaling, 2·M·K + M·N instead of 2·M·K·N."""
    op = graph.op(root)
    left, right = op.reads
    rows, columns = op.writes[0].shape
    factors = _outer_factors(graph, right, root)
    if factors is not None:
        inner = right.shape[0]

        def build_right(x: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
            return (x @ a.reshape(inner, 1)) * b.reshape(1, columns)

        return Match(RULE, root, (left, *factors), build_right, root)
    factors = _outer_factors(graph, left, root)
    if factors is None:
        return None
    inner = left.shape[1]

    def build_left(y: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return a.reshape(rows, 1) * (b.reshape(1, inner) @ y)

    return Match(RULE, root, (right, *factors), build_left, root)


@algebra_rule([aten.addmm])
def multiplied_out_linears(graph: Graph, root: int) -> Match | None:
    """Linear → Linear with nothing between: b₂ + (b₁ + x @ W₁) @ W₂ = x @ (W₁ @ W₂) +
    (b₁ @ W₂ + b₂), where the weight product and the smaller GEMM take fewer multiply-adds than
    the two GEMMs (a narrow second layer: Linear(1024, 1024) → Linear(1024, 1))."""
    op = graph.op(root)
    outer_bias, hidden, second = op.reads
    found = _inner(graph, hidden, root, (aten.addmm,))
    if found is None or any(
        o.argument(name, 1) != 1 for o in (op, found[1]) for name in ("alpha", "beta")
    ):
        return None
    inner_bias, x, first = found[1].reads
    rows, inner = x.shape
    width, out = second.shape
    traced = rows * width * (inner + out)
    shortcut = inner * width * out + rows * inner * out + width * out
    if shortcut >= traced or len(inner_bias.shape) != 1 or len(outer_bias.shape) > 1:
        return None

    def build(x: torch.Tensor, w1: torch.Tensor, w2: torch.Tensor, b1: torch.Tensor,
              b2: torch.Tensor) -> torch.Tensor:
        bias = torch.addmm(b2, b1.unsqueeze(0), w2)  # (1, out)
        return torch.addmm(bias, x, w1 @ w2)

    return Match(LINEAR_RULE, root, (x, first, second, inner_bias, outer_bias), build, root)
