"""Demand found by running an op on element numbers: the positions a gather's demanded
outputs pick (:mod:`.selection`), a flat roll's (:mod:`.layout`), the copies that write a
tensor into a view of another (``slice_scatter``, ``select_scatter``, ``diagonal_scatter``,
``as_strided_scatter``), each output element one element of one input, views made copies
(``narrow_copy``, ``unfold_copy``, ``permute_copy``, …) and ``lu_unpack``'s triangles; and
``max_unpool``, whose indices place values in planes. The numbers are kept
as regions of the input (:func:`_numbers_region`) so later unions count shared elements
once."""

from __future__ import annotations

import math

import torch

from ...costs import NO_FLOPS, VIEW_COPIES, aten, op_keys
from ...trace.refs import TensorRef
from ...trace.regions import (
    NOWHERE,
    Box,
    Region,
    Spread,
    diagonals_through,
    full_box,
    positions_to_set,
)
from ._core import Demand, _Context, _one_of, _op_set, _proportional, demand_rule
from .distinct import _extent


def _box_index(box: Box) -> tuple[torch.Tensor, ...]:
    """A box's positions as index tensors that broadcast to its elements (``t[_box_index(b)]``
    is the box of ``t``)."""
    return tuple(
        torch.tensor([i for r in index_set for i in r], dtype=torch.int64).reshape(
            [-1 if d == dim else 1 for d in range(len(box))]
        )
        for dim, index_set in enumerate(box)
    )


def _demanded_mask(region: Region, shape: tuple[int, ...]) -> torch.Tensor:
    """The positioned part of ``region`` as a boolean tensor of ``shape`` (elements demanded
    with no position are left out: fewer picks, never more)."""
    mask = torch.zeros(shape, dtype=torch.bool)
    for box in region.boxes:
        mask[_box_index(box)] = True
    return mask


#: Largest source (elements) whose picked positions are found by running the gather on the
#: source's element numbers (an arange): 16 M int64s, 128 MB.
_NUMBERED_SOURCE_LIMIT = 1 << 24


#: Most boxes a gather's picked elements are placed in; past it they are a count.
_PLACED_BOXES = 64


def _numbers_region(numbers: torch.Tensor, shape: tuple[int, ...]) -> Region:
    """Sorted distinct element numbers of a tensor of ``shape`` as a region (:func:`_boxes_of`)
    so a later union with another gather's picks counts shared elements once; past
    :data:`_PLACED_BOXES` boxes, a count known dim by dim (:func:`_coordinates`)."""
    boxes = _boxes_of(numbers, shape) if shape else None
    if boxes is not None:
        return Region.of(boxes)
    along = None
    if shape and numbers.numel() <= _DIAGONAL_PICKS:  # a diagonal's picks: rows with columns
        coordinates = torch.stack(torch.unravel_index(numbers, shape), -1)
        along = diagonals_through([tuple(point) for point in coordinates.tolist()])
    points, diagonals = along if along is not None else ([], [])
    spreads = [_coordinates(numbers, shape)] if shape else []
    return Region.of(points, numbers.numel(), spreads, diagonals)


#: Most picked elements :func:`_numbers_region` walks in order to find the diagonals they
#: lie on (:func:`~torchroofline.trace.regions.diagonals_through`).
_DIAGONAL_PICKS = 1 << 16


def _coordinates(numbers: torch.Tensor, shape: tuple[int, ...]) -> Spread:
    """Element numbers of a tensor of ``shape`` as the coordinates they hold on each dim: every
    index of a dim's set is some picked element's coordinate there, so a rule that needs whole
    lines through the picks needs the lines through those indices (the rows of every logit an
    anti-diagonal pick of a log-softmax reads)."""
    sets, stride = [], 1
    for size in reversed(shape):
        sets.append(positions_to_set(numbers.div(stride, rounding_mode="floor").remainder(size)
                                     .unique().tolist()))
        stride *= size
    return Spread(tuple(reversed(sets)), (True,) * len(shape))


def _boxes_of(numbers: torch.Tensor, shape: tuple[int, ...]) -> list[Box] | None:
    """Sorted distinct element numbers of a tensor of ``shape`` as disjoint boxes: the lines
    (all dims but the last) grouped by the columns they hold, each group its lines (as boxes
    of the leading dims, the same way) × those columns — whole rows picked by index are one
    box however many rows; None past :data:`_PLACED_BOXES` boxes."""
    if len(shape) == 1:
        return [(positions_to_set(numbers.tolist()),)]
    lines, line_of, counts = numbers.div(shape[-1], rounding_mode="floor").unique_consecutive(
        return_inverse=True, return_counts=True
    )
    columns = numbers % shape[-1]
    boxes: list[Box] = []
    for held in counts.unique().tolist():
        alike = counts == held
        sets, group = columns[alike[line_of]].reshape(-1, held).unique(dim=0, return_inverse=True)
        if len(boxes) + len(sets) > _PLACED_BOXES:
            return None
        for g, columns_held in enumerate(sets):
            inner = _boxes_of(lines[alike][group == g], shape[:-1])
            if inner is None or len(boxes) + len(inner) > _PLACED_BOXES:
                return None
            held_set = positions_to_set(columns_held.tolist())
            boxes += [(*box, held_set) for box in inner]
    return boxes




