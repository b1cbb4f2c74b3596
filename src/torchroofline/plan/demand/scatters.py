"""Demand rules of scatters: ``scatter`` (``_add``, ``_reduce``), ``index_put``, ``index_add``
(``_copy``, ``_reduce``), ``put``, ``masked_scatter``, ``index_fill`` and ``embedding_renorm_``
— the destination where no source lands, the indices that may land on a demanded output,
the sources that do."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from ...costs import (
    DESTINATION_ACCESS,
    NO_FLOPS,
    DestinationAccess,
    FlopCount,
    OpKey,
    add_rules,
    aten,
    indexed_positions,
    lookup,
    op_keys,
)
from ...trace.refs import TensorRef
from ...trace.regions import NOWHERE, IndexSet, Region, full_box, positions_to_set, set_intersection
from ._core import Demand, _broadcast, _Context, _data_chosen, _one_of, _op_set, demand_rule
from .constants import _known
from .numbered import _NUMBERED_SOURCE_LIMIT, _demanded_mask, _numbers_region


def _covered(context: _Context) -> int:
    """Most destination elements a scatter can overwrite (:func:`costs.indexed_positions`)."""
    destination, *rest = context.op.reads
    if not rest:
        return 0
    largest = max(ref.elements for ref in rest)
    return min(destination.elements, indexed_positions(context.op, largest))


#: Scatters along ``dim`` (``scatter(x, dim, index, src)``): index[q] sends src[q] to x at q
#: with ``dim`` replaced, so an output line along ``dim`` is reached from the index's same line
#: only. The other scatters may send any index element to any output (:func:`_index_demand`).
_ALONG_DIM_LINES = _op_set([aten.scatter, aten.scatter_add, aten.scatter_reduce])


@demand_rule(
    [
        aten.scatter,
        aten.scatter_add,
        aten.scatter_reduce,
        aten.index_put,
        aten._index_put_impl,
        aten._unsafe_index_put,
        aten.index_add,
        aten.index_copy,
        aten.index_reduce,
        aten.put,
        aten.masked_scatter,
        aten.index_fill,
    ]
)
def scatter_demand(context: _Context) -> Demand:
    """A scatter's output is its destination with data-chosen positions replaced: the
    destination is needed where no source lands (at least read − source elements: the kept
    end state of an input or buffer is already in memory where the scatter leaves it; all
    that later ops read where the sources add into it), every index element that may land on
    a demanded output (:func:`_index_demand`) and the source as :func:`_source_demand` says.
    With the indices known (:mod:`.given`), exactly the source and index elements that land
    on demanded outputs, and the destination less the positions they overwrite
    (:func:`_landed`; ``index_add``/``index_copy`` slice by slice: :func:`_known_sources`)."""
    destination, *rest = context.op.reads
    read = _read_region(context)
    if _accumulates(context) and context.argument("include_self", True):
        inputs = [read]  # every old element goes into its output, whatever lands on it
    else:
        inputs = [Region(opaque=max(0, read.count - _covered(context)))]
    # scatter.value and index_fill.int_Scalar write a Python number: no source tensor
    has_source = "value" not in context.op.argument_names or isinstance(
        context.argument("value"), torch.Tensor
    )
    indices = rest[:-1] if has_source else rest
    inputs += [_index_demand(context, ref) for ref in indices]
    inputs += [_source_demand(context, rest[-1])] if has_source and rest else []
    known = _known_sources(context)
    if known is not None:
        inputs[0], inputs[-1] = known
    hits = _hits(context)
    for position, region in _landed(context, hits).items():
        inputs[position] = region
    folds = _folds(context, hits)
    if known is not None and aten.index_add in op_keys(context.op):
        folds = _slice_folds(context, known[1])
    return Demand(tuple(inputs), folds)


def _slice_folds(context: _Context, landed: Region) -> FlopCount:
    """``index_add`` with known indices: one add (a multiply-add where ``alpha`` ≠ 1) per
    source element landing on a demanded output (``landed``), however few outputs that is:
    the exps of three rows added into one kept row take all their adds."""
    source = context.op.reads[-1]
    share = landed.count / source.elements if source.elements else 0.0
    return context.record.flops.scaled(share)


def _folds(context: _Context, hits: tuple[_Landing, torch.Tensor] | None) -> FlopCount:
    """The folds of an accumulating scatter along a dim its demanded outputs need: with the
    indices known (:func:`_hits`), one per (index, source) pair landing on a demanded output,
    which may be none or all of them whatever the share of outputs; k pairs on one position
    take k − 1 without ``include_self``, and a mean divides once per position a pair lands
    on. Else the share of outputs."""
    flops = context.record.flops
    if hits is None or not _accumulates(context) or not _one_of(context.op, _ALONG_DIM_LINES):
        return flops.scaled(context.fraction)
    landing, hit = hits
    pairs = int(hit.sum())
    positions = landing.targets.reshape(-1)[hit].unique().numel()
    folds = pairs if context.argument("include_self", True) else pairs - positions
    divides = positions if context.argument("reduce") == "mean" else 0
    return dataclasses.replace(flops, tensor=0, vector=folds + divides)


def _read_region(context: _Context) -> Region:
    """The demanded outputs that later ops read (:attr:`_Context.read`), united."""
    read = NOWHERE
    for region in context.read:
        read = read.union(region)
    return read


def _index_demand(context: _Context, index: TensorRef) -> Region:
    """The index (or mask) elements a scatter's demanded outputs need, whatever their values.
    Whether an output is overwritten, and by what, is known only after every index element
    that could land on it: the whole line along ``dim`` through it for a scatter along a dim
    (outputs with no position: as many whole lines), every element for the others (any may
    name any slice) — only those an adversary could point at a demanded output, which is
    all of them. A ``masked_scatter`` mask at the demanded positions (broadcast)."""
    region = context.output
    if not region:
        return NOWHERE
    out_shape = context.op.writes[0].shape
    if aten.masked_scatter in op_keys(context.op):
        return _broadcast(region, out_shape, index.shape) or Region(opaque=region.count)
    if not _one_of(context.op, _ALONG_DIM_LINES) or len(index.shape) != len(out_shape):
        return Region.of([full_box(index.shape)])
    dim = context.argument("dim") % max(1, len(out_shape))
    boxes = [
        tuple(
            (range(index.shape[d]),) if d == dim else _clipped(box[d], index.shape[d])
            for d in range(len(out_shape))
        )
        for box in region.boxes
    ]
    # c outputs with no position lie on ⌈c / line⌉ lines, which an index as wide as the
    # output along the other dims holds all of
    lines = -(-region.opaque // max(1, out_shape[dim]))
    whole = all(index.shape[d] == n for d, n in enumerate(out_shape) if d != dim)
    return Region.of(boxes, lines * index.shape[dim] if whole else 0)


def _clipped(index_set: IndexSet, size: int) -> IndexSet:
    """The positions of ``index_set`` below ``size`` (a strided range keeps its step)."""
    return set_intersection(index_set, (range(size),))


def _source_demand(context: _Context, source: TensorRef) -> Region:
    """The source elements a scatter's demanded outputs need, whatever the indices: where
    every source element goes into the output it lands on (a sum or a reduction:
    :func:`_accumulates`), each one that surely lands on a demanded output. Along ``dim`` the
    index picks only the position there, so a demanded box that covers ``dim`` whole needs
    every source element at its other coordinates — those within the index's shape for a
    scatter (src may be larger), the slices of ``index_add``'s source; with no dim
    (``index_put``, ``put``), all of them when every output is demanded. Where one of several
    landing on a position wins, or no demanded box is sure to take any, all may land
    elsewhere but one: :func:`_data_chosen`."""
    fallback = Region(opaque=_data_chosen(context.output.count))
    if not _accumulates(context):
        return fallback
    scatter = _one_of(context.op, _ALONG_DIM_LINES)
    shape = context.op.reads[0].shape
    if not (scatter or _one_of(context.op, _INDEXED_ALONG_DIM)) or len(source.shape) != len(shape):
        return Region.of([full_box(source.shape)]) if context.fraction >= 1.0 else fallback
    dim = context.argument("dim") % max(1, len(shape))
    # a scatter takes src at its index's positions (as many dims: torch checks it)
    used = context.op.reads[1].shape if scatter else source.shape
    boxes = [
        tuple((range(used[d]),) if d == dim else _clipped(index_set, used[d])
              for d, index_set in enumerate(box))
        for box in context.output.boxes
        if box[dim] == (range(shape[dim]),)
    ]
    return Region.of(boxes) if boxes else fallback


_INDEXED_ALONG_DIM = _op_set([aten.index_add, aten.index_copy, aten.index_reduce])

def _known_sources(context: _Context) -> tuple[Region, Region] | None:
    """``index_add(x, dim, index, source)`` (``index_copy``, ``index_reduce``) with known
    index values: source slice i lands on destination slice index[i], so each demanded box
    needs the source slices whose index falls in its ``dim`` positions — every token an expert
    processed, where the any-input rule charges one element. The destination, at the
    positions later ops read: all of them for a sum or a reduction into it, those no slice
    overwrites for a copy (or a reduction with ``include_self=False``); a copy with repeated
    indices is left to the any-input rule. Returns (destination, source)."""
    if not _one_of(context.op, _INDEXED_ALONG_DIM) or len(context.op.reads) != 3:
        return None
    index = _known(context, 1)
    if index is None:
        return None
    dim = context.argument("dim") % len(context.op.reads[0].shape)
    targets = index.long().reshape(-1).tolist()
    copies = aten.index_copy in op_keys(context.op)
    if copies and len(set(targets)) < len(targets):
        return None  # which of two slices copied to one place survives is unspecified
    boxes = []
    for box in context.output.boxes:
        wanted = {i for r in box[dim] for i in r}
        slices = [i for i, target in enumerate(targets) if target in wanted]
        if slices:
            boxes.append((*box[:dim], positions_to_set(slices), *box[dim + 1 :]))
    destination = _read_region(context)
    # a copy overwrites the slices it covers; so may a reduction that leaves out the old value
    if (copies or not context.argument("include_self", True)) and targets:
        shape = context.op.reads[0].shape
        covered = (*full_box(shape)[:dim], positions_to_set(targets), *full_box(shape)[dim + 1 :])
        destination = destination.minus_box(covered)
    return destination, Region.of(boxes)


@dataclass(frozen=True)
class _Landing:
    """Where a scatter with known indices writes: pair p of its (index, source) elements lands
    on destination element ``targets[p]`` (flat), and uses element ``operands[k][1][p]`` (flat)
    of read ``operands[k][0]``: its index elements, its source element (read ``source``)."""

    targets: torch.Tensor
    operands: tuple[tuple[int, torch.Tensor], ...]
    source: int | None


def _element_numbers(shape: Sequence[int]) -> torch.Tensor:
    return torch.arange(math.prod(shape)).reshape(tuple(shape))


def _scatter_landing(context: _Context, numbers: torch.Tensor) -> _Landing | None:
    """scatter(x, dim, index, src): src[p] (at index's positions p) lands on x at p with
    ``dim`` replaced by index[p]."""
    index = _known(context, 1)
    if index is None:
        return None
    index = index.long()
    targets = numbers.gather(context.argument("dim") % max(1, numbers.dim()), index)
    operands = [(1, _element_numbers(index.shape))]
    if len(context.op.reads) < 3:  # scatter.value: a scalar, no source tensor
        return _Landing(targets, tuple(operands), None)
    part = tuple(slice(0, n) for n in index.shape)
    operands.append((2, _element_numbers(context.op.reads[2].shape)[part]))
    return _Landing(targets, tuple(operands), 2)


def _put_landing(context: _Context, numbers: torch.Tensor) -> _Landing | None:
    """put(x, index, source): source[i] (flat) lands on x's flat element index[i] (negative
    indices from the end)."""
    index = _known(context, 1)
    if index is None:
        return None
    elements = _element_numbers(index.shape)
    targets = index.long() % max(1, numbers.numel())
    return _Landing(targets, ((1, elements), (2, elements)), 2)


def _masked_scatter_landing(context: _Context, numbers: torch.Tensor) -> _Landing | None:
    """masked_scatter(x, mask, source): the k-th true position of the mask (broadcast to x,
    row-major) takes source element k."""
    mask = _known(context, 1)
    if mask is None:
        return None
    targets = numbers[mask.bool().expand(numbers.shape)]
    return _Landing(targets, ((2, torch.arange(targets.numel())),), 2)


def _index_fill_landing(context: _Context, numbers: torch.Tensor) -> _Landing | None:
    """index_fill(x, dim, index, value): slice index[i] along ``dim`` is filled with the value
    (a scalar, or a 0-dim tensor: read 2)."""
    index = _known(context, 1)
    if index is None:
        return None
    dim = context.argument("dim") % max(1, numbers.dim())
    targets = numbers.index_select(dim, index.long().reshape(-1))
    along = [-1 if d == dim else 1 for d in range(targets.dim())]
    operands = [(1, torch.arange(index.numel()).reshape(along).expand(targets.shape))]
    if len(context.op.reads) > 2:
        operands.append((2, torch.zeros_like(targets)))
    return _Landing(targets, tuple(operands), None)


def _index_put_landing(context: _Context, numbers: torch.Tensor) -> _Landing | None:
    """index_put(x, indices, values): x[indices] = values, values broadcast to the indexed
    shape; each index tensor's elements placed there as advanced indexing places them."""
    tensors = [index for index in context.argument("indices") if index is not None]
    known = [_known(context, position) for position in range(1, len(tensors) + 1)]
    if any(index is None for index in known):
        return None
    filled = iter(known)
    indices = [None if index is None else next(filled) for index in context.argument("indices")]
    targets = numbers[tuple(slice(None) if index is None else index for index in indices)]
    values = len(tensors) + 1
    placed = _advanced_numbers(indices, targets.shape)
    operands = list(enumerate(placed, start=1))
    source = _element_numbers(context.op.reads[values].shape).expand(targets.shape)
    operands.append((values, source))
    return _Landing(targets, tuple(operands), values)


