"""Linear maps commute with sums and means along their outputs.

A sum over outputs of a linear map is the map applied to the summed operand:
Σ_j (x @ W)[i, j] = x[i, :] @ (Σ_j W[:, j]), Σ_i (x @ W)[i, j] = (Σ_i x[i, :]) @ W[:, j]. A
kernel that sums first does a matrix-vector product instead of the whole map: the
shortcut KernelBench's GEMM → sum and GEMM → mean problems admit (convolutions:
:mod:`.convs`). The sum may reach the map
through steps that commute with it (:data:`STEPS`): a scale constant along the summed dims
(Σ c·y = c·Σ y), an added tensor (Σ (y + b) = Σ y + Σ b), a negation, and a contiguous view of
the map's output (a 3-D input to ``nn.Linear`` is a 2-D product seen as 3-D).

Each identity holds over the reals for every finite input; the conditions keep it exact:
nothing but these steps between the map and the sum (a nonlinearity stops the walk), every
intermediate read by the next step alone (else the map must be computed anyway), and no write
to an operand in between (an in-place change between the two reads).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import torch

from ...costs import OpKey, aten, lookup
from ...trace.refs import TensorRef, TracedOp
from ._core import (
    SUMS,
    Graph,
    Match,
    algebra_rule,
    folded,
    is_contiguous,
    reduced_dims,
    registers_into,
    scalar_argument,
)

RULE = "sum through the linear map"


@dataclass(frozen=True)
class _Step:
    """A pointwise op between the map and the sum, replayed on the summed value: ``replay(y,
    *sides)`` with ``sides`` the op's other tensors already summed (``summed``) or as they are."""

    sides: tuple[TensorRef, ...]
    summed: tuple[bool, ...]
    replay: Callable[..., torch.Tensor]


StepRule = Callable[[TracedOp, int, Sequence[int], Sequence[int]], "_Step | None"]

#: op → its rule: (the op, the position of the read the walk came through, the summed dims,
#: the full shape) → the step replayed after the sum, or None where it does not commute
STEPS: dict[OpKey, StepRule] = {}


_step = registers_into(STEPS)


def _constant_along(ref: TensorRef, dims: Sequence[int], shape: Sequence[int]) -> bool:
    """Whether ``ref``, broadcast to ``shape``, has one value along each of ``dims``."""
    lead = len(shape) - len(ref.shape)
    return all(d < lead or ref.shape[d - lead] == 1 for d in dims)


@_step([aten.mul, aten.div])
def _scale(op: TracedOp, main: int, dims: Sequence[int], shape: Sequence[int]) -> _Step | None:
    """Σ_D (c·y) = c·Σ_D y and Σ_D (y / c) = (Σ_D y) / c, for c a number or a tensor with one
    value along the summed dims D (a divisor only as the divisor)."""
    divide = op.func.overloadpacket is aten.div
    if divide and (main != 0 or op.argument("rounding_mode") is not None):
        return None
    function = torch.div if divide else torch.mul
    number = scalar_argument(op, 1 - main)
    if number is not None:
        return _Step((), (), lambda y: function(y, number))
    if len(op.reads) != 2:
        return None
    side = op.reads[1 - main]
    if not _constant_along(side, dims, shape):
        return None
    if main == 0:
        return _Step((side,), (False,), function)
    return _Step((side,), (False,), lambda y, s: function(s, y))


@_step([aten.add, aten.sub])
def _shift(op: TracedOp, main: int, dims: Sequence[int], shape: Sequence[int]) -> _Step | None:
    """Σ_D (y ± α·b) = Σ_D y ± α·Σ_D b: the other term summed on its own (a number n times:
    Σ_D c = |D|·c)."""
    function = torch.add if op.func.overloadpacket is aten.add else torch.sub
    alpha = op.argument("alpha", 1)
    number = scalar_argument(op, 1 - main)
    if number is not None:
        total = number * folded(shape, dims)
        if main == 0:
            return _Step((), (), lambda y: function(y, total, alpha=alpha))
        return _Step((), (), lambda y: function(total, y, alpha=alpha))
    if len(op.reads) != 2:
        return None
    side = op.reads[1 - main]
    if main == 0:
        return _Step((side,), (True,), lambda y, s: function(y, s, alpha=alpha))
    return _Step((side,), (True,), lambda y, s: function(s, y, alpha=alpha))


