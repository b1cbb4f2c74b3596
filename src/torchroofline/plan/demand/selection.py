"""Demand rules of selections by data: masks (``masked_fill``, ``where``), gathers,
scatters and losses that pick one score per target."""

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
from ...trace.refs import TensorRef, TracedOp
from ...trace.regions import (
    NOWHERE,
    IndexSet,
    Region,
    full_box,
    positions_to_set,
    set_intersection,
    set_size,
)
from ._core import (
    Demand,
    _broadcast,
    _Context,
    _one_of,
    _op_set,
    _proportional,
    demand_rule,
)
from .constants import _known, _region_where, _unexpanded
from .distinct import distinct_picks, index_lines
from .numbered import (
    _NUMBERED_SOURCE_LIMIT,
    _box_index,
    _demanded_mask,
    _numbers_region,
)


@demand_rule([aten.nll_loss_forward, aten.nll_loss, aten.nll_loss2d_forward])
def nll_loss_demand(context: _Context) -> Demand:
    """Negative log-likelihood picks one score per target: each target a demanded output reads
    (all of them for a mean or sum, those of the kept outputs for ``reduction='none'``), and one
    class position in its row. Which class is data; the bound places it at class 0, so a
    softmax before it is charged each picked row in full (cross-entropy reads all its logits).
    With the targets known (:mod:`.given`), the class is the target's, a target equal to
    ``ignore_index`` picks no score, and the class weights are read at the picked classes."""
    scores, target, *rest = context.op.reads
    if not context.fraction:
        return Demand(tuple(NOWHERE for _ in context.op.reads), NO_FLOPS)
    class_dim = 1 if len(scores.shape) > 1 else 0
    # a kept total_weight (nll_loss_forward's second output) sums the weights of every target
    per_target = context.argument("reduction", 1) == 0 and not any(context.outputs[1:])
    targets = context.outputs[0] if per_target else Region.of([full_box(target.shape)])
    values = _known(context, 1)
    if values is None:
        picked = {0: targets}
        weights = Region(opaque=_data_chosen(targets.count))
    else:
        picked = _known_targets(context, targets, values.long())
        weights = Region.of([(positions_to_set(picked),)] if picked else [])
    boxes = [
        (*box[:class_dim], (range(c, c + 1),), *box[class_dim:])
        for c, region in picked.items()
        for box in region.boxes
    ]
    opaque = sum(region.opaque for region in picked.values())
    inputs = (Region.of(boxes, opaque), targets, *(weights for _ in rest))
    return Demand(inputs, context.record.flops.scaled(context.fraction))


def _known_targets(
    context: _Context, targets: Region, values: torch.Tensor
) -> dict[int, Region]:
    """Class → the demanded target positions holding it (``ignore_index`` left out)."""
    demanded = _demanded_mask(targets, tuple(values.shape)) & (
        values != context.argument("ignore_index", -100)
    )
    return {
        c: _numbers_region(
            (demanded & (values == c)).reshape(-1).nonzero().reshape(-1), tuple(values.shape)
        )
        for c in values[demanded].unique().tolist()
    }


def _data_chosen_write(op: TracedOp) -> bool:
    """Whether ``op`` writes positions chosen by index or mask values (in place, only those
    change): :data:`costs.DESTINATION_ACCESS` declares it."""
    access = lookup(DESTINATION_ACCESS, op)
    return access is not None and access.data_chosen


#: The argument a selection takes where its mask holds, and where it does not.
_PICKED = {"masked_fill": ("value", "self"), "where": ("self", "other")}


