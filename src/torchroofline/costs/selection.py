"""Rules of selection: gathers, scatters and indexed stores, searches and counts by value, and how
an in-place op accesses its destination."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import replace
from enum import Enum

import torch

from ..trace.aten_ops import aten
from ..trace.refs import TensorRef, TracedOp
from ._core import (
    GATHERS,
    STORES,
    Category,
    FlopCount,
    FlopFormula,
    OpKey,
    _numel,
    _per_input_element,
    add_rules,
    lookup,
    register,
)

# --- Data movement: bytes, no FLOPs ----------------------------------------------------------

def gathered_reads(op: TracedOp) -> tuple[TensorRef, ...]:
    """A gather reads at most as many source elements as it writes (an embedding lookup reads
    the rows it picks, not the whole table; nearest-neighbour resampling one source element per
    output); the source is the op's first tensor argument."""
    source, *rest = op.reads
    picked = min(source.elements, _numel(op.output))
    return (replace(source, elements=picked), *rest)


register(
    [aten.gather, aten.index, aten.index_select, aten.embedding, aten.take, aten._unsafe_index,
     aten.upsample_nearest1d, aten.upsample_nearest2d, aten.upsample_nearest3d,
     aten._upsample_nearest_exact1d, aten._upsample_nearest_exact2d,
     aten._upsample_nearest_exact3d, aten.diagonal_copy],
    Category.DATA_MOVEMENT,
    fusible=True,
    reads=gathered_reads,
)(GATHERS)


#: ``_embedding_bag``'s ``mode``: 0 sum, 1 mean, 2 max.
EMBEDDING_BAG_MEAN = 1


def bagged_reads(op: TracedOp) -> tuple[TensorRef, ...]:
    """An embedding bag reads the rows its indices pick, at most the whole table: one row per
    index, not per bag (its output holds one row per bag, fewer than it reads)."""
    table, *rest = op.reads
    weight, indices = op.args[:2]
    picked = min(table.elements, indices.numel() * weight.shape[-1])
    return (replace(table, elements=picked), *rest)


@register([aten._embedding_bag, aten._embedding_bag_forward_only], Category.DATA_MOVEMENT,
          fusible=True, reads=bagged_reads)
def embedding_bag_flops(op: TracedOp) -> FlopCount:
    """Each bag folds the rows its indices pick: one add (sum, mean) or compare (max) per
    gathered element, as a reduction charges one per input element; a multiply-add with
    ``per_sample_weights``; mean divides each output element once more."""
    weight, indices = op.args[:2]
    gathered = indices.numel() * weight.shape[-1]
    per_element = 1 if op.argument("per_sample_weights") is None else 2
    divides = _numel(op.output) if op.argument("mode") == EMBEDDING_BAG_MEAN else 0
    return FlopCount(vector=per_element * gathered + divides)


@register([aten.embedding_renorm], Category.REDUCTION, fusible=False)
def embedding_renorm_flops(op: TracedOp) -> FlopCount:
    """``embedding_renorm_(weight, indices, max_norm, norm_type)`` takes the norm of each row
    its indices pick (a multiply-add per element, as a 2-norm) and rescales the rows over
    ``max_norm`` (a multiply per element where it does, which the data decides: charged as
    if every row did). Moved as its destination declares (:data:`DESTINATION_ACCESS`)."""
    weight, indices = op.args[:2]
    return FlopCount(vector=3 * indices.numel() * weight.shape[-1])


register(
    [aten.scatter, aten.index_put, aten._index_put_impl, aten._unsafe_index_put, aten.index_copy,
     aten.index_fill, aten.masked_scatter, aten.max_unpool2d, aten.max_unpool3d, aten.put],
    Category.DATA_MOVEMENT,
    fusible=False,
)(STORES)


#: Compares and counts by value: ``nonzero`` compares each element with 0; ``unique`` sorts
#: (one compare per element, as :data:`REDUCTION_FLOPS_PER_INPUT_ELEMENT` charges ``sort``);
#: ``bincount`` adds 1 (or a weight) per element; ``histc`` subtracts the low edge, scales and
#: rounds down per element.
SELECTION_FLOPS_PER_INPUT_ELEMENT: dict[OpKey, int] = {
    aten.nonzero: 1, aten.nonzero_static: 1, aten._unique2: 1, aten._unique: 1,
    aten.unique_consecutive: 1, aten.unique_dim: 1, aten.unique_dim_consecutive: 1,
    aten.bincount: 1, aten.histc: 3,
}
for _name, _flops in SELECTION_FLOPS_PER_INPUT_ELEMENT.items():
    register([_name], Category.DATA_MOVEMENT, fusible=False)(_per_input_element(_flops))


