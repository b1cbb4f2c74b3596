"""Sums and means moved back to the op whose output they fold: the walk shared by the
structured sums (:mod:`.convs`: a convolution summed over any of its dims; :mod:`.norms`: a
normalised value summed over its normalised dims).

From a sum, a mean or a whole-image average pool (``avg_pool2d`` with the image as its one
window, ``adaptive_avg_pool2d(x, 1)``: a mean over the pooled dims), the walk goes back through
views that keep whole dims (``flatten(2)``, ``unsqueeze``: the summed dims of the view are
unions of dims of the viewed value), the pointwise steps of :data:`.linear.STEPS` (a scale
constant along the summed dims, an added tensor, a negation) and an eval-mode batch norm (a
per-channel affine with the running statistics, registered here as a step), to an op of
:data:`TERMINALS`, whose rule says what the sum of its output is. The steps are then replayed
on that sum (Σ c·y = c·Σ y, Σ (y + b) = Σ y + Σ b, Σ BN(y) = γ·(Σ y − |D|·μ)/√(σ² + ε) + |D|·β).
Identities over the reals for finite inputs; every intermediate read by the next step alone,
no write to an operand between.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

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
)
from .linear import STEPS, _Step, _step, _summed

_FLOATS = ("float32", "float16", "bfloat16", "float64")


@dataclass(frozen=True)
class Summed:
    """What a terminal's output sums to over the summed dims (kept at size 1): ``build``
    computes it from ``operands`` (values the program holds); ``rule`` names the identity.
    ``shared``: the identity holds whoever else reads the terminal's output (a softmax's row
    sums are 1 even where the softmax is needed anyway)."""

    rule: str
    operands: tuple[TensorRef, ...]
    build: Callable[..., torch.Tensor]
    shared: bool = False
    #: the sum where it is one number everywhere (the output is then only written)
    value: float | None = None


Terminal = Callable[[Graph, int, tuple[int, ...]], "Summed | None"]

#: op → the rule giving the sum of its output over the given dims (its own coordinates)
TERMINALS: dict[OpKey, Terminal] = {}


terminal = registers_into(TERMINALS)


def _bounds(shape: Sequence[int]) -> set[int]:
    """The element strides where a contiguous ``shape``'s dims begin and end."""
    return {math.prod(shape[d:]) for d in range(len(shape) + 1)}


def dims_through_view(
    ref: TensorRef, out: TensorRef, dims: Sequence[int]
) -> tuple[int, ...] | None:
    """The dims of ``out`` that a reduction over ``dims`` of ``ref`` (a view of ``out``) folds,
    or None where ``ref`` is no contiguous reshape of ``out`` or a summed dim of ``ref`` cuts a
    dim of ``out`` (a view that keeps whole dims: ``flatten(2)``, ``unsqueeze``)."""
    if (ref.shape, ref.strides, ref.offset) == (out.shape, out.strides, out.offset):
        return tuple(dims)
    if ref.offset != out.offset or not (is_contiguous(ref) and is_contiguous(out)) or (
        math.prod(ref.shape) != math.prod(out.shape)
    ):
        return None
    bounds = _bounds(out.shape)
    spans = []
    for d in dims:
        low, high = math.prod(ref.shape[d + 1:]), math.prod(ref.shape[d:])
        if low not in bounds or high not in bounds:
            return None
        spans.append((low, high))
    return tuple(
        e for e, size in enumerate(out.shape)
        if size > 1 and any(low <= math.prod(out.shape[e + 1:]) and
                            math.prod(out.shape[e:]) <= high for low, high in spans)
    )


@dataclass(frozen=True)
class _Stage:
    """A step between the terminal and the sum, with the shape and summed dims it sees."""

    step: _Step
    shape: tuple[int, ...]
    dims: tuple[int, ...]


