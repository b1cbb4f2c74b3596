"""Triangular masks made in ``forward`` (``triu(ones(n, n), 1).bool()``, ``~tril(ones(n, n,
dtype=bool))``, ``tril(full(…)) == 0``), known from their ops at any size: a mask too big to
evaluate (:func:`.constants.too_big`: a float ``ones(4096, 4096)``) is read off the ops that
made it, with no n² data, and where it holds is counted exactly."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from ...costs import aten
from ...trace.refs import TensorRef, TracedOp
from ...trace.regions import (
    Box,
    IndexSet,
    Region,
    Spread,
    box_size,
    mapped_set,
    range_intersection,
    set_intersection,
    set_size,
)
from ._core import _Context, _one_of, _op_set
from .constants import TRIANGLE_BANDS

#: ops that make a tensor from shapes alone, every element one value: (op, its value's
#: argument, the value where that argument is absent)
_FILLS = {
    aten.ones: None, aten.ones_like: None, aten.new_ones: None,
    aten.full: "fill_value", aten.full_like: "fill_value", aten.new_full: "fill_value",
}

#: ops that keep one triangle of the last two dims, the upper one (j − i ≥ k): True
_TRIANGLES = {aten.triu: True, aten.tril: False}

#: casts that keep a mask where it is nonzero (``.bool()``, ``.to(torch.bool)``)
_CASTS = _op_set([aten._to_copy, aten.to])

#: ops that flip a boolean mask (``~mask``, ``logical_not``)
_NOTS = _op_set([aten.bitwise_not, aten.logical_not])

#: comparisons with 0 that keep (``ne``) or flip (``eq``) where a mask holds
_ZERO_TESTS = {aten.ne: False, aten.eq: True}


@dataclass(frozen=True)
class Triangle:
    """A boolean mask over the last two dims (broadcast along the others) that holds where
    column − row ≥ ``diagonal`` (``upper``) or ≤ ``diagonal`` (lower)."""

    upper: bool
    diagonal: int

    def negated(self) -> Triangle:
        """Where this one does not hold: ¬(j − i ≥ k) is j − i ≤ k − 1, and back."""
        return Triangle(not self.upper, self.diagonal - 1 if self.upper else self.diagonal + 1)

    def columns(self, rows: range, columns: IndexSet) -> IndexSet:
        """The ``columns`` where every row of ``rows`` (consecutive) holds."""
        if self.upper:
            kept = range(rows[-1] + self.diagonal, max(c.stop for c in columns) if columns else 0)
        else:
            kept = range(min(c.start for c in columns) if columns else 0,
                         rows[0] + self.diagonal + 1)
        return tuple(r for c in columns if (r := range_intersection(c, kept)))

    def count(self, rows: list[int], columns: list[int]) -> int:
        """Positions of ``rows`` × ``columns`` (sorted, distinct) where it holds."""
        if not rows or not columns:
            return 0
        sorted_columns = torch.tensor(columns, dtype=torch.int64)
        bounds = torch.tensor(rows, dtype=torch.int64) + self.diagonal
        if self.upper:  # j ≥ i + k
            return int((len(columns) - torch.searchsorted(sorted_columns, bounds)).sum())
        return int(torch.searchsorted(sorted_columns, bounds, right=True).sum())


def made_triangle(context: _Context, position: int) -> Triangle | None:
    """The :class:`Triangle` read ``position`` of the context's op holds, where the program made
    it from a fill of one nonzero value (``ones``, ``full``) by ``triu``/``tril``, maybe cast
    to bool, negated or compared with 0, and reads it whole in its last two dims, those of the
    op's output (broadcast along the others); None otherwise."""
    ref = context.op.reads[position]
    if tuple(ref.shape[-2:]) != tuple(context.op.writes[0].shape[-2:]):
        return None  # broadcast along a row or a column of the output: no triangle of it
    flip = False
    while True:
        op = context.producers.get(ref.value_id)
        if op is None or op.func is None or not _reads_whole(ref, op.writes[0]):
            return None
        packet = op.func.overloadpacket
        if packet in _TRIANGLES:
            if not _nonzero_fill(context, op.reads[0]):
                return None
            found = Triangle(_TRIANGLES[packet], int(op.argument("diagonal", 0)))
            return found.negated() if flip else found
        if _one_of(op, _NOTS):
            flip = not flip
        elif packet in _ZERO_TESTS and _compares_with_zero(op):
            flip ^= _ZERO_TESTS[packet]
        elif not _one_of(op, _CASTS) or not _keeps_nonzeros(op):
            return None
        ref = op.reads[0]


