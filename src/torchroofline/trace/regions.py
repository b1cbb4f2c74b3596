"""Sets of tensor elements for the demand analysis: index boxes with strides, and their unions.

A :data:`Box` holds, per dimension, a sorted tuple of disjoint Python ``range`` objects (so a
strided slice, a conv's strided window positions or a crop are exact). A :class:`Region` is a
union of boxes plus an ``opaque`` count: elements known to be needed but with no known position
(a gather's rows, a diagonal). Every operation here *under*-approximates where it cannot be
exact: the demand analysis feeds a lower bound, which may be loose but never too high.
"""

from __future__ import annotations

import functools
import itertools
import math
from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from functools import cached_property
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:  # views are duck-typed: this module imports nothing of the package
    from .refs import TensorRef

IndexSet = tuple[range, ...]
Box = tuple[IndexSet, ...]

#: Boxes kept per region; beyond it the smallest are dropped (an under-approximation).
MAX_BOXES = 96


def set_size(index_set: IndexSet) -> int:
    return sum(map(len, index_set))


def box_size(box: Box) -> int:
    return math.prod([sum(map(len, index_set)) for index_set in box])


def full_box(shape: Sequence[int]) -> Box:
    return tuple((range(size),) for size in shape)


def distinct_offsets(shape: Sequence[int], strides: Sequence[int]) -> int:
    """Distinct storage offsets Σ iₖ·strideₖ of a strided view (``as_strided`` windows may
    overlap). Dims are added by stride, smallest first, to a set of offsets kept exactly while
    it is a progression {0, g, …, (c − 1)·g} (a stride m·g with m ≤ c extends it to
    c + m·(n − 1) terms, one that reaches past it repeats it n times) or its copies do not
    overlap; past that, counted one by one up to :data:`_ENUMERATION_LIMIT` offsets, else a
    lower bound: |A + B| ≥ |A| + |B| − 1 (Cauchy–Davenport over the integers)."""
    if 0 in shape:
        return 0
    dims = sorted((abs(s), n) for n, s in zip(shape, strides, strict=True) if s and n > 1)
    count, step, span, progression = 1, 0, 1, True  # step 0: the one offset {0}, any progression
    for stride, size in dims:
        if progression and step and stride % step == 0 and stride // step <= count:
            count += stride // step * (size - 1)
        elif stride >= span:  # n copies side by side: a progression again if they abut
            step = step or stride
            progression = progression and stride == count * step
            count *= size
        elif math.prod(n for _, n in dims) <= _ENUMERATION_LIMIT:
            return len(functools.reduce(
                lambda offsets, dim: {o + i * dim[0] for o in offsets for i in range(dim[1])},
                dims, {0},
            ))
        else:
            count += size - 1
            progression = False
        span += stride * (size - 1)
    return count