@demand_rule([aten.slice_scatter, aten.select_scatter, aten.diagonal_scatter,
              aten.as_strided_scatter])
def view_scatter_demand(context: _Context) -> Demand:
    """``x.slice_scatter(src, …)`` and its kin: x with one view of it replaced by ``src``.
    Run on element numbers (x's as −1 − i, src's as i), each demanded output names the one
    element it copies: src's where the view lies, x's elsewhere (demanded outputs with no
    position are charged to neither: which one they copy is not known). No FLOPs. Past
    :data:`_NUMBERED_SOURCE_LIMIT` elements, or where the real op refuses shapes its meta
    kernel took (``select_scatter`` of a src as big as x), the rule for ops with none of
    their own."""
    destination, source = context.op.reads[:2]
    shape = context.op.writes[0].shape
    if max(destination.elements, source.elements) > _NUMBERED_SOURCE_LIMIT or (
        destination.shape != shape
    ):
        return _proportional(context)
    mine = -1 - torch.arange(destination.elements).reshape(destination.shape)
    theirs = torch.arange(source.elements).reshape(source.shape)
    try:
        copied = context.op.func(mine, theirs, *context.op.args[2:], **context.op.kwargs)
    except RuntimeError:  # a call the meta kernel let through and the real one refuses
        return _proportional(context)
    held = copied[_demanded_mask(context.output, shape)]
    inputs = (
        _numbers_region((-1 - held[held < 0]).sort().values, destination.shape),
        _numbers_region(held[held >= 0].unique(), source.shape),
    )
    return Demand(inputs, NO_FLOPS)