def _compares_with_zero(op: TracedOp) -> bool:
    other = op.argument("other")
    return len(op.reads) == 1 and isinstance(other, (int, float)) and other == 0


def _nonzero_fill(context: _Context, ref: TensorRef) -> bool:
    """Whether ``ref`` is a fill of one nonzero value made in the program."""
    op = context.producers.get(ref.value_id)
    if op is None or op.func is None or op.func.overloadpacket not in _FILLS:
        return False
    name = _FILLS[op.func.overloadpacket]
    value = 1 if name is None else op.argument(name)
    return isinstance(value, (bool, int, float)) and value != 0 and _reads_whole(ref, op.writes[0])


def _keeps_nonzeros(cast: TracedOp) -> bool:
    """Whether a cast keeps every nonzero nonzero: to bool or a floating type (to an integer
    type, 0.5 becomes 0)."""
    dtype = cast.argument("dtype")
    return dtype is None or dtype is torch.bool or dtype.is_floating_point


def _reads_whole(ref: TensorRef, written: TensorRef) -> bool:
    """Whether ``ref`` reads ``written``'s matrix (last two dims) as it was written, broadcast
    or of size 1 along the others."""
    if len(ref.shape) < 2 or len(written.shape) < 2 or math.prod(written.shape[:-2]) != 1:
        return False
    return (
        ref.shape[-2:] == written.shape[-2:]
        and ref.strides[-2:] == written.strides[-2:]
        and ref.offset == written.offset
        and all(s == 0 or n == 1 for n, s in zip(ref.shape[:-2], ref.strides[:-2], strict=True))
    )


def triangle_where(triangle: Triangle, region: Region) -> Region:
    """The demanded elements where ``triangle`` holds: each box's rows cut into at most
    :data:`.constants.TRIANGLE_BANDS` bands, each band the columns all its rows keep (a
    staircase inside the triangle), and, where the boxes are disjoint, the exact count of the
    positions where it holds (exact at any size, with no n² data). Outputs with no position:
    none kept."""
    if any(len(box) < 2 for box in region.boxes):
        return Region()
    boxes: list[Box] = []
    edges: list[Spread] = []
    total = 0
    for box in region.boxes:
        rows = sorted({i for r in box[-2] for i in r})
        columns = sorted({j for r in box[-1] for j in r})
        total += triangle.count(rows, columns) * math.prod(map(set_size, box[:-2]))
        # its edge j = i + k, where it passes: every row and column the staircase cuts off
        edge = set_intersection(box[-2], mapped_set(box[-1], -triangle.diagonal))
        if edge:
            edges.append(Spread(
                (*box[:-2], edge, mapped_set(edge, triangle.diagonal)),
                (*(False for _ in box[:-2]), True, True),
            ))
        band = max(1, -(-len(rows) // TRIANGLE_BANDS))
        for start in range(0, len(rows), band):
            chunk = rows[start : start + band]
            runs = [range(chunk[0], chunk[-1] + 1)] if chunk[-1] - chunk[0] + 1 == len(chunk) else [
                range(row, row + 1) for row in chunk  # rows picked apart: one by one
            ]
            for run in runs:
                kept = triangle.columns(run, box[-1])
                if kept:
                    boxes.append((*box[:-2], (run,), kept))
    disjoint = region.count == sum(map(box_size, region.boxes))
    return Region.of(boxes, total if disjoint else sum(edge.count for edge in edges), edges)
