"""Where a view sits in its storage: the storage's common coordinates (:class:`Layout`), a
view as a box there (:class:`Placement`), and regions mapped between a view and its storage
(:class:`Storages`): every view of one storage is counted in one layout, so the two halves of
``x`` are all of ``x``. A view that is no box (a diagonal, overlapping windows) maps as a count
with its first elements placed and its diagonals as spreads (:class:`~.regions.Spread`).
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from functools import cached_property
from typing import TYPE_CHECKING, NamedTuple

from .regions import (
    _ENUMERATION_LIMIT,
    MAX_BOXES,
    NOWHERE,
    Box,
    Diagonal,
    IndexSet,
    Region,
    Spread,
    box_size,
    full_box,
    make_diagonal,
    mapped_set,
    normalize,
    positions_to_set,
    range_intersection,
    set_intersection,
    set_size,
)

if TYPE_CHECKING:  # views are duck-typed: this module imports nothing else of the package
    from .refs import TensorRef


class Layout(NamedTuple):
    """Common coordinates of one storage: dense dims, outermost first (``strides`` descending).
    A named tuple: it keys the mapping caches, and a tuple hashes in C."""

    sizes: tuple[int, ...]
    strides: tuple[int, ...]


def dense_layout(ref: TensorRef) -> Layout | None:
    """The layout of a view that covers its whole storage densely (a fresh op output), if so."""
    if ref.offset != 0 or len(ref.strides) != len(ref.shape):
        return None
    return _dense_layout(ref.shape, ref.strides, ref.storage_elements)


@functools.lru_cache(maxsize=4096)  # a program's views have few distinct shapes
def _dense_layout(
    shape: tuple[int, ...], strides: tuple[int, ...], storage_elements: int
) -> Layout | None:
    dims = sorted(
        ((stride, size) for size, stride in zip(shape, strides, strict=True) if size > 1),
        reverse=True,
    )
    expected = 1
    for stride, size in reversed(dims):
        if stride != expected:
            return None
        expected *= size
    if expected != storage_elements:
        return None
    return Layout(tuple(size for _, size in dims), tuple(stride for stride, _ in dims))


@dataclass(frozen=True)
class _Axis:
    """How one view dimension walks the layout: no base dim (size 1 or broadcast), one base dim
    with a step, or several consecutive base dims merged (outermost first, step 1)."""

    base_dims: tuple[int, ...]
    step: int = 1
    #: merged dims: the flat position (over ``base_dims``) of the view's first index
    flat_origin: int = 0


@dataclass(frozen=True)
class Placement:
    """A view as a box in its storage's layout: the base index of its first element and its axes."""

    layout: Layout
    origin: tuple[int, ...]
    axes: tuple[_Axis, ...]
    shape: tuple[int, ...]

    @cached_property
    def is_identity(self) -> bool:
        """The view is its storage's layout itself (a fresh op output, most often): view and
        storage coordinates are the same, so regions map unchanged."""
        return (
            self.shape == self.layout.sizes
            and not any(self.origin)
            and all(
                axis.base_dims == (dim,) and axis.step == 1 for dim, axis in enumerate(self.axes)
            )
        )


