"""Sets of tensor elements for the demand analysis: index boxes with strides, and their unions.

A :data:`Box` holds, per dimension, a sorted tuple of disjoint Python ``range`` objects (so a
strided slice, a conv's strided window positions or a crop are exact). A :class:`Region` is a
union of boxes plus an ``opaque`` count: elements known to be needed but with no known position
(a gather's rows), some of them known dim by dim (a :class:`Spread`: a diagonal's rows and
columns). Every operation here *under*-approximates where it cannot be exact: the demand
analysis feeds a lower bound, which may be loose but never too high. Where a view sits in its
storage is :mod:`.storages`.
"""

from __future__ import annotations

import functools
import itertools
import math
from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import NamedTuple

IndexSet = tuple[range, ...]
Box = tuple[IndexSet, ...]

#: Boxes kept per region; beyond it the smallest are dropped (an under-approximation).
MAX_BOXES = 96

#: Positions enumerated at most where no closed form covers a set (a box flattened over
#: merged dims, a strided view's overlapping offsets).
_ENUMERATION_LIMIT = 1 << 16


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
    count = len(ordered)
    runs: list[range] = []
    index = 0
    while index < count:
        start, end, step = ordered[index], index, 1
        if index + 1 < count:
            step = ordered[index + 1] - start
            end = _run_end(ordered, index, step)
            if end == index + 1 and step > 1:
                end, step = index, 1
        runs.append(range(start, ordered[end] + 1, step))
        index = end + 1
    return tuple(runs)


def _run_end(ordered: list[int], index: int, step: int) -> int:
    """The last position of the run of ``step`` from ``ordered[index]`` (sorted, distinct). A
    run of step 1 is found by bisection, not element by element (a kept row of a causal mask
    is one run of thousands): ``ordered[j] - j`` never decreases, and stays
    ``ordered[index] - index`` exactly while the positions from ``index`` to ``j`` are
    consecutive."""
    if step == 1:
        offset = ordered[index] - index
        return bisect_right(range(len(ordered)), offset, lo=index,
                            key=lambda j: ordered[j] - j) - 1
    end = index + 1
    while end + 1 < len(ordered) and ordered[end + 1] - ordered[end] == step:
        end += 1
    return end


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
    # dims of one range on both sides first, met directly (most dims of most boxes), the last
    # dims first (a causal mask's bands are apart in their rows, and a region's count meets
    # every pair of them; leading batch and head dims are mostly whole); then the others,
    # fewest ranges first: boxes apart in one column miss at once
    sets: list[IndexSet | None] = [None] * len(first)
    for dim in range(len(first) - 1, -1, -1):
        mine, theirs = first[dim], second[dim]
        if len(mine) == 1 and len(theirs) == 1:
            both = range_intersection(mine[0], theirs[0])
            if not both:
                return None
            sets[dim] = (both,)
    if None in sets:
        order = sorted((dim for dim, met in enumerate(sets) if met is None),
                       key=lambda dim: len(first[dim]) * len(second[dim]))
        for dim in order:
            both = set_intersection(first[dim], second[dim])
            if not both:
                return None
            sets[dim] = both
    return tuple(sets)


def _bounds(box: Box) -> tuple[tuple[int, int], ...]:
    """Each dim's least and greatest index of ``box`` (a box of no element: empty bounds)."""
    return tuple(_set_bounds(index_set) for index_set in box)


def _set_bounds(index_set: IndexSet) -> tuple[int, int]:
    if len(index_set) == 1 and index_set[0]:  # most sets: one range, its ends directly
        return index_set[0].start, index_set[0][-1]
    return (min((r.start for r in index_set if r), default=0),
            max((r[-1] for r in index_set if r), default=-1))


def _within(inner: tuple[tuple[int, int], ...], outer: tuple[tuple[int, int], ...]) -> bool:
    """Whether bounds ``inner`` lie within ``outer`` on every dim: a box can contain another
    only then."""
    return all(o_low <= i_low and i_high <= o_high
               for (i_low, i_high), (o_low, o_high) in zip(inner, outer, strict=True))