def _advanced_numbers(
    indices: Sequence[torch.Tensor | None], shape: Sequence[int]
) -> list[torch.Tensor]:
    """Each index tensor of ``x[indices]`` (of ``shape``), its element numbers at every
    position of the result: the index tensors broadcast together (a boolean one as its true
    elements) and their dims sit where the first indexed dim was when the indexed dims are
    adjacent, else first (NumPy's rule)."""
    forms, indexed, dim = [], [], 0
    for index in indices:
        if index is None:
            dim += 1
            continue
        elements = _element_numbers(index.shape)
        if index.dtype == torch.bool:
            forms.append(elements[index])
            indexed += range(dim, dim + index.dim())
            dim += index.dim()
        else:
            forms.append(elements)
            indexed.append(dim)
            dim += 1
    broadcast = torch.broadcast_shapes(*(form.shape for form in forms))
    adjacent = indexed == list(range(indexed[0], indexed[0] + len(indexed)))
    start = indexed[0] if adjacent else 0
    placed = [1] * start + list(broadcast) + [1] * (len(shape) - start - len(broadcast))
    return [form.expand(broadcast).reshape(placed).expand(tuple(shape)) for form in forms]


#: How each scatter with known indices lands (:func:`_landed`).
_LANDINGS: dict[OpKey, Callable[[_Context, torch.Tensor], _Landing | None]] = {}
add_rules(
    _LANDINGS, [aten.scatter, aten.scatter_add, aten.scatter_reduce], _scatter_landing, "landing"
)
add_rules(
    _LANDINGS,
    [aten.index_put, aten._index_put_impl, aten._unsafe_index_put],
    _index_put_landing,
    "landing",
)
add_rules(_LANDINGS, [aten.put], _put_landing, "landing")
add_rules(_LANDINGS, [aten.masked_scatter], _masked_scatter_landing, "landing")
add_rules(_LANDINGS, [aten.index_fill], _index_fill_landing, "landing")