@demand_rule([aten.masked_fill, aten.where])
def selection_demand(context: _Context) -> Demand:
    """``masked_fill(x, mask, v)`` and ``where(mask, a, b)`` pick each element by the mask. A
    mask known from shapes and constants (a causal ``tril(ones)`` mask built in ``forward``:
    :func:`known_values`) picks known elements: each tensor is needed where it is picked. A
    mask that is data is needed, but any one tensor it picks from may be picked nowhere (an
    all-true mask), so those tensors are charged nothing (scalars and fill values aside) — the
    floor: where both are graph inputs, each element needs one of them, so the narrower one is
    charged at the demanded elements."""
    region = context.output
    out_shape = context.op.writes[0].shape
    inputs = [_broadcast(region, out_shape, ref.shape) for ref in context.op.reads]
    if any(mapped is None for mapped in inputs):
        return _proportional(context)
    names = [n for n in context.op.argument_names if isinstance(context.argument(n), torch.Tensor)]
    if len(names) != len(context.op.reads):
        return _proportional(context)
    when_true, when_false = _PICKED[context.op.base]
    mask_position = names.index("mask" if "mask" in names else "condition")
    mask = _known(context, mask_position)
    elements = math.prod(out_shape)
    others = [position for position in range(len(context.op.reads)) if position != mask_position]
    # with a data mask, the tensors it may pick nowhere (scalars and broadcast fills aside)
    picked = [p for p in others if context.op.reads[p].elements * 2 > elements]
    if mask is None:
        for position in picked:
            inputs[position] = NOWHERE
    else:  # a known mask: every tensor is needed where it is picked, broadcast ones too
        holds = _unexpanded(mask).bool()
        for position in others:
            where = holds if names[position] == when_true else ~holds
            chosen = _region_where(where, region)
            inputs[position] = _broadcast(chosen, out_shape, context.op.reads[position].shape)
    sourced = [p for p in picked if context.op.reads[p].value_id not in context.producers]
    if mask is None and len(picked) == 2 and sourced == picked:
        narrower = min(picked, key=lambda p: context.op.reads[p].itemsize)
        inputs[narrower] = _broadcast(region, out_shape, context.op.reads[narrower].shape)
    return Demand(tuple(inputs), context.record.flops.scaled(context.fraction))


def _row_part(region: Region, width: int) -> int:
    """Elements of one looked-up row that demanded outputs use (their last-dim positions)."""
    if region.boxes:
        return min(width, max(set_size(box[-1]) for box in region.boxes if box))
    return min(width, region.count)


def _data_chosen(count: int) -> int:
    """Source elements chosen by index values: the data is unknown at analysis time and repeated
    indices may all pick one element, so the bound charges one (a loose but safe minimum)."""
    return 1 if count > 0 else 0


#: in a fixed order: registration order is the order METHOD's generated table lists them
_GRID_SAMPLERS = (aten.grid_sampler_2d, aten.grid_sampler_3d)


@demand_rule(
    [
        aten.embedding,
        aten.index_select,
        aten.gather,
        aten.index,
        aten._unsafe_index,
        aten.take,
        aten._embedding_bag,
        aten._embedding_bag_forward_only,
        *_GRID_SAMPLERS,
    ]
)
def gather_demand(context: _Context) -> Demand:
    """A gather reads the index tensors for the demanded outputs and source elements chosen by
    their values: with the values known (:mod:`.given`), exactly the distinct source elements
    the demanded outputs pick (:func:`_known_picks`); else one pick (:func:`_one_slice`: a
    row of ``w[i]``, as of an embedding), or, through an index distinct along a line whatever
    the data (a top-k's, a sort's: :mod:`.distinct`), as many slices as one line's demanded
    picks (:func:`_distinct_floor`)."""
    picked = _known_picks(context) or _only_choice(context)
    demanded = context.output.count
    sampled = _one_of(context.op, _GRID_SAMPLERS)
    chosen = _sampled_planes(context) if sampled else _data_chosen(demanded)
    inputs = [Region(opaque=chosen)]
    inputs += [
        _index_read(context, position) if context.loaded(position) else NOWHERE
        for position in range(1, len(context.op.reads))
    ]
    if aten.embedding in op_keys(context.op):  # (weight, indices): indices are the 2nd read
        weight = context.op.reads[0]
        inputs[0] = Region(
            opaque=_data_chosen(demanded) * _row_part(context.output, weight.shape[-1])
        )
    if picked is not None:
        inputs[0] = picked
    else:
        floor = max(_distinct_floor(context), _one_slice(context))
        inputs[0] = Region(opaque=max(inputs[0].opaque, floor))
    return Demand(tuple(inputs), context.record.flops.scaled(context.fraction))


