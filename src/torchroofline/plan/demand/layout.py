"""Demand rules of data movement: concatenation, flips, rolls, repeats, pads, triangles and
diagonals."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence

from ...costs import (
    NO_FLOPS,
    aten,
)
from ...trace.regions import (
    MAX_BOXES,
    NOWHERE,
    Box,
    Diagonal,
    IndexSet,
    Region,
    Spread,
    full_box,
    make_diagonal,
    mapped_set,
    normalize,
    positions_to_set,
    set_intersection,
    set_size,
)
from ._core import Demand, _Context, _one_of, _op_set, _proportional, demand_rule
from .constants import TRIANGLE_BANDS
from .numbered import _NUMBERED_SOURCE_LIMIT, _demanded_mask, _numbers_region
from .structures import _block_diagonal, _boxed_vector, _built_offset, _MatrixView, _Walk


def _opaque_in_part(region: Region, out_shape: Sequence[int], dim: int, size: int) -> int:
    """Of ``region.opaque`` demanded outputs with no position, how many must lie in the part
    that holds ``size`` of the output's ``dim`` (each a distinct element of that part): only
    those that cannot all lie in the other parts."""
    total = math.prod(out_shape)
    part = total // max(out_shape[dim], 1) * size if out_shape else total
    return max(0, region.opaque - (total - part))


@demand_rule([aten.cat])
def cat_demand(context: _Context) -> Demand:
    """Each part of a concatenation needs only the slice of the output it lands in."""
    out_shape = context.op.writes[0].shape
    region = context.output
    rank = len(out_shape)
    dim = context.argument("dim", 0) % rank if rank else 0
    inputs, offset = [], 0
    for ref in context.op.reads:
        if len(ref.shape) != rank:  # legacy empty 1-D inputs are skipped by cat
            inputs.append(NOWHERE)
            continue
        size = ref.shape[dim]
        part = (range(offset, offset + size),)
        boxes = []
        for box in region.boxes:
            hit = set_intersection(box[dim], part)
            if hit:
                boxes.append((*box[:dim], mapped_set(hit, -offset), *box[dim + 1 :]))
        inputs.append(Region.of(boxes, _opaque_in_part(region, out_shape, dim, size)))
        offset += size
    return Demand(tuple(inputs), NO_FLOPS)


def _per_dim(
    context: _Context,
    positions: Callable[[int, IndexSet], IndexSet],
    *,
    most_reads: int | None = None,
) -> Demand:
    """Data movement where each output dim reads the same dim of the input: ``positions(dim,
    demanded)`` gives the input positions along ``dim`` that demanded output positions read.
    Output dims the input lacks (leading dims of ``repeat``) read no dim of their own. c outputs
    with no position read at least c·(input size / output size) elements when every input
    element feeds the same number of outputs, else c / ``most_reads`` (the most outputs one
    input element feeds: a pad's edge feeds more than its middle). The whole output reads the
    whole input (every input element lands somewhere)."""
    source = context.op.reads[0]
    rank, out_shape = len(source.shape), context.op.writes[0].shape
    region = context.output
    lead = len(out_shape) - rank
    rest = tuple(NOWHERE for _ in context.op.reads[1:])
    if region and region.count >= math.prod(out_shape):
        return Demand((Region.of([full_box(source.shape)]), *rest), NO_FLOPS)
    if lead < 0 or any(len(box) != len(out_shape) for box in region.boxes):
        return _proportional(context)
    boxes = [
        tuple(normalize(positions(d, box[lead + d])) for d in range(rank)) for box in region.boxes
    ]
    if most_reads is None:
        opaque = -(-region.opaque * source.elements // max(math.prod(out_shape), 1))
    else:
        opaque = -(-region.opaque // most_reads)
    return Demand((Region.of(boxes, opaque), *rest), NO_FLOPS)


def _reversed(index_set: IndexSet, size: int) -> IndexSet:
    return tuple(range(size - 1 - r[-1], size - r.start, r.step) for r in index_set if r)


@demand_rule([aten.flip])
def flip_demand(context: _Context) -> Demand:
    """``flip``: output position p of a flipped dim of size n reads input position n − 1 − p."""
    shape = context.op.reads[0].shape
    flipped = {d % len(shape) for d in context.argument("dims", ())} if shape else set()
    demand = _per_dim(
        context, lambda d, s: _reversed(s, shape[d]) if d in flipped else s
    )
    flips = [_flipped_diagonal(kept, shape, flipped) for kept in context.output.diagonals]
    if not flips or len(context.op.writes[0].shape) != len(shape):
        return demand
    source, *rest = demand.inputs
    along = Region.of([], 0, (), [each for each in flips if isinstance(each, Diagonal)])
    return dataclasses.replace(demand, inputs=(source.union(along), *rest))


def _flipped_diagonal(
    kept: Diagonal, shape: Sequence[int], flipped: set[int]
) -> Diagonal | Box | None:
    """A demanded output diagonal of a flip in the input's coordinates: position p of a
    flipped dim of size n is n − 1 − p there (a diagonal of a flipped matrix is its
    anti-diagonal)."""
    sets = [_reversed(s, shape[d]) if d in flipped else s for d, s in enumerate(kept.box)]
    origin = [
        shape[d] - 1 - o if d in flipped else o
        for d, o in zip(kept.dims, kept.origin, strict=True)
    ]
    step = [-s if d in flipped else s for d, s in zip(kept.dims, kept.step, strict=True)]
    return make_diagonal(sets, kept.dims, origin, step, kept.length)


def _rolled(index_set: IndexSet, size: int, shift: int) -> IndexSet:
    """Positions p − shift (mod size): the part at or past the shift moves down, the rest wraps
    around to the end."""
    shift %= size
    moved = mapped_set(set_intersection(index_set, (range(shift, size),)), -shift)
    wrapped = mapped_set(set_intersection(index_set, (range(shift),)), size - shift)
    return (*moved, *wrapped)


@demand_rule([aten.roll])
def roll_demand(context: _Context) -> Demand:
    """``roll``: output position p of a rolled dim reads input position (p − shift) mod n; a
    roll with no dims rolls the flattened tensor (:func:`_flat_roll`)."""
    shape = context.op.reads[0].shape
    shifts, dims = list(context.argument("shifts", ())), list(context.argument("dims", ()))
    if not dims and len(shifts) == 1:
        return _flat_roll(context, shifts[0])
    if len(dims) != len(shifts):
        return _proportional(context)
    by_dim: dict[int, int] = {}
    for dim, shift in zip(dims, shifts, strict=True):
        by_dim[dim % len(shape)] = by_dim.get(dim % len(shape), 0) + shift
    return _per_dim(
        context, lambda d, s: _rolled(s, shape[d], by_dim[d]) if by_dim.get(d) else s
    )


def _flat_roll(context: _Context, shift: int) -> Demand:
    """A roll of the flattened tensor: flat output p copies flat input (p − shift) mod n, a
    permutation. The demanded boxes rolled back element by element (up to
    :data:`_NUMBERED_SOURCE_LIMIT` elements), and as many inputs as the demanded outputs
    (those with no position: unplaced)."""
    shape = context.op.reads[0].shape
    region = context.output
    if region.count >= math.prod(shape):
        return Demand((Region.of([full_box(shape)]),), NO_FLOPS)
    if math.prod(shape) > _NUMBERED_SOURCE_LIMIT:
        return Demand((Region(opaque=region.count),), NO_FLOPS)
    read = _demanded_mask(region, shape).reshape(-1).roll(-shift).nonzero().reshape(-1)
    placed = _numbers_region(read, shape)
    return Demand((Region.of(placed.boxes, max(region.count, placed.count), placed.spreads,
                             placed.diagonals),), NO_FLOPS)


def _residues(index_set: IndexSet, size: int) -> IndexSet:
    """Positions p mod ``size``: a range of step s long enough to go round covers every residue
    of its start modulo gcd(s, size); a shorter one is enumerated."""
    parts: list[range] = []
    for r in index_set:
        common = math.gcd(r.step, size)
        if len(r) >= size // common:
            parts.append(range(r.start % common, size, common))
        else:
            parts.extend(positions_to_set(p % size for p in r))
    return tuple(parts)


@demand_rule([aten.repeat])
def repeat_demand(context: _Context) -> Demand:
    """``repeat``: output position p of a dim of input size n reads input position p mod n;
    leading dims it adds read every input element once more."""
    shape = context.op.reads[0].shape
    return _per_dim(context, lambda d, s: _residues(s, shape[d]))


@demand_rule([aten.stack])
def stack_demand(context: _Context) -> Demand:
    """``stack``: part k is output index k along the new dim; it needs the demanded elements
    there, that dim dropped."""
    out_shape = context.op.writes[0].shape
    dim = context.argument("dim", 0) % len(out_shape)
    region = context.output
    parts = context.op.reads
    opaque = _opaque_in_part(region, out_shape, dim, 1)
    inputs = []
    for part in range(len(parts)):
        boxes = [
            (*box[:dim], *box[dim + 1 :])
            for box in region.boxes
            if set_intersection(box[dim], (range(part, part + 1),))
        ]
        inputs.append(Region.of(boxes, opaque))
    return Demand(tuple(inputs), NO_FLOPS)


@demand_rule([aten.constant_pad_nd])
def pad_demand(context: _Context) -> Demand:
    """Padding (or cropping, with negative pads) shifts each dim; padded elements need nothing."""
    source = context.op.reads[0]
    pads = list(context.argument("pad", []))
    rank = len(source.shape)
    shifts = [0] * rank
    for index in range(0, len(pads), 2):
        shifts[rank - 1 - index // 2] = pads[index]
    boxes = []
    for box in context.output.boxes:
        sets = []
        for dim, index_set in enumerate(box):
            inside = set_intersection(
                index_set, (range(shifts[dim], shifts[dim] + source.shape[dim]),)
            )
            sets.append(mapped_set(inside, -shifts[dim]))
        if all(sets):
            boxes.append(tuple(sets))
    return Demand((Region.of(boxes),), NO_FLOPS)


@demand_rule([aten.tril, aten.triu])
def triangle_demand(context: _Context) -> Demand:
    """``tril``/``triu`` keep one triangle of the last two dims; the rest needs no input."""
    source = context.op.reads[0]
    if len(source.shape) < 2:
        return _proportional(context)
    diagonal = context.argument("diagonal", 0)
    lower = _one_of(context.op, _op_set([aten.tril]))
    boxes = []
    for box in context.output.boxes:
        rows = [i for r in box[-2] for i in r]
        band = max(1, -(-len(rows) // TRIANGLE_BANDS))
        for start in range(0, len(rows), band):
            chunk = rows[start : start + band]
            if lower:
                keep = (range(0, max(chunk[0] + diagonal + 1, 0)),)
            else:
                keep = (range(max(chunk[-1] + diagonal, 0), source.shape[-1]),)
            columns = set_intersection(box[-1], keep)
            if columns:
                boxes.append((*box[:-2], positions_to_set(chunk), columns))
    return Demand((Region.of(boxes),), NO_FLOPS)


@demand_rule([aten.diag_embed, aten.diag, aten.diagflat, aten.diagonal_copy])
def diagonal_demand(context: _Context) -> Demand:
    """Building a diagonal matrix from a vector (any offset, a batch of vectors) needs the vector
    entries on demanded diagonal positions, and nothing for the zeros; extracting a diagonal
    needs the element each demanded output copies."""
    region = context.output
    offset = _built_offset(context.op)
    if offset is None:
        return Demand((_extracted_diagonal(context),), NO_FLOPS)
    # builder element (r, c) holds v[min(r, c)] where c − r = offset: the demanded columns
    # c of some demanded row c − offset, and the vector index c − max(offset, 0)
    columns = [set_intersection(mapped_set(box[-2], offset), box[-1]) for box in region.boxes]
    if _boxed_vector(context.op) is None:
        return Demand((Region(opaque=sum(map(set_size, columns))),), NO_FLOPS)
    boxes = [
        (*box[:-2], mapped_set(hit, -max(offset, 0)))
        for box, hit in zip(region.boxes, columns, strict=True)
        if hit
    ]
    return Demand((Region.of(boxes),), NO_FLOPS)


def _extracted_diagonal(context: _Context) -> Region:
    """The source elements a diagonal extraction's demanded outputs copy: output (…, i) is
    source element i + max(−offset, 0) along ``dim1`` and i + max(offset, 0) along ``dim2``,
    the other dims in order — one box per diagonal position (a diagonal is no box), exact up
    when there are at most :data:`MAX_BOXES` of them; past it, as diagonals (each row with
    its column: :class:`Diagonal`) and spreads of the rows and columns."""
    source = context.op.reads[0].shape
    region = context.output
    if len(source) < 2 or any(len(box) != len(source) - 1 for box in region.boxes):
        return Region(opaque=min(region.count, math.prod(source)))
    offset = context.argument("offset", context.argument("diagonal", 0))
    dims = (context.argument("dim1", 0) % len(source), context.argument("dim2", 1) % len(source))
    others = [d for d in range(len(source)) if d not in dims]
    shifts = (max(-offset, 0), max(offset, 0))
    if sum(set_size(box[-1]) for box in region.boxes) > MAX_BOXES:
        diagonals = []
        for box in region.boxes:
            exact: list[IndexSet] = [()] * len(source)
            for d, index_set in zip(others, box[:-1], strict=True):
                exact[d] = index_set
            for walk in box[-1]:
                along = make_diagonal(exact, dims, [walk.start + shift for shift in shifts],
                                      [walk.step] * 2, len(walk))
                if isinstance(along, Diagonal):
                    diagonals.append(along)
        spreads = _diagonal_spreads(region, len(source), dims, offset)
        return Region.of([], region.count, spreads, diagonals)
    boxes: list[Box] = []
    for box in region.boxes:
        for i in (i for r in box[-1] for i in r):
            placed: list[IndexSet] = [()] * len(source)
            for d, index_set in zip(others, box[:-1], strict=True):
                placed[d] = index_set
            placed[dims[0]] = (range(i + max(-offset, 0), i + max(-offset, 0) + 1),)
            placed[dims[1]] = (range(i + max(offset, 0), i + max(offset, 0) + 1),)
            boxes.append(tuple(placed))
    return Region.of(boxes, region.opaque)


def _diagonal_spreads(
    region: Region, rank: int, dims: tuple[int, int], offset: int
) -> list[Spread]:
    """A diagonal extraction's demanded boxes as spreads of its source: the other dims exact,
    ``dims`` hit at the rows and columns the diagonal positions reach (:class:`Spread`)."""
    spreads = []
    for box in region.boxes:
        sets: list[IndexSet] = list(box[:-1])
        for dim, shift in sorted(zip(dims, (max(-offset, 0), max(offset, 0)), strict=True)):
            sets.insert(dim, mapped_set(box[-1], shift))
        spreads.append(Spread(tuple(sets), tuple(d in dims for d in range(rank))))
    return spreads


@demand_rule([aten.trace])
def trace_demand(context: _Context) -> Demand:
    """The sum of a matrix's main diagonal needs exactly that diagonal: its elements placed
    one by one up to :data:`MAX_BOXES`, else as a spread of its rows and columns."""
    rows, columns = context.op.reads[0].shape
    length = min(rows, columns)
    if length > MAX_BOXES:
        diagonal = Spread(((range(length),), (range(length),)), (True, True))
        return Demand((Region.of([], length, [diagonal]),), context.record.flops)
    boxes = [((range(i, i + 1),), (range(i, i + 1),)) for i in range(length)]
    return Demand((Region.of(boxes),), context.record.flops)


@demand_rule([aten.block_diag])
def block_diagonal_demand(context: _Context) -> Demand:
    """Each block of ``block_diag`` needs the demanded elements that fall in it; the zeros
    around the blocks need nothing."""
    rows, columns = context.op.writes[0].shape
    whole = _MatrixView(_Walk(0, 0, 1, rows), _Walk(1, 0, 1, columns), 0)
    boxes: list[list[Box]] = [[] for _ in context.op.reads]
    for block in _block_diagonal(whole, context.op.reads).blocks:
        for box in context.output.boxes:
            hits = set_intersection(box[0], block.free)
            used = set_intersection(box[1], block.contracted)
            if hits and used:
                boxes[block.position].append(block.source_box(hits, used))
    return Demand(tuple(Region.of(b) for b in boxes), NO_FLOPS)
