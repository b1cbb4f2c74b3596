"""Demand rules of gathers: ``embedding``, ``index_select``, ``gather``, advanced indexing,
``take``, ``embedding_bag`` and grid samples — the index elements the demanded outputs read
and the source elements their values pick."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import torch

from ...costs import OpKey, add_rules, aten, lookup, op_keys
from ...trace.regions import NOWHERE, Region, full_box, positions_to_set, set_size
from ._core import Demand, _Context, _data_chosen, _one_of, _op_set, demand_rule
from .constants import _known
from .distinct import distinct_picks, index_lines
from .numbered import _NUMBERED_SOURCE_LIMIT, _box_index, _demanded_mask, _numbers_region


def _row_part(region: Region, width: int) -> int:
    """Elements of one looked-up row that demanded outputs use (their last-dim positions)."""
    if region.boxes:
        return min(width, max(set_size(box[-1]) for box in region.boxes if box))
    return min(width, region.count)


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


#: ``grid_sampler``'s ``interpolation_mode`` for bilinear (1 nearest, 2 bicubic)
_BILINEAR = 0

#: Ops whose outputs all lie in [−1, 1] (``tanh``: the open interval, but it rounds to ±1 in
#: floating point past |x| ≈ 9)
_UNIT_RANGE = _op_set([aten.tanh, aten.hardtanh])


def _lands_inside(context: _Context) -> bool:
    """Whether every sample of a zero-padded grid sample weighs a pixel of its image, whatever
    its grid holds: the grid is made by an op of range [−1, 1] (:data:`_UNIT_RANGE`), so each
    coordinate lies in [−0.5, size − 0.5] in pixels ([0, size − 1] with ``align_corners``);
    there a bilinear sample's nearer tap is inside with weight ≥ ½, and a nearest one with
    ``align_corners`` rounds inside (without, size − 0.5 may round to size: off the image)."""
    grid = context.op.reads[1]
    producer = context.producers.get(grid.value_id)
    corners = bool(context.argument("align_corners"))
    return producer is not None and _one_of(producer, _UNIT_RANGE) and (
        producer.argument("min_val", -1.0) >= -1.0 and producer.argument("max_val", 1.0) <= 1.0
    ) and (corners or context.argument("interpolation_mode") == _BILINEAR)


def _sampled_planes(context: _Context) -> int:
    """Source elements a grid sample (N, C, *out) reads whatever its grid holds. Zero padding
    may land off the image only: none, unless its grid lies inside (:func:`_lands_inside`).
    Padded by its border or by reflection, or landing inside, every sample weighs a pixel of
    its own (n, c) plane (all of a plane's outputs maybe the same one): one per demanded plane,
    the largest box's count (boxes may overlap)."""
    if context.argument("padding_mode") == _ZEROS_PADDING and not _lands_inside(context):
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