def _walk(graph: Graph, root: int, dims: tuple[int, ...]
          ) -> tuple[int, Summed, list[_Stage]] | None:
    """From the sum back through views and :data:`.linear.STEPS` to an op of
    :data:`TERMINALS`: (its index, the sum of its output, the steps in program order)."""
    ref, reader = graph.op(root).reads[0], root
    stages: list[_Stage] = []
    while True:
        found = graph.producer(ref)
        if found is None:
            return None
        index, producer = found
        out = producer.writes[0]
        dims = dims_through_view(ref, out, dims)
        if not dims:
            return None
        rule = lookup(TERMINALS, producer)
        summed = None if rule is None else rule(graph, index, dims)
        if summed is not None:
            alone = graph.read_only_by(ref, reader) and _others_unread(graph, producer)
            return (index, summed, stages[::-1]) if alone or summed.shared else None
        if not graph.read_only_by(ref, reader) or not _others_unread(graph, producer):
            return None
        found_step = _step_of(graph, producer, dims)
        if found_step is None:
            return None
        step, ref = found_step
        stages.append(_Stage(step, out.shape, dims))
        reader = index


def _others_unread(graph: Graph, op: TracedOp) -> bool:
    """Whether nothing reads ``op``'s outputs after the first (a batch norm's statistics)."""
    return not any(
        graph.readers.get(w.value_id) or w.value_id in graph.trace.output_value_ids
        for w in op.writes[1:]
    )


def _step_of(graph: Graph, op: TracedOp, dims: tuple[int, ...]
             ) -> tuple[_Step, TensorRef] | None:
    """``op`` as a step of :data:`.linear.STEPS` and the read the walk goes on through."""
    rule = lookup(STEPS, op)
    if rule is None:
        return None
    shape = op.writes[0].shape
    for main, read in enumerate(op.reads):
        if read.shape == shape and graph.producer(read) is not None:
            step = rule(op, main, dims, shape)
            if step is not None:
                return step, read
    return None


def summed_through(graph: Graph, root: int, dims: tuple[int, ...], divisor: int) -> Match | None:
    """Σ over ``dims`` of what ``root`` reads (÷ ``divisor``), moved back to a terminal."""
    op = graph.op(root)
    source = op.reads[0]
    if source.dtype not in _FLOATS or folded(source.shape, dims) <= 1:
        return None
    walked = _walk(graph, root, dims)
    if walked is None:
        return None
    anchor, summed, stages = walked
    sides = [side for stage in stages for side in stage.step.sides]
    inputs = (*summed.operands, *sides)
    if graph.written_between(inputs, anchor, root):
        return None
    count = len(summed.operands)
    out_shape = op.writes[0].shape
    if summed.value is not None and not sides:
        return Match(summed.rule, root, (), _folded(summed.value, stages, divisor, op), anchor)

    def build(*tensors: torch.Tensor) -> torch.Tensor:
        y = summed.build(*tensors[:count])
        rest = iter(tensors[count:])
        for stage in stages:
            keep = tuple(1 if d in stage.dims else n for d, n in enumerate(stage.shape))
            values = [
                _summed(next(rest), stage.shape, stage.dims) if whole else next(rest)
                for whole in stage.step.summed
            ]
            y = stage.step.replay(y.reshape(keep), *values)
        return (y / divisor if divisor != 1 else y).reshape(out_shape)

    return Match(summed.rule, root, inputs, build, anchor)


def _folded(value: float, stages: Sequence[_Stage], divisor: int,
            op: TracedOp) -> Callable[[], torch.Tensor]:
    """The steps replayed on a number ahead of time: the output is one value, written."""
    total = torch.tensor(value, dtype=torch.float64)
    for stage in stages:
        total = stage.step.replay(total)
    out = op.writes[0]
    number, shape, dtype = float(total / divisor), out.shape, getattr(torch, out.dtype)
    return lambda: torch.full(shape, number, dtype=dtype)