#: ``grid_sampler``'s ``padding_mode`` that reads zeros off the image (1 border, 2 reflection)
_ZEROS_PADDING = 0


def _sampled_planes(context: _Context) -> int:
    """Source elements a grid sample (N, C, *out) reads whatever its grid holds. Zero padding
    may land off the image only: none. Padded by its border or by reflection, every sample
    lands inside and its weights sum to 1, so each output weighs a pixel of its own (n, c)
    plane (all of a plane's outputs maybe the same one): one per demanded plane, the largest
    box's count (boxes may overlap)."""
    if context.argument("padding_mode") == _ZEROS_PADDING:
        return 0
    region = context.output
    planes = (set_size(box[0]) * set_size(box[1]) for box in region.boxes if len(box) > 1)
    return max(planes, default=min(region.opaque, 1))


def _one_slice(context: _Context) -> int:
    """Source elements a gather reads whatever its index values: every index may be equal, so
    all demanded outputs may pick one slice, but a demanded box's positions along the output
    dims no index covers (:data:`_INDEXED_DIMS`) are that many distinct elements of it —
    ``w[i]`` and ``w.index_select(0, i)`` a row of ``w``, as ``embedding`` — and so are its
    positions along the dims where an index position is the source's own coordinate
    (:data:`_SOURCE_COORDINATES`): ``x.gather(1, i)`` one element per row. The largest box's
    count (boxes may overlap)."""
    indexed = lookup(_INDEXED_DIMS, context.op)
    dims = None if indexed is None else indexed(context)
    if dims is None:
        return 0
    own_rule = lookup(_SOURCE_COORDINATES, context.op)
    own = set(own_rule(context)) if own_rule else set()
    return max(
        (math.prod(set_size(s) for d, s in enumerate(box) if d not in dims or d in own)
         for box in context.output.boxes if all(box)),
        default=0,
    )


def _output_dims(context: _Context) -> range:
    return range(len(context.op.writes[0].shape))


def _index_select_dim(context: _Context) -> tuple[int, ...]:
    return (context.argument("dim") % max(1, len(context.op.reads[0].shape)),)


def _advanced_index_dims(context: _Context) -> Sequence[int] | None:
    """``x[..., i, j, ...]`` with integer index tensors of one shape: output dims d0 … d0 +
    i.dim() hold their positions, d0 the first indexed dim when the indexed dims are adjacent,
    else 0 (NumPy's rule). Boolean or broadcast index tensors: None."""
    indices = context.argument("indices")
    used = [(d, index) for d, index in enumerate(indices) if index is not None]
    shapes = {tuple(index.shape) for _, index in used}
    if len(shapes) != 1 or any(index.dtype == torch.bool for _, index in used):
        return None
    first, last = used[0][0], used[-1][0]
    start = first if last - first + 1 == len(used) else 0
    return range(start, start + len(next(iter(shapes))))


#: Gathers whose output position p reads index element p[dims] (the dims given here):
#: ``gather`` and ``take`` index every output, ``embedding`` each row of D outputs,
#: ``index_select`` each slice along ``dim``, an advanced index the dims its tensors make
#: (None: unknown, the demanded share as a count).
_INDEXED_DIMS: dict[OpKey, Callable[[_Context], Sequence[int] | None]] = {}
add_rules(_INDEXED_DIMS, [aten.gather, aten.take], _output_dims, "indexed-dims")
add_rules(_INDEXED_DIMS, [aten.embedding], lambda c: _output_dims(c)[:-1], "indexed-dims")
add_rules(_INDEXED_DIMS, [aten.index_select], _index_select_dim, "indexed-dims")
add_rules(_INDEXED_DIMS, [aten.index, aten._unsafe_index], _advanced_index_dims, "indexed-dims")


#: Gathers that pick along one dim of their source: the dim
_PICKED_DIM: dict[OpKey, Callable[[_Context], tuple[int, ...]]] = {}
add_rules(_PICKED_DIM, [aten.gather, aten.index_select], _index_select_dim, "picked-dim")