@_step([aten.neg])
def _negate(op: TracedOp, main: int, dims: Sequence[int], shape: Sequence[int]) -> _Step:
    """Σ_D (−y) = −Σ_D y."""
    return _Step((), (), torch.neg)


@dataclass(frozen=True)
class _Form:
    """The summed map: ``build(*operands)`` returns Σ_D of the map's output, reduced dims kept
    (size 1), in the map's own coordinates."""

    operands: tuple[TensorRef, ...]
    build: Callable[..., torch.Tensor]
    #: the sum reads the map's (matrix) output transposed: the result is transposed back
    transposed: bool = False


def _summed(value: torch.Tensor, shape: Sequence[int], dims: Sequence[int]) -> torch.Tensor:
    """Σ over ``dims`` of ``value`` broadcast to ``shape``, dims kept (size 1): summed where it
    varies, times the count where it is broadcast (Σ_j b = n·b)."""
    full = value.reshape((1,) * (len(shape) - value.dim()) + tuple(value.shape))
    own = tuple(d for d in dims if full.shape[d] != 1)
    copies = math.prod(shape[d] for d in dims if full.shape[d] == 1)
    total = full.sum(own, keepdim=True) if own else full
    return total * copies if copies > 1 else total


def _matrix_form(op: TracedOp, axes: str) -> _Form:
    """(β·b +) α·x @ W summed over its columns, rows or both (``axes``): x @ ΣW, Σx @ W,
    Σx @ ΣW, batched or not; the bias summed on its own."""
    *bias, left, right = op.reads
    shape = op.writes[0].shape
    rows, columns = len(shape) - 2, len(shape) - 1
    dims = {"columns": (columns,), "rows": (rows,), "both": (rows, columns)}[axes]
    beta, alpha = op.argument("beta", 1), op.argument("alpha", 1)
    batched = len(shape) == 3

    def build(x: torch.Tensor, w: torch.Tensor, *b: torch.Tensor) -> torch.Tensor:
        if axes != "columns":
            x = x.sum(-2, keepdim=True)
        if axes != "rows":
            w = w.sum(-1, keepdim=True)
        if not b:
            return torch.bmm(x, w) if batched else torch.mm(x, w)
        total = _summed(b[0], shape, dims)
        add = torch.baddbmm if batched else torch.addmm
        return add(total, x, w, beta=beta, alpha=alpha)

    return _Form((left, right, *bias), build)


def _form(op: TracedOp, ref: TensorRef, dims: tuple[int, ...]) -> _Form | None:
    """The summed map for a sum over ``dims`` of ``ref`` (a contiguous view of ``op``'s
    output, or a matrix output transposed), or None where the dims are no whole axis of the
    map's output."""
    out = op.writes[0]
    if _transposed(ref, out):
        # Σ over dim d of the transpose is Σ over dim 1 − d of the product
        form = _form(op, out, tuple(sorted(1 - d for d in dims)))
        return None if form is None else replace(form, transposed=True)
    if ref.offset != out.offset or not is_contiguous(ref) or math.prod(ref.shape) != out.elements:
        return None
    shape = ref.shape
    packet = op.func.overloadpacket if op.func is not None else None
    if packet in (aten.mm, aten.addmm, aten.bmm, aten.baddbmm):
        columns = _suffix(shape, dims, out.shape[-1])
        if len(out.shape) == 3 and shape != out.shape and not columns:
            return None
        if columns and len(dims) < len(shape) - (len(out.shape) - 2):
            return _matrix_form(op, "columns")
        rows = len(out.shape) == 2 and _prefix(shape, dims, out.shape[0])
        if rows:
            return _matrix_form(op, "rows")
        if dims == tuple(range(len(out.shape) - 2, len(out.shape))) and shape == out.shape:
            return _matrix_form(op, "both")
        if columns:
            return _matrix_form(op, "columns")
        return None
    return None


