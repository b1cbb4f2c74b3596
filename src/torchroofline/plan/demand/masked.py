"""Scores masked with −inf by known masks (attention written by hand: ``masked_fill`` of a
causal mask, ``where``, an additive bias), and the probabilities a softmax makes of them: a
masked score is no work, its probability is 0, and a line left one finite score is the
constant one-hot (softmax 1 there, log-softmax 0) whatever the scores hold."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import torch

from ...costs import OpKey, add_rules, aten, lookup
from ...trace.refs import TensorRef, TracedOp
from ...trace.regions import Box, IndexSet, Region, box_difference, positions_to_set, set_size
from ._core import Demand, _Context
from .constants import _known, _unexpanded, row_sets
from .structures import _MatrixView, matrix_builder, seen_through, sparse_product

#: Ops whose output is −inf at places known values fix: (the context, the traced op) → where
#: its output may be finite (a bool tensor broadcastable to its output), None where unknown.
FINITE_PATTERNS: dict[OpKey, Callable[[_Context, TracedOp], torch.Tensor | None]] = {}


def finite_pattern(ops: Sequence[OpKey]) -> Callable:
    """Decorator: register a finite pattern for ``ops`` (no key twice)."""

    def decorate(pattern: Callable) -> Callable:
        add_rules(FINITE_PATTERNS, ops, pattern, "finite-pattern")
        return pattern

    return decorate


def _argument(context: _Context, op: TracedOp, name: str) -> torch.Tensor | None:
    """Argument ``name`` of ``op`` as a known tensor (a Python number as a 0-d one), or None
    where it is data."""
    value = op.argument(name)
    if isinstance(value, int | float) and not isinstance(value, bool):
        return torch.tensor(float(value))
    tensors = [n for n in op.argument_names if isinstance(op.argument(n), torch.Tensor)]
    if name not in tensors or len(tensors) != len(op.reads):
        return None
    return _known(context, tensors.index(name), op)


def _negative_infinity(value: torch.Tensor | None) -> torch.Tensor | None:
    return None if value is None or not value.is_floating_point() else value == -math.inf


@finite_pattern([aten.masked_fill])
def _filled(context: _Context, op: TracedOp) -> torch.Tensor | None:
    """``masked_fill(x, mask, −inf)``, the mask known: finite where it does not hold."""
    mask, value = _argument(context, op, "mask"), _argument(context, op, "value")
    if mask is None or value is None or not bool(_negative_infinity(value)):
        return None
    return ~mask.bool()


@finite_pattern([aten.where])
def _picked(context: _Context, op: TracedOp) -> torch.Tensor | None:
    """``where(cond, a, b)``, the condition known: −inf where it picks a known −inf."""
    condition = _argument(context, op, "condition")
    if condition is None:
        return None
    condition = condition.bool()
    masked = torch.zeros((), dtype=torch.bool)
    for name, picks in (("self", condition), ("other", ~condition)):
        infinite = _negative_infinity(_argument(context, op, name))
        if infinite is not None:
            masked = masked | (picks & infinite)
    return ~masked


@finite_pattern([aten.add])
def _biased(context: _Context, op: TracedOp) -> torch.Tensor | None:
    """``x + bias`` (a float attention mask of 0 and −inf), the bias known: −inf where it is
    (finite data plus −inf is −inf; ``alpha`` must keep it −inf: positive)."""
    alpha = op.argument("alpha", 1)
    if not isinstance(alpha, int | float) or alpha <= 0:
        return None
    masked = [_negative_infinity(_argument(context, op, name)) for name in ("self", "other")]
    known = [m for m in masked if m is not None]
    if not known:
        return None
    return ~(known[0] | known[1]) if len(known) == 2 else ~known[0]


def finite_scores(context: _Context, ref: TensorRef) -> torch.Tensor | None:
    """Where the value ``ref`` reads may be finite, as a bool tensor of ``ref``'s shape, size 1
    along the dims it is the same (:func:`.constants._unexpanded`), if an op of
    :data:`FINITE_PATTERNS` wrote it and left some −inf; else None."""
    producer = context.producers.get(ref.value_id)
    pattern = lookup(FINITE_PATTERNS, producer) if producer is not None else None
    finite = pattern(context, producer) if pattern else None
    if finite is None or bool(finite.all()):
        return None
    written = producer.writes[0]
    try:
        finite = finite.expand(written.shape)
    except RuntimeError:
        return None
    seen = seen_through(finite, ref, written)
    return None if seen is None else _unexpanded(seen)


#: Cells (and box × position memberships) the class grid of :func:`pattern_count` may hold;
#: past it, the boxes are cut into disjoint pieces one by one.
_GRID_CELLS = 1 << 22


def pattern_count(pattern: torch.Tensor, boxes: Sequence[Box]) -> int:
    """True elements of ``pattern`` (size 1 along dims it is the same) over the union of
    ``boxes``: each element once, however many boxes hold it."""
    grid = _class_grid(pattern, boxes)
    if grid is not None:
        covered, weights = grid
        return int((weights * covered).sum())
    disjoint: list[Box] = []
    for box in boxes:
        pieces = [box]
        for earlier in disjoint:
            pieces = [piece for p in pieces for piece in box_difference(p, earlier)]
        disjoint += pieces
    total = 0
    for box in disjoint:
        picked, repeats = pattern, 1
        for dim, index_set in enumerate(box):
            if pattern.shape[dim] == 1:
                repeats *= set_size(index_set)
            else:
                positions = torch.tensor([i for r in index_set for i in r], dtype=torch.int64)
                picked = picked.index_select(dim, positions)
        total += int(picked.sum()) * repeats
    return total


def _class_grid(
    pattern: torch.Tensor, boxes: Sequence[Box]
) -> tuple[torch.Tensor, torch.Tensor] | None:
    """The union of ``boxes`` on a grid of position classes: along each dim, positions held by
    the same boxes are one class (a band of causal rows, the columns they all keep), so a cell
    is in all of its boxes or none. Returns (which cells the union covers, the true elements
    of ``pattern`` in each cell); None where the grid would pass :data:`_GRID_CELLS` (or the
    pattern has no dims)."""
    if not boxes or pattern.dim() == 0:
        return None
    weights = pattern.to(torch.int64)
    memberships = []
    for dim, size in enumerate(pattern.shape):
        extent = size if size > 1 else 1 + max(
            (r[-1] for box in boxes for r in box[dim] if r), default=0)
        if len(boxes) * extent > _GRID_CELLS:
            return None
        member, classes = _memberships([box[dim] for box in boxes], extent)
        memberships.append(member)
        if size > 1:
            shape = list(weights.shape)
            shape[dim] = member.shape[1]
            weights = torch.zeros(shape, dtype=torch.int64).index_add_(dim, classes, weights)
        else:
            counts = torch.bincount(classes, minlength=member.shape[1])
            weights = weights * counts.reshape([-1 if d == dim else 1
                                                for d in range(pattern.dim())])
    cells = math.prod(member.shape[1] for member in memberships)
    if cells * len(boxes) > _GRID_CELLS:
        return None
    inside = memberships[0]
    for member in memberships[1:]:
        inside = inside.unsqueeze(-1) & member.reshape(
            member.shape[:1] + (1,) * (inside.dim() - 1) + member.shape[1:])
    return inside.any(0), weights


def _memberships(
    index_sets: Sequence[IndexSet], extent: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Positions ``0 … extent − 1`` of one dim grouped into classes held by the same index
    sets: (which sets hold each class, a bool ``(sets, classes)``; each position's class).
    Where every range is a run (step 1) the classes are the spans between consecutive range
    ends, found from the ends alone; otherwise each set's positions are marked one by one."""
    ranges = [(index, r) for index, index_set in enumerate(index_sets) for r in index_set if r]
    if all(r.step == 1 for _, r in ranges):
        cuts = sorted({0, extent}.union(*((r.start, r.stop) for _, r in ranges)))
        starts, stops = torch.tensor(cuts[:-1]), torch.tensor(cuts[1:])
        owners = torch.tensor([index for index, _ in ranges], dtype=torch.int64)
        lows = torch.tensor([r.start for _, r in ranges], dtype=torch.int64)
        highs = torch.tensor([r.stop for _, r in ranges], dtype=torch.int64)
        held = (lows[:, None] <= starts) & (stops <= highs[:, None])
        member = torch.zeros(len(index_sets), len(starts), dtype=torch.int64).index_add_(
            0, owners, held.to(torch.int64)) > 0
        classes = torch.repeat_interleave(torch.arange(len(starts)), stops - starts)
    else:
        member = torch.zeros(len(index_sets), extent, dtype=torch.bool)
        for index, r in ranges:
            member[index, r.start : r.stop : r.step] = True
        classes = torch.arange(extent)
    merged, inverse = torch.unique(member, dim=1, return_inverse=True)
    return merged, inverse[classes]