def _crt(a: int, m: int, b: int, n: int) -> tuple[int, int] | None:
    """x ≡ a (mod m), x ≡ b (mod n) → (x0, lcm) or None."""
    g = math.gcd(m, n)
    if (b - a) % g:
        return None
    lcm = m // g * n
    # m·k ≡ b − a (mod n) → k = ((b − a)/g) · inv(m/g) mod n/g
    reduced = n // g
    k = ((b - a) // g) * pow(m // g, -1, reduced) % reduced if reduced > 1 else 0
    return (a + m * k) % lcm, lcm


def range_intersection(first: range, second: range) -> range:
    """The elements of both (two arithmetic progressions with positive steps)."""
    if not first or not second:
        return range(0)
    low = max(first.start, second.start)
    high = min(first[-1], second[-1]) + 1
    if low >= high:
        return range(0)
    if first.step == second.step:
        if (second.start - first.start) % first.step:
            return range(0)
        start = low + (first.start - low) % first.step
        return range(start, high, first.step)
    solved = _crt(first.start, first.step, second.start, second.step)
    if solved is None:
        return range(0)
    residue, step = solved
    start = low + (residue - low) % step
    return range(start, high, step)


#: Range pairs an intersection tries all of; past it, only the ranges that can overlap.
_PAIRS_TRIED = 64


def set_intersection(first: IndexSet, second: IndexSet) -> IndexSet:
    if len(first) * len(second) <= _PAIRS_TRIED:
        return tuple(r for a in first for b in second if (r := range_intersection(a, b)))
    # many ranges (rows picked by index): each range of the smaller set meets only the ranges
    # of the larger that start by its end and reach its start — found by bisection, not all pairs
    few, many = sorted((first, second), key=len)
    ordered, starts, reach = _sweep(many)
    return tuple(
        r
        for a in few
        if a
        for b in ordered[bisect_left(reach, a.start) : bisect_right(starts, a[-1])]
        if (r := range_intersection(a, b))
    )


@functools.lru_cache(maxsize=256)  # one big set meets many small ones in turn
def _sweep(index_set: IndexSet) -> tuple[IndexSet, list[int], list[int]]:
    """The set's ranges by start, their starts, and the last position reached so far."""
    ordered = tuple(sorted((r for r in index_set if r), key=lambda r: r.start))
    return ordered, [r.start for r in ordered], list(itertools.accumulate(
        (r[-1] for r in ordered), max
    ))


#: Positions a set may hold to be rebuilt one by one where its ranges' steps clash
_EXACT_POSITIONS = 4096


def normalize(ranges: Iterable[range]) -> IndexSet:
    """Disjoint ranges covering exactly the union of ``ranges``. Ranges of different steps that
    overlap (a window's even and odd taps, a pad's edge beside its middle) are merged position
    by position when they hold at most ``_EXACT_POSITIONS``; past it the later one is dropped
    (an under-approximation)."""
    ranges = sorted((r for r in ranges if r), key=lambda r: (r.step, r.start))
    kept: list[range] = []
    clashed = False
    for candidate in ranges:
        if _merged_into(kept, candidate):
            continue
        if any(range_intersection(k, candidate) for k in kept):
            clashed = True  # overlaps a range of another step: keep the earlier, stay under
            continue
        kept.append(candidate)
    if clashed and sum(map(len, ranges)) <= _EXACT_POSITIONS:
        return positions_to_set(position for r in ranges for position in r)
    return tuple(sorted(kept, key=lambda r: r.start))


def _merged_into(kept: list[range], candidate: range) -> bool:
    """Extend the kept range of ``candidate``'s step and residue that it overlaps or continues
    (ranges come sorted by start, so only the latest of that residue can), unless the union
    would overlap a kept range of another step."""
    for index, other in enumerate(kept):
        if (
            other.step == candidate.step
            and (candidate.start - other.start) % other.step == 0
            and candidate.start <= other[-1] + other.step
        ):
            union = range(other.start, max(other[-1], candidate[-1]) + 1, other.step)
            if any(range_intersection(o, union) for j, o in enumerate(kept) if j != index):
                return False
            kept[index] = union
            return True
    return False


def positions_to_set(positions: Iterable[int]) -> IndexSet:
    """Sorted distinct positions → ranges: runs of a common step, strided ones of three or
    more (two scattered positions, as rows picked by index are, stay two ranges: one range
    spanning the positions between them would be a candidate to overlap every range there,
    :func:`set_intersection`)."""
    ordered = sorted(set(positions))
    runs: list[range] = []
    index = 0
    while index < len(ordered):
        start, end, step = ordered[index], index, 1
        if index + 1 < len(ordered):
            step = ordered[index + 1] - start
            end = index + 1
            while end + 1 < len(ordered) and ordered[end + 1] - ordered[end] == step:
                end += 1
            if end == index + 1 and step > 1:
                end, step = index, 1
        runs.append(range(start, ordered[end] + 1, step))
        index = end + 1
    return tuple(runs)


def mapped_set(index_set: IndexSet, origin: int, step: int = 1) -> IndexSet:
    """The positions ``origin + i·step`` for i in ``index_set`` (``step`` > 0): a shift, or a
    view's walk through the coordinates of the tensor it views."""
    return tuple(
        range(origin + r.start * step, origin + (r[-1] + 1) * step, r.step * step)
        for r in index_set
        if r
    )


def _set_difference(first: IndexSet, second: IndexSet) -> IndexSet:
    """Elements of ``first`` not in ``second``; exact for step-1 ranges and small sets, an
    under-approximation otherwise."""
    removed = set_intersection(first, second)
    if not removed:
        return first
    if set_size(removed) == set_size(first):
        return ()
    if set_size(first) <= _EXACT_POSITIONS:
        taken = {x for r in removed for x in r}
        return positions_to_set(x for r in first for x in r if x not in taken)
    result: list[range] = []
    for part in first:
        pieces = [part]
        for cut in second:
            next_pieces = []
            for piece in pieces:
                overlap = range_intersection(piece, cut)
                if not overlap:
                    next_pieces.append(piece)
                elif piece.step == 1 and overlap.step == 1:
                    next_pieces += [
                        range(piece.start, overlap.start),
                        range(overlap.stop, piece.stop),
                    ]
                # else: dropped (under-approximation)
            pieces = [p for p in next_pieces if p]
        result += pieces
    return tuple(result)


def box_intersection(first: Box, second: Box) -> Box | None:
    # the dims of fewest ranges first: boxes apart in one column miss at once, whatever their rows
    order = sorted(range(len(first)), key=lambda dim: len(first[dim]) * len(second[dim]))
    sets: dict[int, IndexSet] = {}
    for dim in order:
        both = set_intersection(first[dim], second[dim])
        if not both:
            return None
        sets[dim] = both
    return tuple(sets[dim] for dim in range(len(first)))


def _contains(outer: Box, inner: Box) -> bool:
    both = box_intersection(outer, inner)
    return both is not None and box_size(both) == box_size(inner)


def box_difference(first: Box, second: Box) -> list[Box]:
    """``first`` minus ``second`` as disjoint boxes (slab by slab)."""
    if box_intersection(first, second) is None:
        return [first]
    pieces = []
    prefix: list[IndexSet] = []
    for dim, (a, b) in enumerate(zip(first, second, strict=True)):
        outside = _set_difference(a, b)
        if outside:
            pieces.append((*prefix, outside, *first[dim + 1 :]))
        prefix.append(set_intersection(a, b))
    return pieces


#: Disjoint pieces :func:`_disjoint_count` may cut a region into before it gives up.
_MAX_PIECES = 4096


def _disjoint_count(boxes: Sequence[Box]) -> int:
    """Elements of the union of ``boxes``, each cut into pieces outside the boxes before it
    (:func:`box_difference`: pieces it cannot cut exactly are dropped, so the count is exact
    or less); 0 past :data:`_MAX_PIECES` pieces."""
    pieces: list[Box] = []
    for box in boxes:
        new = [box]
        for earlier in pieces:
            new = [part for piece in new for part in box_difference(piece, earlier)]
            if len(new) > _MAX_PIECES:
                return 0
        pieces += new
        if len(pieces) > _MAX_PIECES:
            return 0
    return sum(map(box_size, pieces))


#: An index set of at most this many positions is rewritten as its runs when boxes merge
#: (two strided halves, 0::2 and 1::2, become one range).
_RUNS_LIMIT = 4096


def _union_set(first: IndexSet, second: IndexSet) -> IndexSet | None:
    """The union of two index sets, exactly, or None where it has no exact form here."""
    both = set_size(set_intersection(first, second))
    if both == set_size(second):  # a union growing one gather's picks at a time, mostly
        return first
    if both == set_size(first):
        return second
    if all(r.step == 1 for r in itertools.chain(first, second)):
        return _interval_union((*first, *second))
    if set_size(first) + set_size(second) <= _RUNS_LIMIT:  # as its runs, whatever the ranges
        return positions_to_set(itertools.chain(*first, *second))
    union = normalize((*first, *second))
    if set_size(union) != set_size(first) + set_size(second) - both:
        return None
    # step-1 runs of two or more are already their own runs (normalize merged the touching
    # ones); only singletons and strided ranges may join into longer strided runs
    plain = all(r.step == 1 and len(r) > 1 for r in union)
    if len(union) > 1 and not plain and set_size(union) <= _RUNS_LIMIT:
        union = positions_to_set(i for r in union for i in r)
    return union


def _interval_union(intervals: Iterable[range]) -> IndexSet:
    """Step-1 ranges (rows picked by index: runs and single rows) as their maximal runs, in
    one pass over them by start — many ranges, few positions each."""
    merged: list[range] = []
    for interval in sorted((r for r in intervals if r), key=lambda r: r.start):
        if merged and interval.start <= merged[-1].stop:
            merged[-1] = range(merged[-1].start, max(merged[-1].stop, interval.stop))
        else:
            merged.append(interval)
    return tuple(merged)


def _coalesced(boxes: list[Box]) -> list[Box]:
    """``boxes`` with any two that differ in one dim only merged into one (exactly), until no
    two do: a region walked back through windows, crops and concatenations stays a few boxes,
    not one per row (past :data:`MAX_BOXES` the smallest would be dropped)."""
    merged = True
    while merged and len(boxes) > 1:
        merged = False
        for dim in range(len(boxes[0])):
            groups: dict[tuple, list[Box]] = {}
            for box in boxes:
                groups.setdefault((*box[:dim], *box[dim + 1 :]), []).append(box)
            if len(groups) == len(boxes):
                continue
            result = []
            for group in groups.values():
                current = group[0]
                if len(group) > 2 and all(r.step == 1 for box in group for r in box[dim]):
                    # rows one slice each (a cat of many slices): one pass over them all, not
                    # a union per box that sorts the ranges merged so far again
                    united = _interval_union(r for box in group for r in box[dim])
                    result.append((*current[:dim], united, *current[dim + 1 :]))
                    merged = True
                    continue
                for box in group[1:]:
                    union = _union_set(current[dim], box[dim])
                    if union is None:
                        result.append(box)
                        continue
                    current = (*current[:dim], union, *current[dim + 1 :])
                    merged = True
                result.append(current)
            boxes = result
    return sorted(boxes, key=box_size, reverse=True)


class Spread(NamedTuple):
    """Elements known dim by dim (a diagonal's rows and its columns, not which row goes with
    which column): for every index combination of the dims ``hit`` leaves False (the exact
    dims) within ``box``, each index of a hit dim's set is the coordinate, on that dim, of some
    element with that combination. A rule that needs whole lines along the other dims needs
    exactly those lines: ``diagonal(a @ b)`` every row of ``a`` and column of ``b``."""

    box: Box
    hit: tuple[bool, ...]

    @property
    def count(self) -> int:
        """Distinct elements at least: each exact combination holds as many as its largest
        hit set."""
        sizes = [set_size(index_set) for index_set in self.box]
        exact = math.prod(n for n, hit in zip(sizes, self.hit, strict=True) if not hit)
        return exact * max((n for n, hit in zip(sizes, self.hit, strict=True) if hit), default=1)

    def lines(self, sets: dict[int, IndexSet]) -> Spread:
        """The elements whole lines through this one's need: dims ``sets`` names replaced by
        them (every index there, so exact)."""
        return Spread(
            tuple(sets.get(dim, index_set) for dim, index_set in enumerate(self.box)),
            tuple(hit and dim not in sets for dim, hit in enumerate(self.hit)),
        )


#: Spreads kept per region; beyond it the smallest are dropped (an under-approximation).
MAX_SPREADS = 8


@dataclass(frozen=True)
class Region:
    """A union of boxes plus ``opaque`` elements of unknown position, some of them known dim by
    dim (``spreads``: :class:`Spread`, each counted in ``opaque``); :attr:`count` is a lower
    bound on the distinct elements (never more than the truth)."""

    boxes: tuple[Box, ...] = ()
    opaque: int = 0
    spreads: tuple[Spread, ...] = ()

    @staticmethod
    def of(boxes: Iterable[Box], opaque: int = 0, spreads: Iterable[Spread] = ()) -> Region:
        """The union of ``boxes`` (contained ones dropped, neighbours merged; past
        :data:`MAX_BOXES`, the rest kept as one spread of their rows and columns), ``opaque``
        elements (clamped at 0) and ``spreads``."""
        return _region_of(tuple(boxes), max(0, int(opaque)), tuple(spreads))

    def lines(self, sets: dict[int, IndexSet]) -> tuple[Spread, ...]:
        """:meth:`Spread.lines` of each spread."""
        return tuple(spread.lines(sets) for spread in self.spreads)

    @cached_property
    def count(self) -> int:
        """Distinct elements: Bonferroni's lower bound Σ|Aᵢ| − Σ|Aᵢ∩Aⱼ| (exact for disjoint or
        pairwise-overlapping boxes), or where boxes overlap the count of their disjoint pieces
        (:func:`_disjoint_count`, exact but for dropped pieces) if higher; never below the
        largest box or the opaque count."""
        sizes = [box_size(box) for box in self.boxes]
        total = sum(sizes)
        overlaps = 0
        for i, first in enumerate(self.boxes):
            for second in self.boxes[i + 1 :]:
                both = box_intersection(first, second)
                if both is not None:
                    total -= box_size(both)
                    overlaps += 1
        if overlaps > 1:  # three boxes may share elements Bonferroni subtracts twice
            total = max(total, _disjoint_count(self.boxes))
        return max(total, max(sizes, default=0), self.opaque)

    def __hash__(self) -> int:
        # regions key the mapping and region caches, looked up many times each: their nested
        # ranges are hashed once, not per lookup (the dataclass hash would rebuild it each time)
        cached = self.__dict__.get("_hash")
        if cached is None:
            cached = self.__dict__["_hash"] = hash((self.boxes, self.opaque, self.spreads))
        return cached

    def __eq__(self, other: object) -> bool:
        # the walk mostly compares a region with itself (cached results): no field compared
        if self is other:
            return True
        if other.__class__ is not Region:
            return NotImplemented
        return (
            self.boxes == other.boxes
            and self.opaque == other.opaque
            and self.spreads == other.spreads
        )

    def __bool__(self) -> bool:
        return bool(self.boxes) or self.opaque > 0

    def union(self, other: Region) -> Region:
        if not other:
            return self
        if not self:
            return other
        return Region.of(
            (*self.boxes, *other.boxes),
            max(self.opaque, other.opaque),
            (*self.spreads, *other.spreads),
        )

    def intersect_box(self, box: Box, box_share: int, total: int) -> Region:
        """The part inside ``box`` (``box_share`` of ``total`` elements): opaque elements are
        counted there only as far as they cannot all lie outside, spreads kept where they lie
        wholly inside."""
        inside = [both for b in self.boxes if (both := box_intersection(b, box)) is not None]
        spreads = [s for s in self.spreads if _contains(box, s.box)]
        return Region.of(inside, self.opaque - (total - box_share), spreads)

    def minus_box(self, box: Box) -> Region:
        outside = [piece for b in self.boxes for piece in box_difference(b, box)]
        spreads = [s for s in self.spreads if box_intersection(s.box, box) is None]
        return Region.of(outside, self.opaque - box_size(box), spreads)


#: The empty region, shared (regions are immutable)
NOWHERE = Region()


@functools.lru_cache(maxsize=4096)  # a program's repeated layers unite the same boxes again
def _region_of(boxes: tuple[Box, ...], opaque: int, spreads: tuple[Spread, ...]) -> Region:
    """:meth:`Region.of` of a tuple of boxes, a clamped opaque count and spreads."""
    spreads = tuple(s for s in spreads if all(s.box))
    if spreads:  # a spread exact in all dims but one is a box (:class:`Spread`)
        boxes += tuple(s.box for s in spreads if sum(s.hit) <= 1)
        spreads = tuple(s for s in spreads if sum(s.hit) > 1)
    sized = [(size, box) for box in boxes if (size := box_size(box))]
    if len(sized) > MAX_BOXES:  # (many slices) merged first: the containment test is pairwise
        sized = [(box_size(box), box) for box in _coalesced([box for _, box in sized])]
    sized.sort(key=lambda pair: pair[0], reverse=True)
    kept: list[Box] = []
    for _, box in sized:
        if not any(_contains(big, box) for big in kept):
            kept.append(box)
    if len(kept) > 1:
        kept = _coalesced(kept)
    if len(kept) > MAX_BOXES and len(kept[0]) > 1:
        dropped = _projection(kept[MAX_BOXES:])
        spreads += (dropped,)
        shown = kept[:MAX_BOXES]
        if any(  # apart from the kept boxes on some dim: their elements add up
            not set_intersection(index_set, normalize(r for box in shown for r in box[dim]))
            for dim, index_set in enumerate(dropped.box)
        ):
            opaque = max(opaque, Region(tuple(shown)).count + dropped.count)
    if spreads:
        spreads = _merged_spreads(spreads)
        opaque = max(opaque, *(spread.count for spread in spreads))
    return Region(tuple(kept[:MAX_BOXES]), opaque, spreads)


def _projection(boxes: Sequence[Box]) -> Spread:
    """The boxes dropped past :data:`MAX_BOXES` as what remains sure of them: each index of
    every box's set on a dim is some element's coordinate on it (the rows and the columns of
    a loss's picked scores)."""
    rank = len(boxes[0])
    sets = tuple(
        normalize(r for box in boxes for r in box[dim]) for dim in range(rank)
    )
    return Spread(sets, (True,) * rank)


def _merged_spreads(spreads: tuple[Spread, ...]) -> tuple[Spread, ...]:
    """Spreads of the same exact sets as one (their hit sets united: each index is still some
    element's coordinate), the :data:`MAX_SPREADS` largest kept."""
    groups: dict[tuple, Spread] = {}
    for spread in spreads:
        key = (spread.hit, *(s for s, hit in zip(*spread, strict=True) if not hit))
        other = groups.get(key)
        if other is not None:
            spread = Spread(
                tuple(
                    normalize((*mine, *theirs)) if hit else mine
                    for mine, theirs, hit in zip(spread.box, other.box, spread.hit, strict=True)
                ),
                spread.hit,
            )
        groups[key] = spread
    return tuple(sorted(groups.values(), key=lambda s: s.count, reverse=True)[:MAX_SPREADS])


def fraction_of(region: Region, total: int) -> float:
    """Share (0..1) of ``total`` elements that ``region`` demands."""
    return min(region.count / total, 1.0) if total else 0.0


# --- Where a view sits in its storage ----------------------------------------------------------


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
            points, spreads = [], []
        else:
            points, spreads = _placed_points(ref, region, layout), _diagonals(ref, region, layout)
        # view elements that repeat a storage element (overlapping windows) are at most the
        # view's elements less its distinct ones: each repeat removes at most one
        repeats = math.prod(ref.shape) - ref.elements
        return Region.of(points, region.count - repeats, spreads)
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
    return Region.of(boxes, opaque, spreads)


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
    return Region.of(boxes, region.opaque - (storage - ref.elements), spreads)


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


#: Positions enumerated at most when flattening a box that no closed form covers.
_ENUMERATION_LIMIT = 1 << 16


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
    view's strides (``x[:, :512]`` of a 1024-wide matrix → 1024-wide rows), else flat."""
    flat = Layout((max(ref.storage_elements, 1),), (1,))
    strides = sorted(
        {s for s, n in zip(ref.strides, ref.shape, strict=False) if s and n > 1}, reverse=True
    )
    if not strides or strides[-1] != 1 or ref.storage_elements % strides[0]:
        return flat
    if any(outer % inner for outer, inner in zip(strides, strides[1:], strict=False)):
        return flat
    sizes = [ref.storage_elements // strides[0]]
    sizes += [outer // inner for outer, inner in zip(strides, strides[1:], strict=False)]
    return Layout(tuple(sizes), tuple(strides))


def united_elements(refs: Sequence[TensorRef]) -> int:
    """Distinct elements of several views of one storage (two halves of a matrix: all of it;
    the same view twice: once). A lower bound where views are not index boxes."""
    distinct: dict[tuple, TensorRef] = {}
    for ref in refs:  # one view read twice: the read that touches more of it
        key = (ref.shape, ref.strides, ref.offset)
        if key not in distinct or ref.elements > distinct[key].elements:
            distinct[key] = ref
    if len(distinct) == 1:
        return next(iter(distinct.values())).elements
    storages = Storages(list(distinct.values()))
    spans = [storages.region_of(ref) for ref in distinct.values()]
    # a view that touches fewer elements than it spans (a strided downsampling, a gather's
    # source) holds them at unknown positions inside its span; all united at once (a union a
    # view at a time is quadratic in the views: a cat of many slices)
    touched = [span if ref.elements >= span.count else Region(opaque=ref.elements)
               for ref, span in zip(distinct.values(), spans, strict=True)]
    return max(min(_united(spans).count, _united(touched).count), max(r.elements for r in refs))


def _united(regions: Sequence[Region]) -> Region:
    """The union of ``regions``, built once."""
    return Region.of(
        [box for region in regions for box in region.boxes],
        max((region.opaque for region in regions), default=0),
    )