def _accumulates(context: _Context) -> bool:
    """Whether every source element landing on a position goes into it (scatter_add, a
    scatter with a ``reduce``, index_put with ``accumulate``), not one of them."""
    access = lookup(DESTINATION_ACCESS, context.op)
    return (
        access is DestinationAccess.ACCUMULATED_AT_INDICES
        or context.argument("reduce") is not None
        or bool(context.argument("accumulate", False))
    )


def _hits(context: _Context) -> tuple[_Landing, torch.Tensor] | None:
    """A scatter with known indices (:data:`_LANDINGS`): where its pairs land, and which of
    them land on demanded outputs (a mask over the pairs); None for any indices."""
    rule = lookup(_LANDINGS, context.op)
    destination, *rest = context.op.reads
    size = math.prod(destination.shape)
    if rule is None or not context.output.boxes or size > _NUMBERED_SOURCE_LIMIT:
        return None
    indices = [p for p, ref in enumerate(rest, start=1) if not ref.is_float]
    if any(_known(context, position) is None for position in indices):
        return None  # the bound for any input: no destination numbered for nothing
    numbers = _element_numbers(destination.shape)
    try:
        landing = rule(context, numbers)
    except (IndexError, RuntimeError):  # an index out of range: the run would fail
        return None
    if landing is None:
        return None
    targets = landing.targets.reshape(-1)
    return landing, _demanded_mask(context.output, destination.shape).reshape(-1)[targets]