@demand_rule([aten.max_unpool2d, aten.max_unpool3d])
def unpool_demand(context: _Context) -> Demand:
    """``max_unpool(values, indices, output_size)``: each (n, c) plane of the output holds
    the plane's values at the flat positions its indices name, zeros elsewhere. Whether a
    demanded output is a value or a zero is known only after every index of its plane (any may
    name it), so those are needed; which value lands there is data (any input may send none
    there): no value is charged, but one per plane where the whole output is kept. No FLOPs."""
    values, indices = context.op.reads[:2]
    spatial = 3 if aten.max_unpool3d in op_keys(context.op) else 2
    lead = len(indices.shape) - spatial
    out_plane = math.prod(context.op.writes[0].shape[lead:])
    in_plane = math.prod(indices.shape[lead:])
    boxes = [(*box[:lead], *full_box(indices.shape[lead:])) for box in context.output.boxes]
    planes = -(-context.output.opaque // max(out_plane, 1))
    # every value lands in its plane, but all of a plane's may land on one position: a whole
    # output takes one value of each plane at least
    whole = context.fraction >= 1.0 and in_plane
    landed = Region(opaque=math.prod(values.shape[:lead])) if whole else NOWHERE
    return Demand((landed, Region.of(boxes, planes * in_plane)), NO_FLOPS)


def _copied_elements(context: _Context, copies: list[torch.Tensor], numbered: int) -> Region:
    """The element numbers (of read ``numbered``, numbered from 0; below 0 a constant) the
    demanded outputs hold, ``copies`` the op's outputs run on those numbers, in the order of
    its writes."""
    held = torch.cat([
        copy[_demanded_mask(region, tuple(copy.shape))].reshape(-1).long()
        for copy, region in zip(copies, context.outputs, strict=True)
    ])
    return _numbers_region(held[held >= 0].unique(), context.op.reads[numbered].shape)


@demand_rule(VIEW_COPIES)
def view_copy_demand(context: _Context) -> Demand:
    """A view made a copy: run on its source's element numbers, each demanded output names
    the element it copies (outputs with no position: none). No FLOPs. Past
    :data:`_NUMBERED_SOURCE_LIMIT` elements, the rule for ops with none of their own."""
    source = context.op.reads[0]
    if source.elements > _NUMBERED_SOURCE_LIMIT:
        return _proportional(context)
    numbers = torch.arange(source.elements).reshape(source.shape)
    copies = context.op.func(numbers, *context.op.args[1:], **context.op.kwargs)
    copies = list(copies) if isinstance(copies, list | tuple) else [copies]
    return Demand((_copied_elements(context, copies, 0), *(NOWHERE,) * len(context.op.reads[1:])),
                  NO_FLOPS)


#: Constants ``lu_unpack`` writes among the copies: the unit diagonal (1) and the zeros of L's
#: upper and U's lower triangle, told apart from the element numbers shifted past them.
_UNPACKED_CONSTANTS = 2


@demand_rule([aten.lu_unpack])
def lu_unpack_demand(context: _Context) -> Demand:
    """``lu_unpack(LU, pivots)`` → P, L, U: L is LU's strict lower triangle over a unit
    diagonal, U its upper triangle, so each of their demanded elements off the constants copies
    one element of LU; P is the pivots' row swaps applied in order, any of its elements moved
    by every pivot of its matrix: a demanded element of P needs all of its matrix's. Run on
    LU's element numbers (shifted past 0 and 1, in float64: exact below 2⁵³) and identity
    pivots. No FLOPs."""
    data, pivots = context.op.reads[:2]
    if data.elements > _NUMBERED_SOURCE_LIMIT:
        return _proportional(context)
    numbers = torch.arange(data.elements, dtype=torch.float64).reshape(data.shape)
    identity = torch.arange(1, pivots.shape[-1] + 1, dtype=torch.int32).expand(pivots.shape)
    copies = context.op.func(numbers + _UNPACKED_CONSTANTS, identity.contiguous(),
                             *context.op.args[2:], **context.op.kwargs)
    copies = [copy - _UNPACKED_CONSTANTS for copy in copies]
    copies[0] = torch.full(copies[0].shape, -1.0)  # P copies no element of LU
    permuted = context.outputs[0]  # its matrices' pivots, the batch dims P's boxes hold
    swaps = Region.of([(*box[:-2], *full_box(pivots.shape[-1:])) for box in permuted.boxes],
                      -(-permuted.opaque // math.prod(copies[0].shape[-2:])) * pivots.shape[-1])
    return Demand((_copied_elements(context, copies, 0), swaps), NO_FLOPS)


#: Copies whose every output element is one element of their first argument, run on numbers
#: to find which (:func:`element_sources`)
_NUMBERED_MOVES = _op_set([aten.flip, aten.roll, aten.clone, *VIEW_COPIES])

#: Copies :func:`element_sources` follows back from a value
_MOVES_FOLLOWED = 2


def element_sources(context: _Context, ref: TensorRef) -> tuple[int, torch.Tensor] | None:
    """Which element each element of read ``ref`` is: the value it was copied from through
    flips, rolls and views made copies (:data:`_NUMBERED_MOVES`, up to
    :data:`_MOVES_FOLLOWED` of them), and for each element of ``ref`` its number in that
    value's storage (−1: none known). None past :data:`_NUMBERED_SOURCE_LIMIT` elements or
    for a view with no strides."""
    return _sources(context, ref, _MOVES_FOLLOWED)


def source_value(context: _Context, ref: TensorRef) -> int:
    """The value :func:`element_sources` finds ``ref`` copied from, without numbering it (two
    reads of different ones hold no element in common)."""
    for _ in range(_MOVES_FOLLOWED):
        producer = context.producers.get(ref.value_id)
        if producer is None or not _one_of(producer, _NUMBERED_MOVES) or not producer.reads:
            break
        ref = producer.reads[0]
    return ref.value_id


def _storage_view(values: torch.Tensor, written: TensorRef, ref: TensorRef) -> torch.Tensor:
    """``values`` (as ``written`` lays them out) as the view ``ref`` of the same storage sees
    them (−1 where ``written`` does not cover)."""
    size = max(_extent(written), _extent(ref))
    storage = torch.full((size,), -1, dtype=torch.long)
    storage.as_strided(written.shape, written.strides, written.offset).copy_(values)
    return storage.as_strided(ref.shape, ref.strides, ref.offset)


def _sources(context: _Context, ref: TensorRef, moves: int) -> tuple[int, torch.Tensor] | None:
    if len(ref.strides) != len(ref.shape) or _extent(ref) > _NUMBERED_SOURCE_LIMIT:
        return None
    producer = context.producers.get(ref.value_id)
    if moves == 0 or producer is None or not _one_of(producer, _NUMBERED_MOVES) or not (
        producer.reads and producer.writes and producer.func is not None
    ):
        numbers = torch.arange(_extent(ref)).as_strided(ref.shape, ref.strides, ref.offset)
        return ref.value_id, numbers
    inner = _sources(context, producer.reads[0], moves - 1)
    written = producer.writes[0]
    if inner is None or len(written.strides) != len(written.shape):
        return None
    moved = producer.func(inner[1], *producer.args[1:], **producer.kwargs)
    if isinstance(moved, list | tuple) or tuple(moved.shape) != tuple(written.shape):
        return None
    return inner[0], _storage_view(moved, written, ref)