def _meeting_pairs(boxes: Sequence[Box]) -> Iterator[tuple[Box, Box]]:
    """The pairs of ``boxes`` (each once) whose bounds meet on every dim: two boxes apart on
    some dim share no element, so the others need no :func:`box_intersection`. A sweep along
    the second-to-last dim (a causal mask's bands lie one under the other) or the only one."""
    if len(boxes) < 2 or not boxes[0]:  # boxes of no dim all meet
        yield from itertools.combinations(boxes, 2)
        return
    bounds = [_bounds(box) for box in boxes]
    dim = max(len(boxes[0]) - 2, 0)
    order = sorted(range(len(boxes)), key=lambda i: bounds[i][dim][0])
    for position, i in enumerate(order):
        high = bounds[i][dim][1]
        for j in order[position + 1 :]:
            if bounds[j][dim][0] > high:
                break
            if all(a_low <= b_high and b_low <= a_high
                   for (a_low, a_high), (b_low, b_high) in zip(bounds[i], bounds[j],
                                                               strict=True)):
                yield boxes[i], boxes[j]


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


#: Positions two index sets may hold together to be united position by position (~0.1 s at
#: the limit). Past it :func:`normalize` merges their ranges, which is quadratic in the ranges:
#: the rows routed to 64 experts of 4,096 tokens, ~800 scattered ranges, took 5–9 s a union.
_UNION_POSITIONS = 1 << 16


def _union_set(first: IndexSet, second: IndexSet) -> IndexSet | None:
    """The union of two index sets, exactly, or None where it has no exact form here."""
    both = set_size(set_intersection(first, second))
    if both == set_size(second):  # a union growing one gather's picks at a time, mostly
        return first
    if both == set_size(first):
        return second
    if all(r.step == 1 for r in itertools.chain(first, second)):
        return _interval_union((*first, *second))
    if set_size(first) + set_size(second) <= _UNION_POSITIONS:  # as its runs, whatever the ranges
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


class Diagonal(NamedTuple):
    """Elements along a line, row paired with column (a diagonal of any offset or stride, an
    anti-diagonal): on the dims ``dims``, element i (0 ≤ i < ``length``) sits at
    ``origin[k] + i·step[k]``; the other dims are exact, every index of ``box``'s set
    (``box`` holds on ``dims`` the positions the line passes, so it bounds it). Steps are
    nonzero, the first positive (:func:`make_diagonal`), so equal lines are equal tuples."""

    box: Box
    dims: tuple[int, ...]
    origin: tuple[int, ...]
    step: tuple[int, ...]
    length: int

    @property
    def count(self) -> int:
        """Elements: the line's points times every combination of the exact dims."""
        exact = math.prod(set_size(s) for d, s in enumerate(self.box) if d not in self.dims)
        return exact * self.length

    @property
    def family(self) -> tuple:
        """What lines share to be parallel and of one class: their union along it is a union
        of intervals of i (:func:`diagonals_count`)."""
        shift = self.origin[0] // self.step[0]  # the class's origin with its first in [0, step)
        anchor = tuple(o - shift * s for o, s in zip(self.origin, self.step, strict=True))
        exact = tuple(s for d, s in enumerate(self.box) if d not in self.dims)
        return self.dims, self.step, anchor, exact

    def walk(self, k: int) -> range:
        """The positions on ``dims[k]`` of the points in order."""
        first, step = self.origin[k], self.step[k]
        return range(first, first + step * self.length, step)

    @property
    def interval(self) -> range:
        """The line's positions i along its class (:attr:`family`)."""
        shift = self.origin[0] // self.step[0]
        return range(shift, shift + self.length)


def make_diagonal(
    exact: Sequence[IndexSet], dims: Sequence[int], origin: Sequence[int], step: Sequence[int],
    length: int,
) -> Diagonal | Box | None:
    """The :class:`Diagonal` of ``length`` points ``origin + i·step`` on ``dims`` (``exact``: every
    dim's set, those of ``dims`` ignored) in normal form; a box where it is one (a single
    point, dims that do not move), None where it is empty."""
    if length < 1 or not all(exact[d] for d in range(len(exact)) if d not in dims):
        return None
    moving = [k for k, s in enumerate(step) if s and length > 1]
    sets = [tuple(s) for s in exact]
    for k, dim in enumerate(dims):
        first, last = origin[k], origin[k] + (length - 1) * step[k]
        sets[dim] = (range(min(first, last), max(first, last) + 1, abs(step[k]) or 1),)
    if len(moving) < 2:  # one dim moves or none: a box
        return tuple(sets)
    moving.sort(key=lambda k: dims[k])
    if step[moving[0]] < 0:  # walked from its other end
        origin = [o + (length - 1) * s for o, s in zip(origin, step, strict=True)]
        step = [-s for s in step]
    return Diagonal(
        tuple(sets), tuple(dims[k] for k in moving), tuple(origin[k] for k in moving),
        tuple(step[k] for k in moving), length,
    )