def _landed(context: _Context, hits: tuple[_Landing, torch.Tensor] | None) -> dict[int, Region]:
    """A scatter with known indices (:func:`_hits`): read position → what it needs. The
    source elements and index elements of every pair landing on a demanded output; the
    destination where later ops read it, less the positions overwritten (all of it where the
    sources accumulate into it, ``include_self`` aside). Where several sources land on one
    demanded position and one of them wins (which is unspecified), the sources landing alone
    and one per such position (:func:`_contested_sources`)."""
    if hits is None:
        return {}
    landing, hit = hits
    destination = context.op.reads[0]
    size = math.prod(destination.shape)
    targets = landing.targets.reshape(-1)
    operands = {position: elements.reshape(-1) for position, elements in landing.operands}
    accumulates = _accumulates(context)
    needed = {
        position: _numbers_region(elements[hit].unique(), context.op.reads[position].shape)
        for position, elements in operands.items()
    }
    if not accumulates and landing.source is not None:
        picked = _contested_sources(targets[hit], operands[landing.source][hit], size)
        if picked is None:
            return {}
        alone, contested = picked
        if contested:  # the sources landing alone, placed, and one per contested position
            placed = _numbers_region(alone, context.op.reads[landing.source].shape)
            needed[landing.source] = Region.of(
                placed.boxes, alone.numel() + contested, placed.spreads, placed.diagonals
            )
    read = _read_region(context)
    if accumulates and context.argument("include_self", True):
        return {**needed, 0: read}
    kept = _demanded_mask(read, destination.shape).reshape(-1)
    kept[targets] = False
    overwritten = int(torch.zeros(size, dtype=torch.bool).index_fill_(0, targets, True).sum())
    untouched = _numbers_region(kept.nonzero().reshape(-1), destination.shape)
    return {**needed, 0: untouched.union(Region.of([], read.opaque - overwritten))}