# ahead of the tensor network's rule (imported before this module): a sum that reaches a
# convolution, a softmax or a normalisation through views, pools and steps is its terminal's
@algebra_rule(SUMS, first=True)
def sum_to_terminal(graph: Graph, root: int) -> Match | None:
    """Σ_D (or the mean) of what a terminal computes, through views and steps."""
    op = graph.op(root)
    if not op.reads or op.argument("dtype") is not None:
        return None
    dims = reduced_dims(op)
    divisor = folded(op.reads[0].shape, dims) if op.func.overloadpacket is aten.mean else 1
    return summed_through(graph, root, dims, divisor)


_POOLS = {aten.avg_pool1d: 1, aten.avg_pool2d: 2, aten.avg_pool3d: 3}
_ADAPTIVE = {aten.adaptive_avg_pool1d: 1, aten._adaptive_avg_pool2d: 2,
             aten._adaptive_avg_pool3d: 3}


@algebra_rule(list(_POOLS), first=True)
def whole_image_pool(graph: Graph, root: int) -> Match | None:
    """An average pool whose one window is the whole unpadded image is a mean over the pooled
    dims (÷ ``divisor_override`` where given)."""
    op = graph.op(root)
    source = op.reads[0]
    rank = _POOLS[op.func.overloadpacket]
    window = tuple(op.argument("kernel_size"))
    window = window * (rank if len(window) == 1 else 1)
    if window != source.shape[-rank:] or any(op.argument("padding", (0,))):
        return None
    dims = tuple(range(len(source.shape) - rank, len(source.shape)))
    divisor = op.argument("divisor_override") or math.prod(window)
    return summed_through(graph, root, dims, divisor)


@algebra_rule(list(_ADAPTIVE), first=True)
def adaptive_pool_to_one(graph: Graph, root: int) -> Match | None:
    """``adaptive_avg_pool(x, 1)`` is the mean over the pooled dims."""
    op = graph.op(root)
    source = op.reads[0]
    rank = _ADAPTIVE[op.func.overloadpacket]
    if any(n != 1 for n in op.writes[0].shape[-rank:]):
        return None
    dims = tuple(range(len(source.shape) - rank, len(source.shape)))
    return summed_through(graph, root, dims, folded(source.shape, dims))


# --- an eval-mode batch norm is a per-channel affine --------------------------------------------

BATCH_NORMS = [aten.native_batch_norm, aten._native_batch_norm_legit_no_training,
               aten._native_batch_norm_legit, aten.cudnn_batch_norm, aten.miopen_batch_norm]


def tensor_arguments(op: TracedOp) -> dict[str, TensorRef]:
    """``op``'s tensor arguments by schema name, as the refs it read them by."""
    names = [n for n in op.argument_names if isinstance(op.argument(n), torch.Tensor)]
    return dict(zip(names, op.reads, strict=False))


@_step(BATCH_NORMS)
def _eval_batch_norm(op: TracedOp, main: int, dims: Sequence[int],
                     shape: Sequence[int]) -> _Step | None:
    """Σ_D BN(y) = (Σ_D y − |D|·μ)·γ/√(σ² + ε) + |D|·β with the running statistics (eval
    mode), for D without the channel dim: a per-channel affine commutes with the sum."""
    tensors = tensor_arguments(op)
    if main != 0 or op.argument("training", False) or 1 in dims or not (
        "running_mean" in tensors and "running_var" in tensors
    ):
        return None
    eps = float(op.args[-1])
    count = folded(shape, dims)
    names = [n for n in ("running_mean", "running_var", "weight", "bias") if n in tensors]
    sides = tuple(tensors[n] for n in names)
    channel = (1, -1, *(1,) * (len(shape) - 2))

    def replay(y: torch.Tensor, *values: torch.Tensor) -> torch.Tensor:
        given = {n: v.reshape(channel) for n, v in zip(names, values, strict=True)}
        y = (y - count * given["running_mean"]) * torch.rsqrt(given["running_var"] + eps)
        if "weight" in given:
            y = y * given["weight"]
        return y + count * given["bias"] if "bias" in given else y

    return _Step(sides, (False,) * len(sides), replay)