def diagonals_count(lines: Sequence[Diagonal]) -> int:
    """Distinct elements of ``lines``, at least: exact among parallel lines through the same
    exact sets (each class's intervals united; two classes share no element), the largest
    such group's where there are several."""
    classes: dict[tuple, list[range]] = {}
    for each in lines:
        classes.setdefault(each.family, []).append(each.interval)
    groups: dict[tuple, int] = {}
    for (dims, step, _, exact), intervals in classes.items():
        points = sum(map(len, _interval_union(intervals)))
        key = (dims, step, exact)
        groups[key] = groups.get(key, 0) + points * math.prod(set_size(s) for s in exact)
    return max(groups.values(), default=0)


def _merged_diagonals(lines: tuple[Diagonal, ...]) -> tuple[Diagonal, ...]:
    """``lines`` with the overlapping or touching ones of each family united, the
    :data:`MAX_DIAGONALS` largest kept."""
    families: dict[tuple, list[Diagonal]] = {}
    for each in lines:
        families.setdefault(each.family, []).append(each)
    united: dict[tuple, list[Box]] = {}  # lines on the same points: their exact sets united
    for (dims, step, anchor, _), members in families.items():
        template = members[0]
        for interval in _interval_union(m.interval for m in members):
            origin = [a + interval.start * s for a, s in zip(anchor, step, strict=True)]
            placed = make_diagonal(template.box, dims, origin, step, len(interval))
            united.setdefault(placed[1:], []).append(placed.box)
    merged = [
        Diagonal(box, *points)
        for points, boxes in united.items()
        for box in (_coalesced(boxes) if len(boxes) > 1 else boxes)
    ]
    return tuple(sorted(merged, key=lambda m: m.count, reverse=True)[:MAX_DIAGONALS])


def diagonals_through(
    points: Sequence[tuple[int, ...]],
) -> tuple[list[Box], list[Diagonal]] | None:
    """Sorted distinct points as boxes and diagonals: maximal runs of a common step, taken in
    order (each channel's diagonal one run, the channels' runs then one diagonal through all
    of them, :func:`_merged_diagonals`); None past 4·:data:`MAX_DIAGONALS` runs."""
    lines: list[Diagonal] = []
    boxes: list[Box] = []
    start = 0
    while start < len(points):
        end, step = start, (0,) * len(points[start])
        if start + 1 < len(points):
            step = tuple(b - a for a, b in zip(points[start], points[start + 1], strict=True))
            end = start + 1
            while end + 1 < len(points) and all(
                b - a == s for a, b, s in zip(points[end], points[end + 1], step, strict=True)
            ):
                end += 1
        exact = [(range(p, p + 1),) for p in points[start]]
        run = make_diagonal(exact, range(len(exact)), points[start], step, end - start + 1)
        (lines if isinstance(run, Diagonal) else boxes).append(run)
        if len(lines) + len(boxes) > 4 * MAX_DIAGONALS:
            return None
        start = end + 1
    return boxes, lines


#: Diagonals kept per region; beyond it the smallest are dropped (an under-approximation).
MAX_DIAGONALS = 32