def _transposed(ref: TensorRef, out: TensorRef) -> bool:
    """Whether ``ref`` reads a matrix ``out`` transposed (``.T``, ``.t()``)."""
    return len(out.shape) == 2 and ref.offset == out.offset and (ref.shape, ref.strides) == (
        out.shape[::-1], out.strides[::-1]
    ) and ref.strides != out.strides


def _suffix(shape: Sequence[int], dims: Sequence[int], size: int) -> bool:
    """Whether ``dims`` are the trailing dims of ``shape`` and hold ``size`` elements."""
    return bool(dims) and tuple(dims) == tuple(range(len(shape) - len(dims), len(shape))) and (
        folded(shape, dims) == size
    )


def _prefix(shape: Sequence[int], dims: Sequence[int], size: int) -> bool:
    return bool(dims) and tuple(dims) == tuple(range(len(dims))) and folded(shape, dims) == size


_MAPS = (aten.mm, aten.addmm, aten.bmm, aten.baddbmm)


def _walk(
    graph: Graph, root: int, dims: tuple[int, ...]
) -> tuple[int, list[_Step], _Form] | None:
    """From the sum back through :data:`STEPS` to the linear map: (the map's index, the steps
    in program order, the summed map); None if anything else is met first."""
    op = graph.op(root)
    ref, reader, shape = op.reads[0], root, op.reads[0].shape
    steps: list[_Step] = []
    while True:
        if not graph.read_only_by(ref, reader):
            return None
        found = graph.producer(ref)
        if found is None:
            return None
        index, producer = found
        if producer.func is not None and producer.func.overloadpacket in _MAPS:
            form = _form(producer, ref, dims)
            return None if form is None else (index, steps[::-1], form)
        rule = lookup(STEPS, producer)
        if rule is None or len(producer.writes) != 1 or not _as_laid_out(ref, producer.writes[0]):
            return None
        # the operand the walk goes on through: full-sized and computed by an op
        positions = [i for i, r in enumerate(producer.reads)
                     if r.shape == tuple(shape) and graph.producer(r) is not None]
        step = None
        for main in positions:
            step = rule(producer, main, dims, shape)
            if step is not None:
                ref = producer.reads[main]
                break
        if step is None or not is_contiguous(ref):
            return None
        steps.append(step)
        reader = index


def _as_laid_out(ref: TensorRef, written: TensorRef) -> bool:
    """Whether ``ref`` reads ``written`` as the op wrote it (no transpose, no slice)."""
    return (ref.shape, ref.strides, ref.offset) == (written.shape, written.strides, written.offset)


@algebra_rule(SUMS)
def sum_through_linear_map(graph: Graph, root: int) -> Match | None:
    """Σ_D of a linear map's output (through :data:`STEPS`) computed as the map of the summed
    operand, then the steps on the sum, then ÷|D| for a mean (see the module doc)."""
    op = graph.op(root)
    if not op.reads or op.reads[0].dtype not in ("float32", "float16", "bfloat16", "float64"):
        return None
    dims = reduced_dims(op)
    shape = op.reads[0].shape
    if folded(shape, dims) <= 1 or op.argument("dtype") is not None:
        return None
    walked = _walk(graph, root, dims)
    if walked is None:
        return None
    anchor, steps, form = walked
    sides = [s for step in steps for s in step.sides]
    inputs = (*form.operands, *sides)
    if graph.written_between(inputs, anchor, root):
        return None
    keep_shape = tuple(1 if d in dims else n for d, n in enumerate(shape))
    out_shape = op.writes[0].shape
    mean = op.func.overloadpacket is aten.mean
    count = len(form.operands)

    def build(*tensors: torch.Tensor) -> torch.Tensor:
        y = form.build(*tensors[:count])
        y = (y.transpose(-2, -1) if form.transposed else y).reshape(keep_shape)
        rest = iter(tensors[count:])
        for step in steps:
            values = [
                _summed(next(rest), shape, dims) if summed else next(rest)
                for summed in step.summed
            ]
            y = step.replay(y, *values)
        if mean:
            y = y / folded(shape, dims)
        return y.reshape(out_shape)

    return Match(RULE, root, inputs, build, anchor)