#: ``reduce`` values of the accumulating scatters that divide by the count at the end.
_AVERAGING = frozenset({"mean"})


def accumulated_flops(folded: str) -> FlopFormula:
    """An accumulating store (``scatter_add``, ``index_add``, ``scatter_reduce``, ...) folds each
    element of its argument ``folded`` (a scatter's index: it uses as many source elements as
    that holds) into the destination: one add, multiply or compare each, a multiply-add where
    ``index_add`` scales by ``alpha`` ≠ 1; a mean divides each destination element once more."""

    def formula(op: TracedOp) -> FlopCount:
        per_element = 1 if op.argument("alpha", 1) == 1 else 2
        divides = _numel(op.output) if op.argument("reduce") in _AVERAGING else 0
        return FlopCount(vector=per_element * op.argument(folded).numel() + divides)

    return formula


register([aten.scatter_add, aten.scatter_reduce, aten.scatter.reduce, aten.scatter.value_reduce],
         Category.DATA_MOVEMENT, fusible=False)(accumulated_flops("index"))
register([aten.index_add, aten.index_reduce], Category.DATA_MOVEMENT, fusible=False)(
    accumulated_flops("source")
)


def _binary_search_flops(sorted_position: int) -> FlopFormula:
    """A search of each element among ``b`` sorted boundaries: ⌈log2(b + 1)⌉ comparisons, the
    fewest any comparison search needs to tell ``b + 1`` outcomes apart."""

    def formula(op: TracedOp) -> FlopCount:
        boundaries = op.args[sorted_position].shape[-1]
        return FlopCount(vector=_numel(op.output) * math.ceil(math.log2(boundaries + 1)))

    return formula


register([aten.searchsorted], Category.DATA_MOVEMENT, fusible=False)(_binary_search_flops(0))
register([aten.bucketize], Category.DATA_MOVEMENT, fusible=False)(_binary_search_flops(1))


class DestinationAccess(Enum):
    """What an op does with the destination it writes (its first argument, in place). The trace
    sees the destination as an argument; the GPU loads and stores only what the access says.
    All but ``OVERWRITTEN`` write positions chosen by index or mask values (data)."""

    #: every element stored, none loaded: ``copy_``, fills, in-place random generators
    OVERWRITTEN = "overwritten"
    #: the value stored where the mask is true, only the mask loaded (``masked_fill_``); which
    #: positions those are is data, so the moved write stays the whole destination
    MASKED = "stored where a mask is true"
    #: only the positions its source (last tensor argument) names are stored, none loaded
    STORED_AT_INDICES = "stored at indices"
    #: the positions its source names are loaded and stored (accumulating scatters)
    ACCUMULATED_AT_INDICES = "accumulated at indices"
    #: the rows its indices pick are rescaled where their norm is too large (data); moved as a
    #: whole read and write
    RENORMED_ROWS = "renormed rows"

    @property
    def data_chosen(self) -> bool:
        return self is not DestinationAccess.OVERWRITTEN


#: One declaration per op (its in-place twin shared) of how it accesses its destination.
DESTINATION_ACCESS: dict[OpKey, DestinationAccess] = {}


def _destinations(ops: Iterable[OpKey], access: DestinationAccess) -> None:
    add_rules(DESTINATION_ACCESS, ops, access, "destination-access")


_destinations(
    [aten.copy, aten.fill, aten.zero, aten.uniform, aten.normal, aten.bernoulli, aten.random,
     aten.exponential, aten.cauchy, aten.log_normal, aten.geometric],
    DestinationAccess.OVERWRITTEN,
)
_destinations([aten.masked_fill], DestinationAccess.MASKED)
_destinations(
    [aten.index_put, aten._index_put_impl, aten._unsafe_index_put, aten.scatter, aten.index_copy,
     aten.masked_scatter, aten.put, aten.index_fill],
    DestinationAccess.STORED_AT_INDICES,
)
_destinations(
    [aten.index_reduce, aten.scatter_add, aten.index_add, aten.scatter_reduce],
    DestinationAccess.ACCUMULATED_AT_INDICES,
)
_destinations([aten.embedding_renorm], DestinationAccess.RENORMED_ROWS)


