"""Which dims of which values tensor values sized (``nonzero``, ``masked_select``, boolean
indexing…), followed dim by dim: through views by the strides that lay them out, through
other ops by the dims each output dim comes from — never by size alone, for a size data chose
may equal a fixed one (``token[1:]`` of a ``nonzero`` result of shape (3, 2) is (2, 2): its
first dim follows the data, its second does not)."""

from __future__ import annotations

import functools
from collections.abc import Callable, Collection, Sequence

import torch
from torch._ops import OpOverload

from ...costs import Category, aten, rule_for
from ...trace.refs import TensorRef, TracedOp

#: Ops torch tags ``dynamic_output_shape`` that size their output by values only when an index
#: is a boolean mask (integer indices give a size known from shapes).
_DATA_SIZED_ONLY_WITH_MASKS = frozenset({aten.index})


def _sizes_outputs_by_data(op: TracedOp) -> bool:
    """Whether the op's output sizes depend on tensor values (nonzero, masked_select, unique,
    bincount, boolean-mask indexing…), which torch tags ``dynamic_output_shape``."""
    if op.func is None or not _dynamic_output_shape(op.func):
        return False
    masks = any(ref.dtype == "bool" for ref in op.reads[1:])
    return masks or op.func.overloadpacket not in _DATA_SIZED_ONLY_WITH_MASKS


@functools.cache  # a program calls few overloads, each many times
def _dynamic_output_shape(func: OpOverload) -> bool:
    return torch.Tag.dynamic_output_shape in func.tags


def _sized_by_data(
    ops: Sequence[TracedOp], known: Collection[int] = ()
) -> dict[int, frozenset[int]]:
    """value id → the positions of its dims (in the shape it was written in) whose sizes tensor
    values chose. The trace ran such ops on random data (the real-data fallback) or stand-ins,
    so their sizes are one draw: any input may make them empty — unless the op's outputs are
    ``known`` (value ids: computed from constants, ``repeat_interleave`` of repeats written in
    ``forward``). A dim chosen by data stays so in every view laid along it (``nonzero(m)[:5]``:
    five rows where the data gave five or more; :func:`_view_dims`) and in every output dim an
    op computes from it (``x[x > 0] * 2``, the rows of ``cat([x[x > 0], y])``;
    :func:`_written_dims`); a reduction over it (``.sum(0)``) or a product contracting it
    ends it."""
    sized: dict[int, frozenset[int]] = {}
    written: dict[int, TensorRef] = {}  #: the layout each of them was written in
    for op in ops:
        read_dims = [
            _view_dims(ref, written[ref.value_id], sized[ref.value_id])
            if ref.value_id in sized else frozenset()
            for ref in op.reads
        ] if sized else []  # most programs size nothing by data: no read to look up
        chosen = any(read_dims)
        if op.is_view or not (chosen or _sizes_outputs_by_data(op)):
            continue
        if not chosen and (
            all(w.value_id in known for w in op.writes)
            or all(ref.value_id in known for ref in _deciding_reads(op))
        ):
            continue
        read_dims = read_dims or [frozenset()] * len(op.reads)
        picked = _picked_dim(op) if not chosen else None
        # a write into a storage of fixed size (index_add_ of routed rows into the output) keeps
        # it, whatever sizes the rows had (one expert's 32 of 32 tokens is no size of the output)
        destinations = {ref.storage_id for ref in op.reads if ref.value_id not in sized}
        for ref in op.writes:
            if chosen and ref.storage_id in destinations:
                continue
            dims = _written_dims(op, ref, read_dims)
            # the dim the op chose, even where its size happens to equal a size of its reads
            # (two tokens of 32 routed to an expert: nonzero's (2, 2) beside a (32, 2) mask)
            if picked is not None and len(ref.shape) > picked:
                dims |= {picked}
            if dims:
                sized[ref.value_id] = dims
                written[ref.value_id] = ref
    return sized