def _contested_sources(targets: torch.Tensor, sources: torch.Tensor, size: int) -> (
    tuple[torch.Tensor, int] | None
):
    """Where several distinct sources land on one demanded position of a store and one of
    them wins (which is unspecified): the sources landing alone and the count of contested
    positions, each needing one more source. None where a source also lands on another
    position (it could then serve both: the any-input rule); no contested position: (all
    sources, 0)."""
    pairs = torch.stack([targets, sources]).unique(dim=1)
    per_target = torch.bincount(pairs[0], minlength=size)
    contested = int((per_target > 1).sum())
    if contested and pairs[1].unique().numel() < pairs.shape[1]:
        return None
    return pairs[1][per_target[pairs[0]] == 1], contested


@demand_rule([aten.embedding_renorm])
def renorm_demand(context: _Context) -> Demand:
    """``embedding_renorm_`` rescales the rows its indices pick whose norm exceeds
    ``max_norm``: out[r, c] is old[r, c] times a factor of row r, so a read element needs its
    own old element (and, if renormed, its row — data), and every index, since any may pick
    its row. Which rows change is data; none may, so a kept weight nobody reads needs only the
    indices and one picked row — enough to find out."""
    weight, indices = context.op.reads[:2]
    read = _read_region(context)
    picked = read if read else Region(opaque=_data_chosen(indices.elements) * weight.shape[-1])
    rest = tuple(NOWHERE for _ in context.op.reads[2:])
    return Demand((picked, Region.of([full_box(indices.shape)]), *rest), NO_FLOPS)