@dataclass(frozen=True)
class Region:
    """A union of boxes plus ``opaque`` elements of unknown position, some of them known dim by
    dim (``spreads``: :class:`Spread`) or placed exactly, row with column (``diagonals``:
    :class:`Diagonal`, one past :data:`MAX_BOXES` elements), each counted in ``opaque``;
    :attr:`count` is a lower bound on the distinct elements (never more than the truth). A
    rule that knows no diagonals may drop them: their elements stay counted."""

    boxes: tuple[Box, ...] = ()
    opaque: int = 0
    spreads: tuple[Spread, ...] = ()
    diagonals: tuple[Diagonal, ...] = ()

    @staticmethod
    def of(
        boxes: Iterable[Box], opaque: int = 0, spreads: Iterable[Spread] = (),
        diagonals: Iterable[Diagonal] = (),
    ) -> Region:
        """The union of ``boxes`` (contained ones dropped, neighbours merged; past
        :data:`MAX_BOXES`, the rest kept as one spread of their rows and columns), ``opaque``
        elements (clamped at 0), ``spreads`` and ``diagonals``."""
        return _region_of(tuple(boxes), max(0, int(opaque)), tuple(spreads), tuple(diagonals))

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
        for first, second in _meeting_pairs(self.boxes):
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
            cached = self.__dict__["_hash"] = hash(
                (self.boxes, self.opaque, self.spreads, self.diagonals)
            )
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
            and self.diagonals == other.diagonals
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
            (*self.diagonals, *other.diagonals),
        )

    def intersect_box(self, box: Box, box_share: int, total: int) -> Region:
        """The part inside ``box`` (``box_share`` of ``total`` elements): opaque elements are
        counted there only as far as they cannot all lie outside, spreads kept where they lie
        wholly inside."""
        inside = [both for b in self.boxes if (both := box_intersection(b, box)) is not None]
        spreads = [s for s in self.spreads if _contains(box, s.box)]
        lines = [each for each in self.diagonals if _contains(box, each.box)]
        return Region.of(inside, self.opaque - (total - box_share), spreads, lines)

    def minus_box(self, box: Box) -> Region:
        outside = [piece for b in self.boxes for piece in box_difference(b, box)]
        spreads = [s for s in self.spreads if box_intersection(s.box, box) is None]
        lines = [each for each in self.diagonals if box_intersection(each.box, box) is None]
        return Region.of(outside, self.opaque - box_size(box), spreads, lines)


#: The empty region, shared (regions are immutable)
NOWHERE = Region()


@functools.lru_cache(maxsize=4096)  # a program's repeated layers unite the same boxes again
def _region_of(
    boxes: tuple[Box, ...], opaque: int, spreads: tuple[Spread, ...],
    diagonals: tuple[Diagonal, ...],
) -> Region:
    """:meth:`Region.of` of a tuple of boxes, a clamped opaque count, spreads and diagonals."""
    if diagonals:
        diagonals = _merged_diagonals(diagonals)
        opaque = max(opaque, diagonals_count(diagonals))
    spreads = tuple(s for s in spreads if all(s.box))
    if spreads:  # a spread exact in all dims but one is a box (:class:`Spread`)
        boxes += tuple(s.box for s in spreads if sum(s.hit) <= 1)
        spreads = tuple(s for s in spreads if sum(s.hit) > 1)
    sized = [(size, box) for box in boxes if (size := box_size(box))]
    if len(sized) > MAX_BOXES:  # (many slices) merged first: the containment test is pairwise
        sized = [(box_size(box), box) for box in _coalesced([box for _, box in sized])]
    sized.sort(key=lambda pair: pair[0], reverse=True)
    kept: list[Box] = []
    kept_bounds: list[tuple[tuple[int, int], ...]] = []
    # only a kept box whose rows (second-to-last dim) start at or before a box's can contain
    # it: the kept ones are looked up by their first row (a causal mask's bands, largest
    # first, each starting above every kept one, meet none), the rest tested in full
    rows = max(len(sized[0][1]) - 2, 0) if sized and sized[0][1] else None
    first_rows: list[int] = []  # of the kept boxes, ascending
    by_first_row: list[int] = []  # their indices in ``kept``, in that order
    for _, box in sized:
        bounds = _bounds(box)
        low = bounds[rows][0] if rows is not None else 0
        candidates = by_first_row[: bisect_right(first_rows, low)]
        if not any(_within(bounds, kept_bounds[index]) and _contains(kept[index], box)
                   for index in candidates):
            position = bisect_right(first_rows, low)
            first_rows.insert(position, low)
            by_first_row.insert(position, len(kept))
            kept.append(box)
            kept_bounds.append(bounds)
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
    return Region(tuple(kept[:MAX_BOXES]), opaque, spreads, diagonals)


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