def _view_dims(ref: TensorRef, written: TensorRef, dims: frozenset[int]) -> frozenset[int]:
    """The dims of ``ref``, a view of a value laid out as ``written`` whose ``dims`` data sized,
    that step along one of those: a view dim of stride ``t`` and size ``n`` steps along a dim
    of stride ``s`` and size ``B`` where ``t < s·B`` and ``t·(n − 1) ≥ s`` (slices, permutes,
    merges and splits of a dense layout; a broadcast dim, stride 0, steps along none). A view
    dim of size 1 is one where its stride lands in such a dim that no longer dim of the view
    steps along (``token[:1]``, not an ``unsqueeze``); one of size 0 may be any. Where the
    layout cannot tell, the view's dims are taken as sized (a bound then charges less, never
    more): all of them for an element size that differs or a data-sized dim written
    broadcast (stride 0), those of size 1 where a data-sized dim is 1 or 0 long in the traced
    draw (its stride says nothing). A view merging such a dim of one row into a fixed one
    (``flatten`` of a (1, 2) ``nonzero``) is laid out as a pick of that row (``[0]``), and
    taken as one."""
    if ref.shape == written.shape and ref.strides == written.strides:
        return dims
    base = list(zip(written.shape, written.strides, strict=False))
    view = list(zip(ref.shape, ref.strides, strict=False))
    if (ref.itemsize != written.itemsize or len(view) != len(ref.shape)
            or len(base) != len(written.shape)
            or any(base[d][1] == 0 and base[d][0] > 1 for d in dims)):
        return frozenset(range(len(ref.shape)))
    #: a data-sized dim the traced draw made 1 or 0 long: its stride says nothing
    unplaced = any(base[d][0] <= 1 for d in dims)

    def steps_along(stride: int, size: int) -> set[int]:
        return {
            d for d, (length, step) in enumerate(base)
            if length > 1 and stride < step * length and stride * (size - 1) >= step
        }

    spans = {j: steps_along(stride, size) for j, (size, stride) in enumerate(view) if size > 1}
    covered = set().union(*spans.values())
    return frozenset(
        j for j, (size, stride) in enumerate(view)
        if size == 0
        or (size > 1 and spans[j] & dims)
        or (size == 1 and unplaced)
        or (size == 1 and any(
            d not in covered and base[d][1] <= stride < base[d][1] * base[d][0] for d in dims
        ))
    )


#: Products: for each operand (by read position) the output dim each of its dims lands in
#: (None: contracted), counted from the right so batch dims line up.
_PRODUCT_DIMS: dict = {
    aten.mm: ((-2, None), (None, -1)),
    aten._int_mm: ((-2, None), (None, -1)),
    aten.bmm: ((-3, -2, None), (-3, None, -1)),
    aten.mv: ((-1, None), (None,)),
    aten.dot: ((None,), (None,)),
}
#: The same with an added operand first (``addmm(c, a, b)``: ``c`` broadcast to the output).
_PRODUCTS_WITH_ADDEND = {aten.addmm: aten.mm, aten.baddbmm: aten.bmm, aten.addmv: aten.mv}


def _product_dims(op: TracedOp, ref: TensorRef, read_dims: Sequence[frozenset[int]]) -> set[int]:
    """The output dims of a product that follow a data-sized dim of an operand: a dim the
    product contracts ends it, whatever the sizes (``x[m].T @ x[m]`` is d × d)."""
    key = op.func.overloadpacket
    reads = list(zip(op.reads, read_dims, strict=True))
    added = key in _PRODUCTS_WITH_ADDEND
    landing = _PRODUCT_DIMS[_PRODUCTS_WITH_ADDEND.get(key, key)]
    rank = len(ref.shape)
    dims = set()
    if added:
        addend, addend_dims = reads.pop(0)
        dims |= {rank - len(addend.shape) + d for d in addend_dims}
    for (_, operand_dims), lands in zip(reads, landing, strict=False):
        dims |= {rank + lands[d] for d in operand_dims if d < len(lands) and lands[d] is not None}
    return dims


def _written_dims(
    op: TracedOp, ref: TensorRef, read_dims: Sequence[frozenset[int]]
) -> frozenset[int]:
    """The dims of ``op``'s write ``ref`` that follow a data-sized dim of its reads (the
    data-sized dims of each read, as the op sees it: ``read_dims``). A product's come from its
    operands' (:func:`_product_dims`). Else a dim of a size data chose follows it (sized where
    it may not, never the other way), and so does one no read shows to be fixed: a dim is fixed
    only where, lined up with the reads from the left or from the right, a read has a fixed dim
    of its size there and none a data-sized one (the kept dims of a reduction, a broadcast
    operand's; not the rows of ``cat([x[m], y])``, however many ``y`` has)."""
    product = _product_rule(op)
    if product is not None:
        return frozenset(product(op, ref, read_dims))
    sources = _gathered_from(op, ref)
    if sources is not None:
        return frozenset(
            j for j, dim_sources in enumerate(sources)
            if any(d in read_dims[r] for r, d in dim_sources)
        )
    if _broadcasts_to(op, ref):
        # an elementwise op's dims are its operands', lined up from the right; one broadcast
        # to more (a dim of one row the data chose, times a fixed n) has the fixed size
        return frozenset(
            j for j, size in enumerate(ref.shape)
            if any(len(read.shape) - len(ref.shape) + j in dims
                   and read.shape[len(read.shape) - len(ref.shape) + j] == size
                   for read, dims in zip(op.reads, read_dims, strict=True))
        )
    kept = _reduction_kept(op, ref)
    if kept is not None:  # a reduction's dims are those it keeps of its input's
        return frozenset(j for j, d in enumerate(kept) if d in read_dims[0])
    chosen = {
        read.shape[d] for read, dims in zip(op.reads, read_dims, strict=True) for d in dims
    }
    rank = len(ref.shape)

    def fixed(position: int, size: int) -> bool:
        for lined_up in (
            [(read, dims, position) for read, dims in zip(op.reads, read_dims, strict=True)],
            [(read, dims, len(read.shape) - rank + position)
             for read, dims in zip(op.reads, read_dims, strict=True)],
        ):
            at = [(read, dims, p) for read, dims, p in lined_up if 0 <= p < len(read.shape)]
            if any(p in dims for _, dims, p in at):
                continue
            if any(read.shape[p] == size for read, _, p in at):
                return True
        return False

    return frozenset(
        j for j, size in enumerate(ref.shape) if size in chosen or not fixed(j, size)
    )


