"""Constant buffers with structure beyond zeros, turned into the cheaper op they are: a product
with a matrix of equal values is a row (or column) sum, with a triangle of equal values a
cumulative sum, and a convolution with a filter of equal values a box sum. The values must be
known from shapes and constants (a buffer built from ``ones``, a mask made in ``forward``);
parameters are data and never are."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ...costs import aten
from ...trace.refs import TensorRef
from ._core import Graph, Match, algebra_rule
from .network import constant_of

SUMS_RULE = "constant matrix product is a sum"
SCAN_RULE = "triangular constant product is a cumulative sum"
BOX_RULE = "constant filter is a box sum"
MASK_RULE = "triangular constant mask is a triangle"


def _constant(value: torch.Tensor | None) -> float | None:
    """The one value every element of ``value`` holds (None: unknown, or not all equal, or 0:
    zeros are the demand walk's known-operand rule)."""
    if value is None or not value.numel():
        return None
    first = value.reshape(-1)[0]
    if first == 0 or not bool((value == first).all()):
        return None
    return float(first)


def _triangle(value: torch.Tensor | None) -> tuple[float, bool] | None:
    """(c, upper) where a square ``value`` is c on and above (upper) or on and below its
    diagonal and 0 elsewhere; None otherwise."""
    if value is None or value.dim() != 2 or value.shape[0] != value.shape[1]:
        return None
    c = value[0, 0]
    if c == 0:
        return None
    full = torch.full_like(value, float(c))
    for upper in (True, False):
        if torch.equal(value, full.triu() if upper else full.tril()):
            return float(c), upper
    return None


#: ops that keep one triangle of a matrix (on and above the diagonal: True)
_TRIANGLES = {aten.triu: True, aten.tril: False}


def _made_triangle(graph: Graph, ref: TensorRef) -> tuple[float, bool] | None:
    """(c, upper) where ``ref`` reads, plain or transposed, a ``triu``/``tril`` (main diagonal)
    of a square matrix the program made with every element c ≠ 0 (``ones``, ``full``): known
    from the ops, at any size, where its values are too big to be known (``torch.tril(
    torch.ones(4096, 4096))``)."""
    found = graph.producer(ref)
    op = None if found is None else found[1]
    if op is None or op.func is None or op.func.overloadpacket not in _TRIANGLES or (
        op.argument("diagonal", 0) != 0 or len(ref.shape) != 2 or ref.shape[0] != ref.shape[1]
    ):
        return None
    written = op.writes[0]
    if ref.offset != written.offset or ref.shape != written.shape:
        return None
    c = constant_of(graph, op.reads[0])
    upper = _TRIANGLES[op.func.overloadpacket]
    if not c or ref.shape[0] > 1 and ref.strides not in (written.strides,
                                                          written.strides[::-1]):
        return None
    return c, upper if ref.strides == written.strides else not upper


def _plain_product(graph: Graph, root: int) -> tuple[TensorRef, TensorRef] | None:
    op = graph.op(root)
    if len(op.reads) != 2 or any(len(ref.shape) != 2 for ref in op.reads):
        return None
    return op.reads[0], op.reads[1]


@algebra_rule([aten.mm])
def constant_matrix_product(graph: Graph, root: int) -> Match | None:
    """A @ (c·1) = c·(Σ_k A[:, k]) on every column, (c·1) @ B = c·(Σ_k B[k, :]) on every row:
    K adds per row (column) instead of 2·K per output."""
    operands = _plain_product(graph, root)
    if operands is None:
        return None
    left, right = operands
    rows, columns = left.shape[0], right.shape[1]
    c = _constant(graph.value(right))
    if c is not None:
        return Match(SUMS_RULE, root, (left,), lambda a: (a.sum(1, keepdim=True) * c).expand(
            rows, columns).contiguous(), root)
    c = _constant(graph.value(left))
    if c is not None:
        return Match(SUMS_RULE, root, (right,), lambda b: (b.sum(0, keepdim=True) * c).expand(
            rows, columns).contiguous(), root)
    return None


@algebra_rule([aten.mm])
def triangular_constant_product(graph: Graph, root: int) -> Match | None:
    """A @ U with U = c on and above the diagonal: out[:, j] = c·Σ_{k≤j} A[:, k], a cumulative
    sum along the rows (c on and below: Σ_{k≥j}, the reversed one); L @ B with L = c on and
    below: out[i] = c·Σ_{k≤i} B[k], down the columns (on and above: reversed). One add per
    element instead of K multiply-adds per output."""
    operands = _plain_product(graph, root)
    if operands is None:
        return None
    left, right = operands
    for position, operand, other, dim in ((1, right, left, 1), (0, left, right, 0)):
        found = _triangle(graph.value(operand)) or _made_triangle(graph, operand)
        if found is None:
            continue
        c, upper = found
        # a forward scan for U on the right and for L on the left, else a reversed one
        forward = upper == (position == 1)

        def build(x: torch.Tensor, c: float = c, forward: bool = forward, dim: int = dim) -> (
            torch.Tensor
        ):
            scanned = x.cumsum(dim) if forward else x.flip(dim).cumsum(dim).flip(dim)
            return scanned if c == 1 else scanned * c

        return Match(SCAN_RULE, root, (other,), build, root)
    return None


@algebra_rule([aten.mul])
def triangular_constant_mask(graph: Graph, root: int) -> Match | None:
    """x · T with T = c on and below (above) the diagonal and 0 elsewhere: c·tril(x) (triu):
    the mask's zeros are the op's own, so the product it feeds is a triangular one (the demand
    walk's structure) at any size, where a mask too big to evaluate is data to the walk."""
    op = graph.op(root)
    if len(op.reads) != 2:
        return None
    for mask, other in (op.reads, op.reads[::-1]):
        found = _triangle(graph.value(mask)) or _made_triangle(graph, mask)
        if found is None or other.shape != op.writes[0].shape or len(other.shape) != 2 or (
            other.dtype != op.writes[0].dtype
        ):
            continue
        c, upper = found

        def build(x: torch.Tensor, c: float = c, upper: bool = upper) -> torch.Tensor:
            kept = x.triu() if upper else x.tril()
            return kept if c == 1 else kept * c

        return Match(MASK_RULE, root, (other,), build, root)
    return None


#: avg_pool of each spatial rank: what a box sum is priced as (an add per tap)
_POOLS = {1: F.avg_pool1d, 2: F.avg_pool2d, 3: F.avg_pool3d}


@algebra_rule([aten.convolution])
def constant_filter(graph: Graph, root: int) -> Match | None:
    """conv(x, c·1) = c·Σ_ci boxsum(x[:, ci]) on every output channel (+ b): the channels
    summed once, then one window sum per output, as an average pool times its taps — instead
    of 2·Cin multiply-adds per tap and output channel. Stride any; dilation 1 and padding at
    most half the window (what a pool takes); one group."""
    op = graph.op(root)
    source, weight, *bias = op.reads
    c = _constant(graph.value(weight))
    names = ("stride", "padding", "dilation", "transposed", "groups")
    stride, padding, dilation, transposed, groups = (op.argument(n) for n in names)
    spatial = len(source.shape) - 2
    kernel = weight.shape[2:]
    if (
        c is None or transposed or groups != 1 or spatial not in _POOLS
        or any(d != 1 for d in dilation)
        or any(2 * p > k for p, k in zip(padding, kernel, strict=True))
    ):
        return None
    shape = op.writes[0].shape
    taps = torch.Size(kernel).numel()
    pool = _POOLS[spatial]

    def build(x: torch.Tensor, *b: torch.Tensor) -> torch.Tensor:
        channels = x.sum(1, keepdim=True)
        boxed = pool(channels, kernel, stride, padding, count_include_pad=True) * (c * taps)
        out = boxed.expand(shape)
        return (out + b[0].reshape(-1, *(1,) * spatial) if b else out).contiguous()

    return Match(BOX_RULE, root, (source, *bias), build, root)