def place(ref: TensorRef, layout: Layout) -> Placement | None:
    """``ref`` as an index box in ``layout``, or None when it is not one (a diagonal, an
    overlapping window)."""
    if len(ref.strides) != len(ref.shape) or 0 in layout.sizes:
        return None
    origin = tuple(
        (ref.offset // stride) % size for size, stride in zip(*_dims(layout), strict=False)
    )
    if sum(i * s for i, s in zip(origin, layout.strides, strict=True)) != ref.offset:
        return None
    used: set[int] = set()
    axes = []
    for size, stride in zip(ref.shape, ref.strides, strict=True):
        if size == 1 or stride == 0:
            axes.append(_Axis(()))
            continue
        axis = _single_axis(layout, origin, used, size, stride) or _merged_axis(
            layout, origin, used, size, stride
        )
        if axis is None:
            return None
        used.update(axis.base_dims)
        axes.append(axis)
    return Placement(layout, origin, tuple(axes), ref.shape)


def _dims(layout: Layout) -> tuple[tuple[int, ...], tuple[int, ...]]:
    return layout.sizes, layout.strides


def _single_axis(
    layout: Layout, origin: tuple[int, ...], used: set[int], size: int, stride: int
) -> _Axis | None:
    for dim, (base_size, base_stride) in enumerate(zip(*_dims(layout), strict=False)):
        if dim in used or stride < base_stride or stride % base_stride:
            continue
        step = stride // base_stride
        if origin[dim] + step * (size - 1) < base_size:
            return _Axis((dim,), step)
    return None


def _merged_axis(
    layout: Layout, origin: tuple[int, ...], used: set[int], size: int, stride: int
) -> _Axis | None:
    """A view dim walking consecutive flat positions of several layout dims (a reshape's merged
    dim, or a crop of one: the first 14 of 21 rows split 3 × 7 by the window view of Swin)."""
    if stride not in layout.strides:
        return None
    inner = layout.strides.index(stride)
    covered, flat = 1, 0
    for outer in range(inner, -1, -1):
        if outer in used:
            return None
        flat += origin[outer] * covered
        covered *= layout.sizes[outer]
        if outer < inner and flat + size <= covered:
            return _Axis(tuple(range(outer, inner + 1)), flat_origin=flat)
    return None


def _linear_boxes(start: int, stop: int, sizes: Sequence[int]) -> list[tuple[IndexSet, ...]]:
    """The flat index range [start, stop) over dims ``sizes`` (outermost first) as boxes."""
    if start >= stop:
        return []
    if len(sizes) == 1:
        return [((range(start, stop),),)]
    inner = math.prod(sizes[1:])
    first_full, last_full = -(-start // inner), stop // inner
    if first_full > last_full:
        row = start // inner
        rest = _linear_boxes(start - row * inner, stop - row * inner, sizes[1:])
        return [((range(row, row + 1),), *box) for box in rest]
    boxes = []
    if start < first_full * inner:
        row = first_full - 1
        rest = _linear_boxes(start - row * inner, inner, sizes[1:])
        boxes += [((range(row, row + 1),), *box) for box in rest]
    if first_full < last_full:
        boxes.append(((range(first_full, last_full),), *full_box(sizes[1:])))
    if last_full * inner < stop:
        rest = _linear_boxes(0, stop - last_full * inner, sizes[1:])
        boxes += [((range(last_full, last_full + 1),), *box) for box in rest]
    return boxes


#: A strided walk over merged dims that touches more rows than this, with no pattern shared by
#: its rows, is counted rather than placed (see :func:`_strided_boxes`).
MAX_ROWS_SPLIT = 64


def _strided_boxes(walk: range, sizes: Sequence[int]) -> list[tuple[IndexSet, ...]] | None:
    """The flat positions of ``walk`` (any step) over dims ``sizes`` as boxes, exactly; None
    where that would take a box per row of more than :data:`MAX_ROWS_SPLIT` rows."""
    if not walk:
        return []
    if walk.step == 1:
        return _linear_boxes(walk.start, walk.stop, sizes)
    if len(sizes) == 1:
        return [((walk,),)]
    inner = math.prod(sizes[1:])
    first_row, last_row = walk.start // inner, walk[-1] // inner
    if walk.step % inner == 0:  # the same position in every step-th row
        offset = walk.start % inner
        rows = range(first_row, last_row + 1, walk.step // inner)
        return [((rows,), *box) for box in _linear_boxes(offset, offset + 1, sizes[1:])]
    rows_walked = []
    for row in range(first_row, last_row + 1):
        low, high = max(walk.start, row * inner), min(walk[-1] + 1, (row + 1) * inner)
        first = low + (walk.start - low) % walk.step
        if first < high:
            rows_walked.append((row, range(first - row * inner, high - row * inner, walk.step)))
    if inner % walk.step == 0 and len(rows_walked) > 2:  # full rows share one pattern
        (head, head_walk), *middle, (tail, tail_walk) = rows_walked
        inner_boxes = _strided_boxes(middle[0][1], sizes[1:])
        if inner_boxes is None:
            return None
        boxes = [((range(middle[0][0], tail),), *box) for box in inner_boxes]
        rows_walked = [(head, head_walk), (tail, tail_walk)]
    elif len(rows_walked) > MAX_ROWS_SPLIT:
        return None
    else:
        boxes = []
    for row, row_walk in rows_walked:
        inner_boxes = _strided_boxes(row_walk, sizes[1:])
        if inner_boxes is None:
            return None
        boxes += [((range(row, row + 1),), *box) for box in inner_boxes]
    return boxes


def _axis_pieces(
    placement: Placement, axis: _Axis, index_set: IndexSet
) -> list[dict[int, IndexSet]] | None:
    """One view dim's index set as alternatives over the base dims it walks (None where a
    strided walk over merged dims cannot be placed: the caller counts it instead)."""
    if len(axis.base_dims) == 1:
        (dim,) = axis.base_dims
        start, step = placement.origin[dim], axis.step
        mapped = tuple(
            range(start + step * r.start, start + step * r[-1] + 1, step * r.step)
            for r in index_set
            if r
        )
        return [{dim: mapped}]
    sizes = [placement.layout.sizes[d] for d in axis.base_dims]
    pieces = []
    for walk in mapped_set(index_set, axis.flat_origin):
        boxes = _strided_boxes(walk, sizes)
        if boxes is None:
            return None
        pieces += [dict(zip(axis.base_dims, box, strict=True)) for box in boxes]
    return pieces


def to_base(placement: Placement | None, ref: TensorRef, region: Region,
            layout: Layout | None = None) -> Region:
    """A region in ``ref``'s view coordinates as a region of its storage's layout. A view that
    is no box there (a diagonal, overlapping windows) maps as a count, with the storage
    elements of its first :data:`MAX_BOXES` demanded elements placed exactly where ``layout``
    (the storage's) is given: a small diagonal keeps which rows and columns it needs."""
    if placement is None:
        if layout is None:
            points, spreads, lines = [], [], []
        else:
            points, spreads = _placed_points(ref, region, layout), _diagonals(ref, region, layout)
            lines = _diagonals_placed(ref, region, layout)
        # view elements that repeat a storage element (overlapping windows) are at most the
        # view's elements less its distinct ones: each repeat removes at most one
        repeats = math.prod(ref.shape) - ref.elements
        return Region.of(points, region.count - repeats, spreads, lines)
    if placement.is_identity:
        return region
    boxes: list[Box] = []
    counted = 0  # elements of a view box that could not be placed
    for view_box in region.boxes:
        partial: list[dict[int, IndexSet]] = [{}]
        for axis, index_set in zip(placement.axes, view_box, strict=True):
            if not index_set:
                partial = []
                break
            if not axis.base_dims:
                continue
            pieces = _axis_pieces(placement, axis, index_set)
            if pieces is None:  # counted, not placed; the largest such box, so never above
                counted = max(counted, box_size(view_box))
                partial = []
                break
            partial = [{**done, **piece} for done in partial for piece in pieces]
        for assignment in partial:
            boxes.append(
                tuple(
                    assignment.get(dim, (range(start, start + 1),))
                    for dim, start in enumerate(placement.origin)
                )
            )
    # view elements → storage elements (an overlapping view touches fewer than it shows)
    opaque = max(region.opaque, counted) * ref.elements // max(math.prod(ref.shape), 1)
    spreads = [placed for s in region.spreads if (placed := _spread_to_base(placement, s))]
    lines = [placed for each in region.diagonals if (placed := _diagonal_to_base(placement, each))]
    return Region.of(boxes, opaque, spreads, lines)


def _diagonal_to_base(placement: Placement, kept: Diagonal) -> Diagonal | None:
    """A view's line in its storage's layout, where each view dim walks one layout dim at most
    (None elsewhere: its elements stay counted)."""
    sets = [(range(start, start + 1),) for start in placement.origin]
    dims: dict[int, int] = {}
    for view_dim, axis in enumerate(placement.axes):
        if len(axis.base_dims) > 1:
            return None
        for dim in axis.base_dims:
            sets[dim] = mapped_set(kept.box[view_dim], placement.origin[dim], axis.step)
            dims[view_dim] = dim
    if any(d not in dims for d in kept.dims):
        return None
    placed = make_diagonal(
        sets, [dims[d] for d in kept.dims],
        [placement.origin[dims[d]] + o * placement.axes[d].step
         for d, o in zip(kept.dims, kept.origin, strict=True)],
        [s * placement.axes[d].step for d, s in zip(kept.dims, kept.step, strict=True)],
        kept.length,
    )
    return placed if isinstance(placed, Diagonal) else None


def _spread_to_base(placement: Placement, spread: Spread) -> Spread | None:
    """A view's spread in its storage's layout, where each view dim walks one layout dim
    (None where one walks several: the spread's count stays)."""
    sets = [(range(start, start + 1),) for start in placement.origin]
    hit = [False] * len(sets)
    for axis, index_set, is_hit in zip(placement.axes, *spread, strict=True):
        if len(axis.base_dims) > 1:
            return None
        for dim in axis.base_dims:
            sets[dim] = mapped_set(index_set, placement.origin[dim], axis.step)
            hit[dim] = is_hit
    return Spread(tuple(sets), tuple(hit))


def _diagonal_walk(
    ref: TensorRef, layout: Layout
) -> tuple[tuple[int, ...], list[dict[int, int]]] | None:
    """Where view ``ref`` starts in ``layout`` and, per view dim, its step on each layout dim:
    a diagonal steps on several at once (row and column, 1 each). None unless every view dim
    walks layout dims no other one walks, without carrying past their ends (overlapping
    windows do not)."""
    if len(ref.strides) != len(ref.shape) or 0 in layout.sizes:
        return None
    origin = tuple((ref.offset // stride) % size for size, stride in zip(*layout, strict=True))
    if sum(map(int.__mul__, origin, layout.strides)) != ref.offset:
        return None
    used: set[int] = set()
    walks = []
    for size, stride in zip(ref.shape, ref.strides, strict=True):
        steps: dict[int, int] = {}
        rest = stride if size > 1 else 0
        for dim, base_stride in enumerate(layout.strides):
            step, rest = divmod(rest, base_stride)
            if step:
                steps[dim] = step
        if rest or not used.isdisjoint(steps) or any(
            origin[dim] + step * (size - 1) >= layout.sizes[dim] for dim, step in steps.items()
        ):
            return None
        used.update(steps)
        walks.append(steps)
    return origin, walks


def _diagonals(ref: TensorRef, region: Region, layout: Layout) -> list[Spread]:
    """``region`` (view coordinates) of a view that steps on several layout dims at once, as
    spreads of the layout: each such dim hit at every position the view's index sets reach
    (:func:`_diagonal_walk`; none where the view is no such walk)."""
    walked = _diagonal_walk(ref, layout)
    if walked is None:
        return []
    origin, walks = walked
    pieces = [Spread(box, (False,) * len(box)) for box in region.boxes] + list(region.spreads)
    spreads = []
    for piece in pieces:
        sets = [(range(start, start + 1),) for start in origin]
        hit = [False] * len(origin)
        for steps, index_set, is_hit in zip(walks, *piece, strict=True):
            for dim, step in steps.items():
                sets[dim] = mapped_set(index_set, origin[dim], step)
                hit[dim] = is_hit or len(steps) > 1
        spreads.append(Spread(tuple(sets), tuple(hit)))
    return spreads


def _diagonals_placed(ref: TensorRef, region: Region, layout: Layout) -> list[Diagonal]:
    """``region``'s boxes (view coordinates) of a view with one dim that steps on several
    layout dims at once (a diagonal), as lines of the layout: each range of that dim's set one
    line, the other dims exact (:func:`_diagonal_walk`; none where the view is no such walk)."""
    walked = _diagonal_walk(ref, layout)
    if walked is None:
        return []
    origin, walks = walked
    linked = [v for v, steps in enumerate(walks) if len(steps) > 1]
    if len(linked) != 1:
        return []
    (diagonal,) = linked
    dims = tuple(walks[diagonal])
    lines = []
    for box in region.boxes:
        exact = [(range(start, start + 1),) for start in origin]
        for steps, index_set in zip(walks, box, strict=True):
            for dim, step in steps.items():
                exact[dim] = mapped_set(index_set, origin[dim], step)
        for walk in box[diagonal]:
            steps = walks[diagonal]
            placed = make_diagonal(exact, dims, [origin[d] + walk.start * steps[d] for d in dims],
                                   [walk.step * steps[d] for d in dims], len(walk))
            if isinstance(placed, Diagonal):
                lines.append(placed)
    return lines


def _placed_points(ref: TensorRef, region: Region, layout: Layout) -> list[Box]:
    """One-element boxes in ``layout`` for the storage elements of the first
    :data:`MAX_BOXES` elements of ``region`` (view coordinates) that lie in the layout."""
    if len(ref.strides) != len(ref.shape) or 0 in layout.sizes:
        return []
    points: list[Box] = []
    for box in region.boxes:
        for index in itertools.product(*(itertools.chain(*index_set) for index_set in box)):
            flat = ref.offset + sum(map(int.__mul__, index, ref.strides))
            coordinates = [(flat // stride) % size for size, stride in zip(*layout, strict=True)]
            if sum(map(int.__mul__, coordinates, layout.strides)) == flat:  # inside the layout
                points.append(tuple((range(c, c + 1),) for c in coordinates))
            if len(points) == MAX_BOXES:
                return points
    return points


def from_base(placement: Placement | None, ref: TensorRef, region: Region) -> Region:
    """The part of a storage region that falls in view ``ref``, in the view's coordinates."""
    storage = ref.storage_elements or ref.elements
    if placement is None:
        return Region(opaque=region.count - (storage - ref.elements))
    if placement.is_identity and storage == ref.elements:
        return region
    boxes = []
    for box in region.boxes:
        mapped = _box_in_view(placement, box)
        if mapped is not None:
            boxes.append(mapped)
    spreads = [mapped for s in region.spreads if (mapped := _spread_in_view(placement, s))]
    lines = [mapped for each in region.diagonals if (mapped := _diagonal_in_view(placement, each))]
    return Region.of(boxes, region.opaque - (storage - ref.elements), spreads, lines)


def _diagonal_in_view(placement: Placement, kept: Diagonal) -> Diagonal | None:
    """A storage line in the coordinates of a view whose dims each walk one layout dim, where
    the view holds all of it (None elsewhere: its elements stay counted)."""
    walked = {}
    for view_dim, axis in enumerate(placement.axes):
        if len(axis.base_dims) > 1:
            return None
        walked.update({dim: view_dim for dim in axis.base_dims})
    sets = _box_in_view(placement, kept.box)
    if sets is None or box_size(sets) < box_size(kept.box):  # partly outside the view
        return None
    origin, steps = [], []
    for dim, first, step in zip(kept.dims, kept.origin, kept.step, strict=True):
        axis = placement.axes[walked[dim]]
        if (first - placement.origin[dim]) % axis.step or step % axis.step:
            return None
        origin.append((first - placement.origin[dim]) // axis.step)
        steps.append(step // axis.step)
    mapped_line = make_diagonal(sets, [walked[d] for d in kept.dims], origin, steps, kept.length)
    return mapped_line if isinstance(mapped_line, Diagonal) else None


def _spread_in_view(placement: Placement, spread: Spread) -> Spread | None:
    """A storage spread in the coordinates of a view whose dims each walk one layout dim, where
    the view holds every index of its hit sets (a hit index's element may lie anywhere along
    them); exact sets are cut to the view. None elsewhere."""
    used = {d for axis in placement.axes for d in axis.base_dims}
    for dim, start in enumerate(placement.origin):
        index_set, is_hit = spread.box[dim], spread.hit[dim]
        if dim not in used and (
            not set_intersection(index_set, (range(start, start + 1),))
            or (is_hit and set_size(index_set) > 1)
        ):
            return None
    sets: list[IndexSet] = []
    hit: list[bool] = []
    for axis, size in zip(placement.axes, placement.shape, strict=True):
        if len(axis.base_dims) > 1:
            return None
        if not axis.base_dims:
            sets.append((range(size),))
            hit.append(False)
            continue
        (dim,) = axis.base_dims
        index_set = spread.box[dim]
        mapped = _in_walk(index_set, placement.origin[dim], axis.step, size)
        if not mapped or (spread.hit[dim] and set_size(mapped) < set_size(index_set)):
            return None
        sets.append(mapped)
        hit.append(spread.hit[dim])
    return Spread(tuple(sets), tuple(hit))


def _in_walk(index_set: IndexSet, start: int, step: int, size: int) -> IndexSet:
    """The positions of ``index_set`` that the walk ``start + i·step`` (i < ``size``) reaches,
    as its indices i."""
    walk = range(start, start + step * size, step)
    return tuple(
        range((hit.start - start) // step, (hit[-1] - start) // step + 1, hit.step // step)
        for r in index_set
        if (hit := range_intersection(r, walk))
    )


def _box_in_view(placement: Placement, box: Box) -> Box | None:
    used = {d for axis in placement.axes for d in axis.base_dims}
    for dim, start in enumerate(placement.origin):
        if dim not in used and not set_intersection(box[dim], (range(start, start + 1),)):
            return None
    sets: list[IndexSet] = []
    for axis, size in zip(placement.axes, placement.shape, strict=True):
        if not axis.base_dims:
            sets.append((range(size),))
            continue
        if len(axis.base_dims) == 1:
            (dim,) = axis.base_dims
            mapped = _in_walk(box[dim], placement.origin[dim], axis.step, size)
        else:
            flat = _merged_in_view(placement, axis, box)
            inside = set_intersection(flat, (range(axis.flat_origin, axis.flat_origin + size),))
            mapped = mapped_set(inside, -axis.flat_origin)
        if not mapped:
            return None
        sets.append(mapped)
    return tuple(sets)


def _merged_in_view(placement: Placement, axis: _Axis, box: Box) -> IndexSet:
    """Flat positions of a box over merged dims (``(x @ w)[::2]`` of a matrix whose rows were
    split at stride 2 is every other row)."""
    flat = box[axis.base_dims[-1]]
    block = placement.layout.sizes[axis.base_dims[-1]]
    for dim in reversed(axis.base_dims[:-1]):
        flat = _combine(box[dim], flat, block)
        block *= placement.layout.sizes[dim]
    return flat




def _combine(outer: IndexSet, inner: IndexSet, block: int) -> IndexSet:
    """{o·block + i : o ∈ outer, i ∈ inner} (inner positions below ``block``)."""
    pieces: list[range] = []
    for out_range in outer:
        for in_range in inner:
            if not out_range or not in_range:
                continue
            if len(in_range) == 1:  # one position per outer index: a stride of block·step
                start = out_range.start * block + in_range.start
                pieces.append(
                    range(start, out_range[-1] * block + in_range.start + 1, out_range.step * block)
                )
            elif len(out_range) == 1:
                shift = out_range.start * block
                pieces.append(range(in_range.start + shift, in_range.stop + shift, in_range.step))
            elif in_range.step == 1 and len(in_range) == block and out_range.step == 1:
                pieces.append(range(out_range.start * block, (out_range[-1] + 1) * block))
            elif len(out_range) * len(in_range) <= _ENUMERATION_LIMIT:
                pieces += positions_to_set(o * block + i for o in out_range for i in in_range)
            # else: dropped (an under-approximation)
    return normalize(pieces)


class Storages:
    """The layout of every storage, chosen from a view covering it densely (else flat)."""

    def __init__(self, refs: Sequence[TensorRef]) -> None:
        self._layouts: dict[int, Layout] = {}
        self._units: dict[int, int] = {}
        #: placements and mapped regions by what they depend on (the layout and the view's
        #: geometry, not the storage): the same layers' views of many storages map once
        self._placements: dict[tuple, Placement | None] = {}
        self._in_storage: dict[tuple, Region] = {}
        self._in_view: dict[tuple, Region] = {}
        for ref in refs:
            if ref.storage_id not in self._layouts:
                layout = dense_layout(ref)
                if layout is not None:
                    self._layouts[ref.storage_id] = layout
                    self._units[ref.storage_id] = ref.itemsize
        for ref in refs:
            if ref.storage_id not in self._layouts:
                self._layouts[ref.storage_id] = inferred_layout(ref)
                self._units[ref.storage_id] = ref.itemsize
        #: per storage, the strides its views walk, one tuple per view geometry (views of one
        #: storage mostly share theirs: a set of tuples grows by a hash, not an update)
        walked: dict[int, set[tuple[int, ...]]] = {}
        for ref in refs:
            if ref.itemsize != self._units[ref.storage_id]:
                ref, _ = _in_units(ref, NOWHERE, self._units[ref.storage_id])
            strides = _walked_strides(ref.shape, ref.strides)
            if ref.storage_id in walked:
                walked[ref.storage_id].add(strides)
            else:
                walked[ref.storage_id] = {strides}
        for storage_id, layout in self._layouts.items():
            view_strides = frozenset(itertools.chain.from_iterable(walked.get(storage_id, ())))
            self._layouts[storage_id] = refined(layout, view_strides)

    def placement(self, ref: TensorRef) -> Placement | None:
        layout = self._layouts.get(ref.storage_id)
        if layout is None:
            return None
        key = (layout, ref.shape, ref.strides, ref.offset)
        if key not in self._placements:
            self._placements[key] = place(ref, layout)
        return self._placements[key]

    def unit(self, storage_id: int) -> int:
        """Bytes of the storage's elements as its layout counts them."""
        return self._units.get(storage_id, 0)

    def _mapping_key(self, ref: TensorRef, region: Region | None) -> tuple:
        """What mapping ``region`` between view ``ref`` and its storage depends on: the
        storage's layout and unit and the view's geometry, not which storage it is."""
        return (self._layouts.get(ref.storage_id), self._units.get(ref.storage_id, 0),
                ref.itemsize, ref.shape, ref.strides, ref.offset, ref.elements,
                ref.storage_elements, region)

    def region_of(self, ref: TensorRef, region: Region | None = None) -> Region:
        """``region`` (default: the whole view) of view ``ref`` in storage coordinates."""
        key = self._mapping_key(ref, region)
        mapped = self._in_storage.get(key)  # (one hash of the key: most are found)
        if mapped is None:
            view, in_view = _in_units(
                ref, Region.of([full_box(ref.shape)]) if region is None else region,
                self.unit(ref.storage_id),
            )
            mapped = self._in_storage[key] = to_base(
                self.placement(view), view, in_view, self._layouts.get(view.storage_id)
            )
        return mapped

    def in_view(self, ref: TensorRef, region: Region) -> Region:
        """The part of a storage region that view ``ref`` covers, in the view's coordinates."""
        key = self._mapping_key(ref, region)
        mapped = self._in_view.get(key)
        if mapped is None:
            mapped = self._in_view[key] = self._mapped_in_view(ref, region)
        return mapped

    def picks_part(self, ref: TensorRef) -> bool:
        """Whether view ``ref`` holds one part of each of its storage's elements (``z.real``
        of complex ``z``): its elements count as the storage's, each a part of one."""
        unit = self.unit(ref.storage_id)
        if not 0 < ref.itemsize < unit:
            return False
        restated, _ = _in_units(ref, NOWHERE, unit)
        return restated is not ref and restated.shape == ref.shape

    def _mapped_in_view(self, ref: TensorRef, region: Region) -> Region:
        unit = self.unit(ref.storage_id)
        if not unit or ref.itemsize == unit:
            return from_base(self.placement(ref), ref, region)
        canonical, _ = _in_units(ref, NOWHERE, unit)
        if canonical is ref:
            return Region(opaque=region.count - (ref.storage_elements - ref.elements))
        mapped = from_base(self.placement(canonical), canonical, region)
        if len(canonical.shape) == len(ref.shape):  # one part of each element: its element
            return mapped
        if ref.itemsize < unit:  # a float view of complex data: both parts of each element
            parts = unit // ref.itemsize
            return Region.of(
                [(*box, (range(parts),)) for box in mapped.boxes], mapped.opaque * parts
            )
        return Region.of(
            [box[:-1] for box in mapped.boxes], mapped.opaque // (ref.itemsize // unit)
        )


def _in_units(ref: TensorRef, region: Region, unit: int) -> tuple[TensorRef, Region]:
    """A view and a region of it restated in elements of ``unit`` bytes (``view_as_real`` of
    complex data: pairs of floats become one complex element; ``view_as_complex`` the
    reverse). Unchanged where the view cannot be restated (then it places as no box)."""
    if not unit or ref.itemsize == unit or not ref.shape:
        return ref, region
    if ref.itemsize < unit:
        parts = unit // ref.itemsize
        if not any(s % parts for s in ref.strides):  # one part of each element (``z.real``)
            return replace(
                ref,
                strides=tuple(s // parts for s in ref.strides),
                offset=ref.offset // parts,
                storage_elements=ref.storage_elements // parts,
                itemsize=unit,
            ), region
        if ref.shape[-1] != parts or ref.strides[-1] != 1:
            return ref, region
        if any(s % parts for s in ref.strides[:-1]) or ref.offset % parts:
            return ref, region
        boxes = [box[:-1] for box in region.boxes if set_size(box[-1]) == parts]
        narrowed = replace(
            ref,
            shape=ref.shape[:-1],
            strides=tuple(s // parts for s in ref.strides[:-1]),
            offset=ref.offset // parts,
            storage_elements=ref.storage_elements // parts,
            elements=ref.elements // parts,
            itemsize=unit,
        )
        return narrowed, Region.of(boxes, region.opaque // parts)
    parts = ref.itemsize // unit
    widened = replace(
        ref,
        shape=(*ref.shape, parts),
        strides=(*(s * parts for s in ref.strides), 1),
        offset=ref.offset * parts,
        storage_elements=ref.storage_elements * parts,
        elements=ref.elements * parts,
        itemsize=unit,
    )
    boxes = [(*box, (range(parts),)) for box in region.boxes]
    return widened, Region.of(boxes, region.opaque * parts)


@functools.lru_cache(maxsize=4096)  # a program's views have few distinct shapes
def _walked_strides(shape: tuple[int, ...], strides: tuple[int, ...]) -> tuple[int, ...]:
    """The strides a view steps through its storage with (dims of one element step nowhere)."""
    return tuple(s for s, n in zip(strides, shape, strict=False) if s > 0 and n > 1)


@functools.lru_cache(maxsize=4096)  # a program's storages have few distinct layouts
def refined(layout: Layout, view_strides: frozenset[int]) -> Layout:
    """``layout`` with its dims split at every stride some view walks (a (32, 64) matrix seen
    as (2, 16, 64) by a reshape becomes (16, 2, 64)), so each view dim walks one layout dim;
    unchanged when the strides do not nest."""
    elements = math.prod(layout.sizes)
    strides = sorted(set(layout.strides) | {s for s in view_strides if s < elements}, reverse=True)
    if not strides or strides[-1] != 1 or elements % strides[0]:
        return layout
    if any(outer % inner for outer, inner in zip(strides, strides[1:], strict=False)):
        return layout
    sizes = [elements // strides[0]]
    sizes += [outer // inner for outer, inner in zip(strides, strides[1:], strict=False)]
    return Layout(tuple(sizes), tuple(strides))


def inferred_layout(ref: TensorRef) -> Layout:
    """A dense layout for a storage seen only through partial views: nested dims read off the
    view's strides (``x[:, :512]`` of a 1024-wide matrix → 1024-wide rows), else flat. A
    storage longer than whole outer rows (the CPU's ``im2col`` writes its (1, 2, 2) output
    into 9 elements) keeps the rows the view lies in; the tail past them, which the view
    never reaches, is left out of the layout (a view reaching it places as no box)."""
    flat = Layout((max(ref.storage_elements, 1),), (1,))
    strides = sorted(
        {s for s, n in zip(ref.strides, ref.shape, strict=False) if s and n > 1}, reverse=True
    )
    if not strides or strides[-1] != 1:
        return flat
    rows = ref.storage_elements // strides[0]
    reach = ref.offset + sum((n - 1) * s for s, n in zip(ref.strides, ref.shape, strict=False))
    if ref.storage_elements % strides[0] and (reach >= rows * strides[0] or min(ref.strides) < 0):
        return flat
    if any(outer % inner for outer, inner in zip(strides, strides[1:], strict=False)):
        return flat
    sizes = [rows]
    sizes += [outer // inner for outer, inner in zip(strides, strides[1:], strict=False)]
    return Layout(tuple(sizes), tuple(strides))


def united_elements(refs: Sequence[TensorRef]) -> int:
    """Distinct elements of several views of one storage (two halves of a matrix: all of it;
    the same view twice: once). A lower bound where views are not index boxes."""
    return _united_elements(tuple(refs))


@functools.lru_cache(maxsize=256)
def _united_elements(refs: tuple[TensorRef, ...]) -> int:
    """:func:`united_elements`, once per set of views: fusion and pricing ask for the same
    op's reads several times (a cat of 100,000 slices: each union takes seconds)."""
    distinct: dict[tuple, TensorRef] = {}
    for ref in refs:  # one view read twice: the read that touches more of it
        key = (ref.shape, ref.strides, ref.offset)
        if key not in distinct or ref.elements > distinct[key].elements:
            distinct[key] = ref
    if len(distinct) == 1:
        return next(iter(distinct.values())).elements
    ranges = _flat_ranges(distinct.values())
    if ranges is not None:
        return _ranges_length(ranges)
    storages = Storages(list(distinct.values()))
    spans = [storages.region_of(ref) for ref in distinct.values()]
    # a view that touches fewer elements than it spans (a strided downsampling, a gather's
    # source) holds them at unknown positions inside its span; all united at once (a union a
    # view at a time is quadratic in the views: a cat of many slices)
    touched = [span if ref.elements >= span.count else Region(opaque=ref.elements)
               for ref, span in zip(distinct.values(), spans, strict=True)]
    return max(min(_united(spans).count, _united(touched).count), max(r.elements for r in refs))


def _flat_ranges(refs: Iterable[TensorRef]) -> list[tuple[int, int]] | None:
    """Each view's (first, past-last) storage element where every view is one dense run of
    elements of the same type (slices along the outermost dim: the rows of a cat of slices);
    None otherwise."""
    ranges = []
    types = set()
    for ref in refs:
        expected = 1
        for size, stride in zip(reversed(ref.shape), reversed(ref.strides), strict=False):
            if size > 1 and stride != expected:
                return None
            expected *= size
        if len(ref.strides) != len(ref.shape) or ref.elements != expected:
            return None
        types.add((ref.dtype, ref.itemsize))
        ranges.append((ref.offset, ref.offset + expected))
    return ranges if len(types) == 1 else None


def _ranges_length(ranges: list[tuple[int, int]]) -> int:
    """Elements in the union of half-open ranges."""
    total, reached = 0, -1
    for start, stop in sorted(ranges):  # (offsets are ≥ 0)
        total += max(0, stop - max(start, reached))
        reached = max(reached, stop)
    return total


def _united(regions: Sequence[Region]) -> Region:
    """The union of ``regions``, built once."""
    return Region.of(
        [box for region in regions for box in region.boxes],
        max((region.opaque for region in regions), default=0),
    )