def _only_choice(context: _Context) -> Region | None:
    """A gather along a dim of size 1 picks element 0 there whatever its index holds (any
    other is out of range): out[p] = src[p with that dim 0], a copy (c outputs with no
    position: ⌈c / picks per line⌉). None for other gathers."""
    picked_dim = lookup(_PICKED_DIM, context.op)
    source, region = context.op.reads[0], context.output
    dim = picked_dim(context)[0] if picked_dim else None
    if dim is None or len(source.shape) <= dim or source.shape[dim] != 1 or any(
        len(box) != len(source.shape) for box in region.boxes
    ):
        return None
    boxes = [(*box[:dim], (range(1),), *box[dim + 1 :]) for box in region.boxes]
    return Region.of(boxes, -(-region.opaque // max(context.op.writes[0].shape[dim], 1)))


#: Gathers whose index positions are, along some of the index's dims, the source's own
#: coordinates there: ``gather`` reads src[p with ``dim`` replaced by index[p]], so picks at
#: different positions off ``dim`` are different elements whatever they pick. The others'
#: index positions say nothing of where in the source a pick lands.
_SOURCE_COORDINATES: dict[OpKey, Callable[[_Context], Sequence[int]]] = {}
add_rules(
    _SOURCE_COORDINATES,
    [aten.gather],
    lambda c: [d for d in _output_dims(c) if d != _index_select_dim(c)[0]],
    "source-coordinates",
)


def _distinct_floor(context: _Context) -> int:
    """Source elements a gather through an index of distinct values (:mod:`.distinct`) reads
    at least, whatever they are: in a demanded box, the index's demanded elements on one of
    its lines pick as many different slices of the source (topk(…, 2) picks two experts), each
    read at the box's positions along the output dims no index covers (:data:`_INDEXED_DIMS`);
    picks of different lines may repeat them, so one line counts — per combination of the
    coordinates the index shares with the source (:data:`_SOURCE_COORDINATES`). The largest
    box's count (boxes may overlap)."""
    indexed = lookup(_INDEXED_DIMS, context.op)
    dims = None if indexed is None else indexed(context)
    if dims is None or not context.output.boxes:
        return 0
    shared_rule = lookup(_SOURCE_COORDINATES, context.op)
    shared = [] if shared_rule is None else [list(dims).index(d) for d in shared_rule(context)]
    order = [*shared, *(p for p in range(len(dims)) if p not in shared)]
    floor = 0
    for ref in context.op.reads[1:]:
        found = index_lines(ref, context.producers) if len(dims) == len(ref.shape) else None
        for box in context.output.boxes if found is not None else ():
            where = _box_index(tuple(box[d] for d in dims))
            lines, elements = (t[where].permute(order) for t in found)
            groups = math.prod(lines.shape[: len(shared)])
            picks = distinct_picks(lines.reshape(groups, -1), elements.reshape(groups, -1))
            slice_part = math.prod(set_size(s) for d, s in enumerate(box) if d not in dims)
            floor = max(floor, picks * slice_part)
    return floor


def _index_read(context: _Context, position: int) -> Region:
    """The elements of index read ``position`` that the demanded outputs read: every demanded
    box projected onto the index's dims (:data:`_INDEXED_DIMS`; n demanded elements with no
    position need n / (outputs one index element feeds) of them); for other gathers, the
    demanded share of the index, as a count."""
    ref = context.op.reads[position]
    indexed = lookup(_INDEXED_DIMS, context.op)
    dims = None if indexed is None else indexed(context)
    if dims is None:
        return Region(opaque=int(ref.elements * context.fraction))
    if len(dims) != len(ref.shape):  # a 0-dim index: one element every output reads
        return Region.of([full_box(ref.shape)]) if context.output else NOWHERE
    out_shape = context.op.writes[0].shape
    fan_out = math.prod(n for d, n in enumerate(out_shape) if d not in dims)
    boxes = [tuple(box[d] for d in dims) for box in context.output.boxes]
    return Region.of(boxes, -(-context.output.opaque // max(fan_out, 1)))


_BAGS = _op_set([aten._embedding_bag, aten._embedding_bag_forward_only])


def _bag_picks(context: _Context, indices: torch.Tensor, offsets: torch.Tensor) -> Region:
    """_embedding_bag(weight, indices, offsets, …): bag b reduces (sums, averages or maxes)
    the rows indices[offsets[b]:offsets[b + 1]] (the last bag runs to the end, unless
    ``include_last_offset``), skipping entries equal to ``padding_idx``; each demanded box, the
    distinct rows of its bags at its own columns. A demanded output with no position, one
    element."""
    indices, bounds = indices.reshape(-1).long(), offsets.reshape(-1).tolist()
    if not context.argument("include_last_offset", False):
        bounds.append(indices.numel())
    padding = context.argument("padding_idx", -1)
    boxes = []
    for box in context.output.boxes:
        used = [indices[bounds[b] : bounds[b + 1]] for r in box[0] for b in r]
        rows = torch.cat(used).unique().tolist() if used else []
        boxes.append((positions_to_set(r for r in rows if r != padding or padding < 0), box[-1]))
    return Region.of(boxes, min(context.output.opaque, 1))


def _sliced_picks(context: _Context, dim: int, index: torch.Tensor) -> Region:
    """A gather whose output holds, along dims ``dim`` … ``dim + index.dim()``, the source's
    slices along ``dim`` that ``index`` names (negative ones from the end), and the source's own
    positions along the other dims: ``index_select``, ``embedding`` (the rows of its weight),
    ``x[:, i]``. Each demanded box, the positions its index elements hold along ``dim`` — the
    source elements those outputs copy, no more — found from the index values alone, however
    large the source."""
    size = context.op.reads[0].shape[dim]
    span = index.dim()
    boxes = []
    for box in context.output.boxes:
        held = index[_box_index(box[dim : dim + span])] % size
        boxes.append((*box[:dim], positions_to_set(held.unique().tolist()), *box[dim + span :]))
    return Region.of(boxes)


def _index_select_picks(context: _Context, indices: torch.Tensor) -> Region:
    """index_select(x, dim, index): slices along ``dim`` (a 0-dim index as a 1-element one)."""
    dim = context.argument("dim") % len(context.op.reads[0].shape)
    return _sliced_picks(context, dim, indices.reshape(-1))


def _whole_slice_picks(context: _Context, values: list[torch.Tensor]) -> Region | None:
    """A gather or advanced index that picks whole slices (:func:`_sliced_picks`): ``x[i]``,
    ``x[:, i]`` (one integer index tensor), or ``gather`` along dim 0 with an index the same
    along its other dims (each output row one source row). Else None."""
    source = context.op.reads[0].shape
    if not source or len(values) != 1 or values[0].dtype == torch.bool:
        return None
    if context.op.base in ("index", "_unsafe_index"):
        dim = next(d for d, index in enumerate(context.op.args[1]) if index is not None)
        return _sliced_picks(context, dim, values[0].long())
    if aten.gather not in op_keys(context.op) or context.argument("dim") % len(source):
        return None
    index = values[0].long().reshape(values[0].shape[0], -1)  # kept outputs: not empty
    if not bool((index == index[:, :1]).all()):
        return None
    return _sliced_picks(context, 0, index[:, 0])


def _numbered_picks(context: _Context, values: list[torch.Tensor | None]) -> Region | None:
    """A gather, ``take`` or advanced index with known indices: run it on the source's element
    numbers and count the distinct numbers the demanded outputs hold."""
    source = context.op.reads[0]
    count = math.prod(source.shape)
    if count > _NUMBERED_SOURCE_LIMIT:
        return _indexed_lines(context, values)
    numbers = torch.arange(count).reshape(source.shape)
    args = list(context.op.args)
    if context.op.base in ("index", "_unsafe_index"):
        filled = iter(values)
        args[1] = [None if i is None else next(filled) for i in args[1]]
    else:
        position = next(i for i, a in enumerate(args) if isinstance(a, torch.Tensor) and i)
        args[position] = values[0]
    args[0] = numbers
    try:
        picked = context.op.func(*args, **context.op.kwargs)
    except Exception:  # noqa: BLE001 — an index the CPU cannot run stays unknown
        return None
    if picked.shape != context.op.writes[0].shape:
        # index values other than those the trace ran with (x[x > 0] of a problem file whose
        # inputs are drawn anew, picking 6 elements where the trace's picked 7): its picks
        # stay unknown, as an index the CPU cannot run does
        return None
    mask = _demanded_mask(context.output, tuple(picked.shape))
    return _numbers_region(picked[mask].unique(), source.shape)


def _grid_picks(context: _Context, grid: torch.Tensor) -> Region | None:
    """A grid sample on a known grid (``affine_grid`` of a constant map): the source elements
    the demanded outputs weigh, found as where the gradient of their sum over an all-ones
    source is nonzero (a bilinear or nearest weight is positive where it reads; bicubic
    weights of both signs that cancel leave an element out: fewer, never more)."""
    source = context.op.reads[0]
    if math.prod(source.shape) > _NUMBERED_SOURCE_LIMIT or not grid.is_floating_point():
        return None
    ones = torch.ones(source.shape, dtype=grid.dtype, requires_grad=True)
    args = [ones, grid, *context.op.args[2:]]
    try:
        sampled = context.op.func(*args, **context.op.kwargs)
    except Exception:  # noqa: BLE001 — a grid the CPU cannot run stays unknown
        return None
    mask = _demanded_mask(context.output, tuple(sampled.shape))
    (sampled * mask).sum().backward()
    return _numbers_region(ones.grad.reshape(-1).nonzero().flatten(), source.shape)


def _indexed_lines(context: _Context, values: list[torch.Tensor | None]) -> Region | None:
    """``x[i, j]`` on a source too big to number, every output kept (a paged KV cache read
    through its page table): each distinct tuple of index values picks one whole sub-tensor
    of the dims no index covers, as each true element of one boolean mask does. Partly kept
    outputs: None (the any-input rule)."""
    if context.op.base not in ("index", "_unsafe_index") or context.fraction < 1:
        return None
    indices = context.op.args[1]
    source = context.op.reads[0]
    covered = [dim for dim, index in enumerate(indices) if index is not None]
    if any(v.dtype == torch.bool for v in values):
        if len(values) > 1:
            return None
        # x[mask]: each true element picks the sub-tensor of the dims after the mask's
        (mask,), first = values, covered[0]
        rest = math.prod(size for dim, size in enumerate(source.shape)
                         if not first <= dim < first + mask.dim())
        return Region(opaque=int(mask.sum()) * rest)
    # a negative index counts from the end: -1 and n - 1 are one line
    wrapped = [v.long() % source.shape[dim] for v, dim in zip(values, covered, strict=True)]
    tuples = torch.stack(torch.broadcast_tensors(*wrapped), -1)
    distinct = tuples.reshape(-1, len(values)).unique(dim=0).shape[0]
    rest = math.prod(size for dim, size in enumerate(source.shape) if dim not in covered)
    return Region(opaque=distinct * rest)


def _known_picks(context: _Context) -> Region | None:
    """The source elements a gather's demanded outputs pick, when every index is known."""
    if context.op.func is None or len(context.op.reads) < 2 or not context.output.boxes:
        return None
    if _one_of(context.op, _BAGS):  # per-sample weights are no index
        indices, offsets = _known(context, 1), _known(context, 2)
        return None if indices is None or offsets is None else _bag_picks(context, indices, offsets)
    values = [_known(context, position) for position in range(1, len(context.op.reads))]
    if any(v is None for v in values):
        return None
    if aten.embedding in op_keys(context.op):
        return _sliced_picks(context, 0, values[0].long())
    if aten.index_select in op_keys(context.op):
        return _index_select_picks(context, values[0].long())
    if _one_of(context.op, _GRID_SAMPLERS):
        return _grid_picks(context, values[0])
    if not _one_of(context.op, _NUMBERED_GATHERS):
        return None
    whole = _whole_slice_picks(context, values)
    return _numbered_picks(context, values) if whole is None else whole


_NUMBERED_GATHERS = _op_set([aten.gather, aten.index, aten._unsafe_index, aten.take])


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