#: Most lines with one finite score or none :func:`constant_lines` cuts out of a demand.
_CONSTANT_LINES = 1024


def constant_lines(finite: torch.Tensor, dim: int, shape: Sequence[int]) -> list[Box] | None:
    """The lines along ``dim`` of a softmax (of ``shape``) of scores finite at ``finite`` that
    hold one finite score or none, as boxes (whole along ``dim`` and the dims the pattern is
    the same along): their outputs are constants (the one-hot, or NaN); None past
    :data:`_CONSTANT_LINES` of them."""
    counts = finite.sum(dim, keepdim=True) if finite.shape[dim] > 1 else (
        finite.to(torch.int64) * shape[dim]
    )
    dead = (counts <= 1).nonzero().tolist()
    if len(dead) > _CONSTANT_LINES:
        return None
    return [
        tuple((range(size),) if d == dim or counts.shape[d] == 1 else (range(p, p + 1),)
              for d, (size, p) in enumerate(zip(shape, point, strict=True)))
        for point in dead
    ]


@dataclass(frozen=True)
class _Probabilities:
    """A softmax of masked scores as a matmul operand (``probabilities @ v``), in the operand's
    own (free, contracted) coordinates: ``nonzero`` where a probability may be nonzero (a finite
    score on a line of two or more), ``copy`` the free positions whose contracted line holds one
    nonzero, the exact 1 of a line left one finite score (its output row is a row of the other
    operand, no product)."""

    nonzero: torch.Tensor
    copy: torch.Tensor

    def unsourced(self) -> _Probabilities:
        """Scaled by a number: the ones are no longer ones, the zeros stay."""
        return replace(self, copy=torch.zeros_like(self.copy))

    def layout(self, frees: list[int]) -> tuple[IndexSet, list[int], list[IndexSet]]:
        """For :func:`.structures.sparse_product`: the other operand read at the contracted
        positions a nonzero of ``frees`` meets (a copy's too), the positions that are no copy
        computed."""
        met = self.nonzero[frees].any(0).nonzero().flatten().tolist()
        computed = [f for f in frees if not self.copy[f]]
        spans = row_sets(self.nonzero[computed], range(self.nonzero.shape[1]))
        return positions_to_set(met), computed, spans

    def product(self, context: _Context, region: Region, position: int) -> Demand:
        """2 FLOPs per (nonzero, output column) pair of a free position that is no copy
        (:func:`.structures.sparse_product`)."""
        return sparse_product(context, region, position, self.layout, "masked probabilities")