#: Gathers by integer indices: the output holds the indices' dims in place of those indexed
_GATHERS = frozenset({aten.index, aten.index_select, aten.embedding})


def _gathered_from(op: TracedOp, ref: TensorRef) -> list[list[tuple[int, int]]] | None:
    """For a gather by integer indices (``x[idx]``, ``x[:, i, j]``, ``index_select``,
    ``embedding``), the (read position, dim) each dim of its write ``ref`` comes from: the
    indices' dims (broadcast together) where the indexed dims were, the others of the source
    as they are. None for any other op, boolean masks, or a write of another rank."""
    if op.func is None or op.func.overloadpacket not in _GATHERS or len(op.reads) < 2:
        return None
    key = op.func.overloadpacket
    source_rank = len(op.reads[0].shape)
    index_reads = list(range(1, len(op.reads)))
    if key is aten.embedding:  # embedding(weight, indices): the rows of the weight
        at = [0]
    elif key is aten.index_select:
        at = [op.argument("dim") % source_rank]
    else:
        indices = op.argument("indices") or ()
        at = [d for d, index in enumerate(indices) if index is not None]
        if not at or any(read.dtype == "bool" for read in op.reads[1:]):
            return None
    # indices at consecutive dims stand in their place; apart, they come first
    first = at[0] if at == list(range(at[0], at[-1] + 1)) else 0
    index_rank = max(len(op.reads[r].shape) for r in index_reads)
    kept = [(0, d) for d in range(source_rank) if d not in at]
    index_dims = [
        [(r, len(op.reads[r].shape) - index_rank + j) for r in index_reads
         if len(op.reads[r].shape) - index_rank + j >= 0]
        for j in range(index_rank)
    ]
    sources = [[k] for k in kept[:first]] + index_dims + [[k] for k in kept[first:]]
    return sources if len(sources) == len(ref.shape) else None


def _broadcasts_to(op: TracedOp, ref: TensorRef) -> bool:
    """Whether ``op`` is elementwise (priced pointwise: arithmetic, casts, copies, ``where``)
    and each of its reads broadcasts to its write ``ref``."""
    rule = rule_for(op)
    if rule is None or rule.category is not Category.POINTWISE:
        return False
    return all(
        len(read.shape) <= len(ref.shape)
        and all(n in (1, m) for n, m in zip(reversed(read.shape), reversed(ref.shape),
                                             strict=False))
        for read in op.reads
    )


def _reduction_kept(op: TracedOp, ref: TensorRef) -> list[int | None] | None:
    """For a reduction over ``dim`` (an op whose schema has ``dim`` and ``keepdim``: ``sum``,
    ``amax``, ``max.dim``, ``var``…), the dim of its input each dim of its write ``ref`` is
    (None: a reduced dim kept as 1); None for any other op, or a write of another rank."""
    if "keepdim" not in op.argument_names or not op.reads:
        return None
    rank = len(op.reads[0].shape)
    dims = op.argument("dim")
    dims = range(rank) if dims is None or dims == [] else [dims] if isinstance(dims, int) else dims
    reduced = {d % rank for d in dims} if rank else set()
    if op.argument("keepdim", False):
        kept = [None if d in reduced else d for d in range(rank)]
    else:
        kept = [d for d in range(rank) if d not in reduced]
    return kept if len(kept) == len(ref.shape) else None


def _product_rule(op: TracedOp) -> Callable | None:
    if op.func is None:
        return None
    key = op.func.overloadpacket
    return _product_dims if key in _PRODUCT_DIMS or key in _PRODUCTS_WITH_ADDEND else None


def _deciding_reads(op: TracedOp) -> list[TensorRef]:
    """The reads whose values decide a data-sized op's output sizes: its boolean masks, or
    every read when none is one."""
    return [ref for ref in op.reads if ref.dtype == "bool"] or list(op.reads)


def _picked_dim(op: TracedOp) -> int:
    """The dim of a data-sized op's outputs whose size values choose: the first (the rows of
    ``nonzero``, the elements of ``masked_select``, ``unique``, ``bincount``), or for
    ``x[..., mask]`` the first indexed dim."""
    if op.func is None or op.func.overloadpacket not in _DATA_SIZED_ONLY_WITH_MASKS:
        return 0
    indices = op.argument("indices") or ()
    return next((d for d, index in enumerate(indices) if index is not None), 0)
