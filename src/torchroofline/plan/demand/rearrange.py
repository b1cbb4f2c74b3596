"""Demand rules of rearrangements: ops whose every output element is one input element at a
position fixed by the shapes: pixel and channel shuffles, ``rot90``, reflection and replication
pads.

Each rule maps a demanded output box to input boxes exactly, one box per residue of the index
arithmetic (a pixel shuffle's r² sub-pixel positions), so a slice of the output charges the
input elements it moves and no others.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable

from ...costs import NO_FLOPS, aten
from ...trace.regions import (
    NOWHERE,
    Box,
    IndexSet,
    Region,
    mapped_set,
    normalize,
    positions_to_set,
    set_intersection,
)
from ._core import Demand, _Context, _one_of, _op_set, _proportional, demand_rule
from .layout import _per_dim, _reversed


def _quotients(index_set: IndexSet, modulus: int, residue: int) -> IndexSet:
    """The q with q·modulus + residue in ``index_set``: the positions one residue class holds,
    numbered within the class."""
    largest = max((r[-1] for r in index_set if r), default=-1)
    in_class = set_intersection(index_set, (range(residue, largest + 1, modulus),))
    return tuple(
        range((r.start - residue) // modulus, (r[-1] - residue) // modulus + 1, r.step // modulus)
        for r in in_class
        if r
    )


def _remapped(context: _Context, boxes_of: Callable[[Box], Iterable[Box]]) -> Demand:
    """The first read needs ``boxes_of(box)`` for each demanded output box (empty index sets
    dropped); a demanded output with no position is one input element (the maps are one to
    one, or many to one for pads, which pass no opaque count)."""
    region = context.output
    rank = len(context.op.writes[0].shape)
    if any(len(box) != rank for box in region.boxes):
        return _proportional(context)
    boxes = [mapped for box in region.boxes for mapped in boxes_of(box) if all(mapped)]
    rest = tuple(NOWHERE for _ in context.op.reads[1:])
    return Demand((Region.of(boxes), *rest), NO_FLOPS)


@demand_rule([aten.pixel_shuffle])
def pixel_shuffle_demand(context: _Context) -> Demand:
    """``out[…, c, h·r + i, w·r + j] = in[…, c·r² + i·r + j, h, w]``: per sub-pixel (i, j),
    the demanded rows ≡ i and columns ≡ j (mod r) of the demanded channels."""
    factor = context.argument("upscale_factor")

    def boxes_of(box: Box) -> Iterable[Box]:
        *lead, channels, rows, columns = box
        for i in range(factor):
            for j in range(factor):
                yield (
                    *lead,
                    mapped_set(channels, i * factor + j, factor * factor),
                    _quotients(rows, factor, i),
                    _quotients(columns, factor, j),
                )

    return _remapped(context, boxes_of)


@demand_rule([aten.pixel_unshuffle])
def pixel_unshuffle_demand(context: _Context) -> Demand:
    """``out[…, c·r² + i·r + j, h, w] = in[…, c, h·r + i, w·r + j]``: per channel residue
    k = i·r + j, rows h·r + i and columns w·r + j of the demanded (h, w)."""
    factor = context.argument("downscale_factor")

    def boxes_of(box: Box) -> Iterable[Box]:
        *lead, channels, rows, columns = box
        for k in range(factor * factor):
            i, j = divmod(k, factor)
            yield (
                *lead,
                _quotients(channels, factor * factor, k),
                mapped_set(rows, i, factor),
                mapped_set(columns, j, factor),
            )

    return _remapped(context, boxes_of)


@demand_rule([aten.channel_shuffle, aten.native_channel_shuffle])
def channel_shuffle_demand(context: _Context) -> Demand:
    """C = g·k channels seen as (g, k), transposed: output channel a·g + b is input channel
    b·k + a."""
    groups = context.argument("groups")
    per_group = context.op.reads[0].shape[1] // groups

    def boxes_of(box: Box) -> Iterable[Box]:
        lead, channels, *rest = box
        for b in range(groups):
            yield (lead, mapped_set(_quotients(channels, groups, b), b * per_group), *rest)

    return _remapped(context, boxes_of)


@demand_rule([aten.rot90])
def rot90_demand(context: _Context) -> Demand:
    """A quarter turn in the plane (a, b), k times: k = 1 reads ``x[j, n_b − 1 − i]`` for output
    (i, j), k = 2 both dims reversed, k = 3 ``x[n_a − 1 − j, i]``."""
    shape = context.op.reads[0].shape
    turns = context.argument("k", 1) % 4
    first, second = (d % len(shape) for d in context.argument("dims", (0, 1)))

    def boxes_of(box: Box) -> Iterable[Box]:
        mapped = list(box)
        if turns == 1:
            mapped[first], mapped[second] = box[second], _reversed(box[first], shape[second])
        elif turns == 2:
            mapped[first] = _reversed(box[first], shape[first])
            mapped[second] = _reversed(box[second], shape[second])
        elif turns == 3:
            mapped[first], mapped[second] = _reversed(box[second], shape[first]), box[first]
        yield tuple(normalize(index_set) for index_set in mapped)

    return _remapped(context, boxes_of)


def _reflected(position: int, size: int) -> int:
    if position < 0:
        return -position
    return 2 * (size - 1) - position if position >= size else position


def _replicated(position: int, size: int) -> int:
    return min(max(position, 0), size - 1)


_REFLECTION_PADS = (aten.reflection_pad1d, aten.reflection_pad2d, aten.reflection_pad3d)
_REFLECTION_KEYS = _op_set(_REFLECTION_PADS)


@demand_rule([
    *_REFLECTION_PADS,
    aten.replication_pad1d, aten.replication_pad2d, aten.replication_pad3d,
])
def mirrored_pad_demand(context: _Context) -> Demand:
    """Output position p of a padded dim (left pad l, input size n) reads q = p − l when
    0 ≤ q < n; outside, reflection reads −q or 2(n − 1) − q, replication the nearest edge.
    The border positions (at most the pads) are listed one by one; outputs with no position
    read at least their count over the most outputs one input element feeds."""
    shape = context.op.reads[0].shape
    pads = list(context.argument("padding", ()))
    reflection = _one_of(context.op, _REFLECTION_KEYS)
    position_in = _reflected if reflection else _replicated
    left = {len(shape) - 1 - index // 2: pads[index] for index in range(0, len(pads), 2)}
    right = {len(shape) - 1 - index // 2: pads[index] for index in range(1, len(pads), 2)}
    # along a padded dim an input position feeds itself and, reflected, at most one mirror
    # position a side; replicated, an edge feeds its whole pad
    most_reads = math.prod(
        3 if reflection else 1 + max(left[dim], right.get(dim, 0), 0) for dim in left
    )

    def positions(dim: int, demanded: IndexSet) -> IndexSet:
        if dim not in left:
            return demanded
        size, shift = shape[dim], left[dim]
        inside = set_intersection(demanded, (range(shift, shift + size),))
        largest = max((r[-1] for r in demanded if r), default=0)
        border = set_intersection(demanded, (range(shift), range(shift + size, largest + 1)))
        return (
            *mapped_set(inside, -shift),
            *positions_to_set(position_in(p - shift, size) for r in border for p in r),
        )

    return _per_dim(context, positions, most_reads=most_reads)