@matrix_builder([aten._softmax, aten.softmax, aten._safe_softmax])
def _built_probabilities(
    context: _Context, builder: TracedOp, view: _MatrixView
) -> _Probabilities | None:
    """A softmax over one of the last two dims of scores :func:`finite_scores` knows, the
    pattern the same for every matrix of the batch."""
    source, written = builder.reads[0], builder.writes[0]
    rank = len(written.shape)
    finite = finite_scores(context, source)
    dim = builder.argument("dim", -1) % max(rank, 1)
    if finite is None or rank < 2 or dim < rank - 2 or any(n != 1 for n in finite.shape[:-2]):
        return None
    matrix = finite.reshape(finite.shape[-2:]).expand(written.shape[-2:])
    counts = matrix.sum(dim - rank + 2, keepdim=True)
    unit = matrix & (counts == 1)
    free, contracted = view.free, view.contracted
    rows = torch.arange(free.size) * free.step + free.origin
    columns = torch.arange(contracted.size) * contracted.step + contracted.origin

    def seen(builder_matrix: torch.Tensor) -> torch.Tensor:
        if free.axis == 0:
            return builder_matrix[rows][:, columns]
        return builder_matrix[columns][:, rows].T

    nonzero, unit = seen(matrix), seen(unit)
    copy = (nonzero.sum(1) == 1) & (unit & nonzero).any(1)
    return _Probabilities(nonzero, copy)