def _has_out_argument(op: TracedOp) -> bool:
    return any(name == "out" for _, name in op.written_arguments)


def _writes_first_argument(op: TracedOp) -> bool:
    return any(position == 0 for position, _ in op.written_arguments)


def _index_put_positions(op: TracedOp) -> int | None:
    """``x[i, :, j] = v``: the broadcast index shape times every dim left whole; a boolean mask
    counts each of its elements (an upper limit) over the dims it spans."""
    indices = op.argument("indices")
    if not indices:
        return None
    shape = op.args[0].shape
    dim, shapes, whole = 0, [], []
    for index in indices:
        if index is None:
            whole.append(shape[dim])
            dim += 1
        elif index.dtype == torch.bool:
            shapes.append((index.numel(),))
            dim += index.dim()
        else:
            shapes.append(tuple(index.shape))
            dim += 1
    if not shapes:
        return None
    return math.prod(torch.broadcast_shapes(*shapes)) * math.prod(whole) * math.prod(shape[dim:])


def _index_fill_positions(op: TracedOp) -> int:
    """``index_fill(dim, index)``: each index replaces a whole slice along ``dim``."""
    shape = op.args[0].shape
    dim = op.argument("dim", 0) % max(len(shape), 1)
    return op.argument("index").numel() * math.prod(shape) // max(shape[dim] if shape else 1, 1)


#: Indexed stores whose shapes say how many destination positions they touch (others touch at
#: most one per index element).
INDEXED_POSITIONS: dict[OpKey, Callable[[TracedOp], int | None]] = {}
add_rules(INDEXED_POSITIONS, [aten.index_fill], _index_fill_positions, "indexed-positions")
add_rules(
    INDEXED_POSITIONS,
    [aten.index_put, aten._index_put_impl, aten._unsafe_index_put],
    _index_put_positions,
    "indexed-positions",
)


def indexed_positions(op: TracedOp, largest_input: int) -> int:
    """The most destination positions an indexed store can touch: from the shapes where
    :data:`INDEXED_POSITIONS` has a rule, else one per element of its largest other input
    (``largest_input``), never more than the destination holds."""
    rule = lookup(INDEXED_POSITIONS, op)
    positions = rule(op) if rule is not None else None
    destination = op.args[0]
    total = destination.numel() if isinstance(destination, torch.Tensor) else largest_input
    return min(largest_input if positions is None else positions, total)


def in_place_accesses(
    op: TracedOp, reads: tuple[TensorRef, ...]
) -> tuple[tuple[TensorRef, ...], tuple[TensorRef, ...]]:
    """(reads, writes) of an op, with the destination of an in-place op charged only for what
    the GPU really loads and stores (:data:`DESTINATION_ACCESS`). A destination that is not
    loaded stays a read of zero elements: what the op leaves untouched is still the previous
    version's data, so that version must exist (a ``zeros`` then ``y[:, :k] = x`` writes all of
    ``y``)."""
    if not op.writes or not reads:
        return reads, op.writes
    if _has_out_argument(op):
        # an out= buffer (the last tensor argument) is only written: its read loads nothing
        *inputs, out = reads
        return (*inputs, replace(out, elements=0)), op.writes
    if not _writes_first_argument(op):
        return reads, op.writes
    destination, *rest = reads
    access = lookup(DESTINATION_ACCESS, op)
    if access in (DestinationAccess.OVERWRITTEN, DestinationAccess.MASKED):
        return (replace(destination, elements=0), *rest), op.writes
    indexed = (DestinationAccess.STORED_AT_INDICES, DestinationAccess.ACCUMULATED_AT_INDICES)
    if access in indexed and rest:
        # a broadcast scalar value stores one element per indexed position, not one in all
        stored = min(indexed_positions(op, max(ref.elements for ref in rest)),
                     destination.elements)
        writes = tuple(replace(ref, elements=min(ref.elements, stored)) for ref in op.writes)
        loaded = stored if access is DestinationAccess.ACCUMULATED_AT_INDICES else 0
        return (replace(destination, elements=loaded), *rest), writes
    return reads, op.writes
