"""Demand rules of dense linear algebra: which matrices of a batch, and which of their elements,
the demanded outputs of a decomposition or a solve need."""

from __future__ import annotations

import math

from ...costs import aten
from ...trace.regions import NOWHERE, Box, IndexSet, Region
from ._core import Demand, _Context, _one_of, _op_set, _proportional, demand_rule

#: Each output element of these depends on every element of its matrix (a singular value or
#: vector, an eigenvalue, a determinant, an entry of the inverse: their gradients are dense)
_WHOLE = (aten._linalg_svd, aten.linalg_eig, aten._linalg_det, aten._linalg_slogdet,
          aten.linalg_inv_ex, aten._linalg_eigh)

#: ``_linalg_eigh`` reads one triangle of its matrix, the diagonal included (``UPLO``)
_TRIANGLE = _op_set([aten._linalg_eigh])


def _batch_boxes(context: _Context, rank: int) -> list[Box] | None:
    """The leading ``rank`` dims (the batch of matrices) of every demanded output box; None
    where a demanded output has no box (unknown positions)."""
    boxes: list[Box] = []
    for region, ref in zip(context.outputs, context.op.writes, strict=True):
        if region.opaque or region.spreads:
            return None
        boxes += [box[:rank] for box in region.boxes if len(ref.shape) >= rank]
    return boxes


@demand_rule(list(_WHOLE))
def whole_matrix_demand(context: _Context) -> Demand:
    """Any demanded output of matrix b needs matrix b whole (its triangle for ``eigh``); which
    outputs, if their positions are unknown: one matrix. FLOPs: the demanded share."""
    matrix = context.op.reads[0]
    *batch, rows, columns = matrix.shape
    boxes = _batch_boxes(context, len(batch))
    flops = context.record.flops.scaled(context.fraction)
    if not context.fraction:
        return Demand(tuple(NOWHERE for _ in context.op.reads), flops)
    if _one_of(context.op, _TRIANGLE):
        matrices = math.prod(batch) if boxes is None else Region.of(boxes).count
        region = Region(opaque=max(1, matrices) * rows * (rows + 1) // 2)
    elif boxes is None:
        region = Region(opaque=rows * columns)
    else:
        region = Region.of([(*box, (range(rows),), (range(columns),)) for box in boxes])
    return Demand((region, *(NOWHERE for _ in context.op.reads[1:])), flops)


@demand_rule([aten._linalg_solve_ex])
def solve_demand(context: _Context) -> Demand:
    """``solve(A, B)``: column j of X = A⁻¹B needs A whole and column j of B (a vector B: all
    of it); the LU factors need A. Batches of A and B as the result's (else: unknown)."""
    matrix, rhs = context.op.reads[:2]
    result = context.op.writes[0]
    rank = len(matrix.shape) - 2
    vector = len(rhs.shape) == rank + 1
    same_batch = matrix.shape[:rank] == rhs.shape[:rank] == result.shape[:rank]
    boxes = _batch_boxes(context, rank)
    if context.argument("left") is False or not same_batch or boxes is None:
        return _proportional(context)
    rows = (range(matrix.shape[-1]),)
    b_boxes = [(*box[:rank], rows) if vector else (*box[:rank], rows, box[-1])
               for box in context.outputs[0].boxes]
    a_region = Region.of([(*box, rows, rows) for box in boxes])
    return Demand((a_region, Region.of(b_boxes)), context.record.flops.scaled(context.fraction))


def _largest(index_sets: list[range]) -> int:
    return max(r[-1] for r in index_sets)


@demand_rule([aten.linalg_qr])
def qr_demand(context: _Context) -> Demand:
    """``Q, R = qr(A)`` (Gram–Schmidt order): column j of Q and of R's upper triangle need
    columns 0..j of A, and of the matrices their boxes hold; R's zeros below the diagonal need
    nothing. The last needed column of all boxes is charged, in every demanded matrix."""
    matrix = context.op.reads[0]
    *batch, rows, columns = matrix.shape
    boxes = _batch_boxes(context, len(batch))
    if boxes is None:
        return _proportional(context)
    last = -1
    q_boxes, r_boxes = (region.boxes for region in context.outputs[:2])
    for box in q_boxes:
        last = max(last, min(_largest(box[-1]), columns - 1))
    for box in r_boxes:
        if _largest(box[-1]) >= min(r[0] for r in box[-2]):  # some i ≤ j: above the zeros
            last = max(last, _largest(box[-1]))
    if last < 0:
        return Demand((NOWHERE,), context.record.flops.scaled(context.fraction))
    region = Region.of([(*box[: len(batch)], (range(rows),), (range(last + 1),))
                        for box in (*q_boxes, *r_boxes)])
    return Demand((region,), context.record.flops.scaled(context.fraction))


def _lower_part(rows: IndexSet, j: int, upper: bool) -> list[tuple[range, range]]:
    """What L[i, j'] for i in ``rows`` and j' ≤ min(i, j) need of A, as (rows, columns) boxes
    (``upper``: transposed): L[i, j'] = (A[i, j'] − Σ_{k<j'} L[i, k]·L[j', k]) / L[j', j'] reads
    row i of A up to column j' and the factor's rows 0..j', so A's lower triangle in rows 0..j,
    one row at a time, and the columns 0..j of each row of ``rows`` below it."""
    boxes = [(range(r, r + 1), range(r + 1)) for r in range(j + 1)]
    boxes += [(r[len(range(r.start, min(r.stop, j + 1), r.step)):], range(j + 1)) for r in rows]
    boxes = [(r, c) for r, c in boxes if r]
    return [(c, r) for r, c in boxes] if upper else boxes


@demand_rule([aten.linalg_cholesky_ex])
def cholesky_demand(context: _Context) -> Demand:
    """``L = cholesky(A)``: L[i, j] (i ≥ j) needs A's lower triangle in rows 0..j and row i up
    to column j (``upper``: the transpose, :func:`_lower_part`); the zeros above need nothing."""
    batch = len(context.op.reads[0].shape) - 2
    upper = bool(context.argument("upper", False))
    if context.outputs[0].opaque or context.outputs[0].spreads:
        return _proportional(context)
    needed = []
    for box in context.outputs[0].boxes:
        rows, cols = (box[-1], box[-2]) if upper else (box[-2], box[-1])
        below = [c for r in cols for c in r if c <= _largest(rows)]
        if below:  # else zeros above the diagonal only
            part = _lower_part(rows, max(below), upper)
            needed += [(*box[:batch], (r,), (c,)) for r, c in part]
    return Demand((Region.of(needed),), context.record.flops.scaled(context.fraction))
