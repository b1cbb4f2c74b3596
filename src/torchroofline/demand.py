"""Stage 3 (bound side): the *necessary* work — what the kept values need, walked backwards.

The speed of light charges what any correct implementation must do, not what the traced program
happens to touch. Starting from the kept values (the views the model returns and the parts of
inputs or buffers it overwrites), every op maps the demanded elements of its outputs to the
demanded elements of its inputs (:data:`DEMAND_RULES`), and counts FLOPs only for demanded output
elements. An op whose outputs nobody demands costs nothing (dead code). Compulsory bytes are the
demanded elements of graph inputs, read once (all views of one storage united, inputs that share
a storage counted once), plus the kept elements, written once.

Where the exact set cannot be known (data-dependent indices, views that are not index boxes) the
rules charge *less*, never more: a bound may be loose, never wrong. The *moved* work (what eager
or Inductor kernels really read and write) stays in :mod:`costs` and :mod:`fusion`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import torch
from torch.utils._pytree import tree_leaves, tree_map

from .costs import (
    DESTINATION_ACCESS,
    SHAPE_ONLY_TEMPLATES,
    Category,
    FlopCount,
    MatmulKind,
    OpKey,
    OpRecord,
    add_rules,
    aten,
    indexed_positions,
    lookup,
    op_keys,
    tensor_bytes,
)
from .intercept import RNN_CALLS
from .regions import (
    Box,
    IndexSet,
    Region,
    Storages,
    box_size,
    fraction_of,
    full_box,
    mapped_set,
    normalize,
    positions_to_set,
    range_intersection,
    set_intersection,
    set_size,
)
from .trace import TensorRef, Trace, TracedOp

# --- Demand rules --------------------------------------------------------------------------


@dataclass(frozen=True)
class Demand:
    """What one op needs: a region per read (aligned with ``TracedOp.reads``, in each read's view
    coordinates), the necessary FLOPs, extra demand on other values (a structured operand's
    source) and the name of the structure rule applied, if any."""

    inputs: tuple[Region, ...]
    flops: FlopCount
    extra: tuple[tuple[TensorRef, Region], ...] = ()
    structure: str | None = None


@dataclass(frozen=True)
class _Context:
    """What a rule may look at: the traced op, its costed record and the demanded outputs."""

    op: TracedOp
    record: OpRecord
    outputs: tuple[Region, ...]
    producers: dict[int, TracedOp] = field(repr=False)
    #: the part of ``outputs`` that later ops read or the model returns, as opposed to the end
    #: state of an input or buffer wanting it: what the op leaves unchanged there is already in
    #: memory, so only this part needs the old contents
    read: tuple[Region, ...] = ()
    #: values that depend only on shapes and constants, evaluated (:func:`known_values`)
    known: dict[int, torch.Tensor] = field(default_factory=dict, repr=False)
    #: value id → how many ops read it (the model keeping it counts as one)
    readers: dict[int, int] = field(default_factory=dict, repr=False)

    @property
    def fraction(self) -> float:
        """Largest demanded share of any output (outputs of one op are computed together)."""
        return max(
            (
                fraction_of(r, math.prod(w.shape))
                for r, w in zip(self.outputs, self.op.writes, strict=False)
            ),
            default=0.0,
        )

    @property
    def output(self) -> Region:
        """Demand on the first output united with that of same-shaped others."""
        shape = self.op.writes[0].shape
        region = Region()
        for demanded, ref in zip(self.outputs, self.op.writes, strict=True):
            if ref.shape == shape:
                region = region.union(demanded)
        return region

    def loaded(self, position: int) -> int:
        """Elements of read ``position`` the moved cost rule says the op loads (0 for a
        destination it overwrites, an ``out=`` buffer, a template it takes only the shape of)."""
        if position == 0 and not SHAPE_ONLY_TEMPLATES.isdisjoint(op_keys(self.op)):
            return 0
        moved = self.record.reads
        if len(moved) == len(self.op.reads):
            return moved[position].elements
        value_id = self.op.reads[position].value_id
        return max((r.elements for r in moved if r.value_id == value_id), default=0)

    def argument(self, name: str, default: Any = None) -> Any:
        return self.op.argument(name, default)


Rule = Callable[[_Context], Demand]
#: Keyed as the cost registry is (:func:`costs.add_rules`): aten packets or single overloads.
DEMAND_RULES: dict[OpKey, Rule] = {}


def demand_rule(ops: Sequence[OpKey]) -> Callable[[Rule], Rule]:
    """Decorator: register a demand rule for ``ops`` (no key twice)."""

    def decorate(rule: Rule) -> Rule:
        add_rules(DEMAND_RULES, ops, rule, "demand")
        return rule

    return decorate


def _op_set(ops: Sequence[OpKey]) -> frozenset[OpKey]:
    """``ops`` keyed as the registries key them (each with its in-place twin)."""
    table: dict[OpKey, bool] = {}
    add_rules(table, ops, True, "op-set")
    return frozenset(table)


def _one_of(op: TracedOp, keys: Collection[OpKey]) -> bool:
    """Whether ``op`` is one of ``keys`` (by its overload or its packet)."""
    return any(key in keys for key in op_keys(op))


def _scaled(flops: FlopCount, share: float) -> FlopCount:
    return replace(flops, tensor=int(flops.tensor * share), vector=int(flops.vector * share))


#: Recurrences: any output needs every step, so any demand needs all of the inputs.
RECURRENT = _op_set([getattr(aten, name) for name in RNN_CALLS])


def _proportional(context: _Context) -> Demand:
    """Ops with no rule of their own. A fully demanded output (or any output of a recurrence)
    needs every element the op loads and all its FLOPs. A partly demanded one: a row-wise
    reduction or normalisation (category reduction) needs the same share of each input, as a
    count with no position; for other ops (pads, folds…) which inputs a part needs is unknown,
    so none are charged — only the same share of the FLOPs."""
    share = 1.0 if _one_of(context.op, RECURRENT) else context.fraction
    row_wise = context.record.category is Category.REDUCTION
    inputs = []
    for position, ref in enumerate(context.op.reads):
        loaded = context.loaded(position)
        if share >= 1.0 and loaded >= ref.elements:
            inputs.append(Region.of([full_box(ref.shape)]))
        elif share >= 1.0 or row_wise:
            inputs.append(Region(opaque=int(loaded * share)))
        else:
            inputs.append(Region())
    return Demand(tuple(inputs), _scaled(context.record.flops, share))


def _broadcast(region: Region, out_shape: Sequence[int], in_shape: Sequence[int]) -> Region | None:
    """A demanded output region seen from a broadcast input (None: shapes do not broadcast)."""
    lead = len(out_shape) - len(in_shape)
    if lead < 0:
        return None
    for size, out_size in zip(in_shape, out_shape[lead:], strict=True):
        if size not in (1, out_size):
            return None
    boxes = [
        tuple((range(1),) if size == 1 else box[lead + dim] for dim, size in enumerate(in_shape))
        for box in region.boxes
    ]
    out_elements = math.prod(out_shape)
    return Region.of(boxes, region.opaque * math.prod(in_shape) // max(out_elements, 1))


def pointwise_demand(context: _Context) -> Demand:
    """Every pointwise op (the rule for Category.POINTWISE): element i of the output needs
    element i of each (broadcast) input it loads — none of a destination it overwrites or a
    template it takes only the shape of."""
    region = context.output
    out_shape = context.op.writes[0].shape
    inputs = []
    for position, ref in enumerate(context.op.reads):
        if not context.loaded(position):
            inputs.append(Region())
            continue
        mapped = _broadcast(region, out_shape, ref.shape)
        if mapped is None:
            return _proportional(context)
        inputs.append(mapped)
    share = fraction_of(region, math.prod(out_shape))
    return Demand(tuple(inputs), _scaled(context.record.flops, share))


def _reduced_dims(dims: Any, rank: int) -> set[int]:
    if dims is None or dims == [] or dims == ():
        return set(range(rank))
    if isinstance(dims, int):
        dims = [dims]
    return {d % rank for d in dims} if rank else set()


def _expand_reduced(box: Box, in_shape: Sequence[int], reduced: set[int], keepdim: bool) -> Box:
    sets = []
    remaining = iter(box)
    for dim, size in enumerate(in_shape):
        if dim in reduced:
            if keepdim:
                next(remaining)
            sets.append((range(size),))
        else:
            sets.append(next(remaining))
    return tuple(sets)


#: Reductions whose result over a size-1 dimension is the input itself (no arithmetic) or a
#: constant (no input at all). See :data:`STRUCTURE_RULES`.
_IDENTITY_WHEN_SIZE_ONE = _op_set(
    [
        aten.sum,
        aten.mean,
        aten.amax,
        aten.amin,
        aten.max.default,
        aten.max.dim,
        aten.min.default,
        aten.min.dim,
        aten.prod,
        aten.nansum,
        aten.any,
        aten.all,
        aten.logsumexp,
        aten.linalg_vector_norm,
        aten.norm,
        aten.var_mean,
        aten.std_mean,
    ]
)


@demand_rule(
    [
        aten.sum,
        aten.mean,
        aten.amax,
        aten.amin,
        aten.prod,
        aten.any,
        aten.all,
        aten.var,
        aten.std,
        aten.var_mean,
        aten.std_mean,
        aten.argmax,
        aten.argmin,
        aten.linalg_vector_norm,
        aten.logsumexp,
        aten.nansum,
        aten.max.default,
        aten.max.dim,
        aten.min.default,
        aten.min.dim,
        aten.norm,
    ]
)
def reduction_demand(context: _Context) -> Demand:
    """Each output element needs the input over the reduced dims at its own index elsewhere."""
    source = context.op.reads[0]
    if len(context.op.writes) == 0 or not source.shape:
        return _proportional(context)
    dims = context.argument("dim")
    keepdim = bool(context.argument("keepdim", False))
    reduced = _reduced_dims(dims, len(source.shape))
    region = context.output
    if not reduced or any(
        len(box) != len(source.shape) - (0 if keepdim else len(reduced)) for box in region.boxes
    ):
        return _proportional(context)
    if reduced == {len(source.shape) - 1} and _one_of(context.op, _LINEAR_REDUCTIONS):
        rewritten = _reduced_product(context, region)
        if rewritten is not None:
            return rewritten
    share = fraction_of(region, math.prod(context.op.writes[0].shape))
    if all(source.shape[d] == 1 for d in reduced):
        if _one_of(context.op, _IDENTITY_WHEN_SIZE_ONE):
            boxes = [_expand_reduced(b, source.shape, reduced, keepdim) for b in region.boxes]
            inputs = (Region.of(boxes, region.opaque), *[Region()] * (len(context.op.reads) - 1))
            return Demand(inputs, FlopCount(), structure="size-1 reduction")
        return Demand(
            tuple(Region() for _ in context.op.reads), FlopCount(), structure="size-1 reduction"
        )
    boxes = [_expand_reduced(b, source.shape, reduced, keepdim) for b in region.boxes]
    if _one_of(context.op, _IDENTITY_WHEN_SIZE_ONE) and all(
        len(source.strides) == len(source.shape) and source.strides[d] == 0 for d in reduced
    ):
        # every reduced element is the same one (x.expand(n, m).sum(0) = n·x): one op each
        inputs = (Region.of(boxes), *[Region()] * (len(context.op.reads) - 1))
        return Demand(inputs, FlopCount(vector=region.count), structure="broadcast reduction")
    # c outputs with no position need at least c whole reduced lines
    line = math.prod(source.shape[d] for d in reduced)
    inputs = (Region.of(boxes, region.opaque * line), *[Region()] * (len(context.op.reads) - 1))
    return Demand(inputs, _scaled(context.record.flops, share))


_LINEAR_REDUCTIONS = _op_set([aten.sum, aten.mean])


def _reduced_product(context: _Context, region: Region) -> Demand | None:
    """A sum or mean over the columns of a matrix product that nothing else reads, priced as
    the cheaper form a generated kernel computes: (x @ W + b).sum(1) = x @ W.sum(1) + b.sum(),
    K·N adds to reduce W (N for b), then 2·K per demanded row (a matrix-vector product) and a
    divide per row for a mean — never more than the product and the reduction as traced.
    None where the rule does not apply."""
    source = context.op.reads[0]
    producer = context.producers.get(source.value_id)
    if (
        producer is None
        or not _one_of(producer, _PRODUCTS)
        or len(source.shape) != 2
        or not _as_written(source, producer.writes[0])
        or context.readers.get(source.value_id, 0) != 1
        or producer.argument("beta", 1) != 1
        or producer.argument("alpha", 1) != 1
    ):
        return None
    *bias, left, right = producer.reads
    rows_of = [box[0] for box in region.boxes]
    inner, columns = right.shape
    rows = set_size(normalize(r for index_set in rows_of for r in index_set)) + region.opaque
    reduce_flops = inner * columns + sum(ref.elements for ref in bias)
    vector = reduce_flops + (rows if _one_of(context.op, _op_set([aten.mean])) else 0)
    tensor = 2 * inner * rows
    traced = 2 * inner * columns * rows + columns * rows
    if tensor + vector >= traced:
        return None
    left_region = Region.of(
        [(index_set, (range(inner),)) for index_set in rows_of], region.opaque * inner
    )
    extra = ((left, left_region), (right, Region.of([full_box(right.shape)])))
    extra += tuple((ref, Region.of([full_box(ref.shape)])) for ref in bias)
    flops = FlopCount(tensor=tensor, vector=vector, kind=MatmulKind.MATMUL)
    return Demand((Region(),), flops, extra, structure="reduced product")


#: Matrix products a column reduction can be moved into (:func:`_reduced_product`).
_PRODUCTS = _op_set([aten.mm, aten.addmm])


_CONSTANT_WHEN_SIZE_ONE = _op_set(
    [aten._softmax, aten.softmax, aten._safe_softmax, aten._log_softmax, aten.log_softmax]
)
_SCANS = _op_set([aten.cumsum, aten.cumprod, aten.logcumsumexp, aten.cummax, aten.cummin])


def _line_needed(op: TracedOp, demanded: IndexSet, line: int) -> IndexSet:
    """Positions along ``dim`` that demanded outputs need: a scan (cumsum, cummax…) the prefix
    up to the last demanded position, everything else the whole line."""
    if _one_of(op, _SCANS) and demanded:
        return (range(0, max(r[-1] for r in demanded if r) + 1),)
    return (range(line),)


@demand_rule(
    [
        aten._softmax,
        aten.softmax,
        aten._safe_softmax,
        aten._log_softmax,
        aten.log_softmax,
        aten.cumsum,
        aten.cumprod,
        aten.logcumsumexp,
        aten.cummax,
        aten.cummin,
        aten.sort,
        aten.topk,
        aten.kthvalue,
        aten.median,
        aten.mode,
        aten.nanmedian,
    ]
)
def along_dim_demand(context: _Context) -> Demand:
    """Each output element needs the whole input line along ``dim`` through its index."""
    source = context.op.reads[0]
    rank = len(source.shape)
    if not rank:
        return _proportional(context)
    dim = context.argument("dim", -1) % rank
    if source.shape[dim] == 1 and _one_of(context.op, _CONSTANT_WHEN_SIZE_ONE):
        return Demand((Region(),), FlopCount(), structure="size-1 normalisation")
    region = context.output
    if any(len(box) != rank for box in region.boxes):
        return _proportional(context)
    line = source.shape[dim]
    boxes = [
        (*box[:dim], _line_needed(context.op, box[dim], line), *box[dim + 1 :])
        for box in region.boxes
    ]
    # c outputs with no position lie on at least ⌈c / line⌉ lines
    needed = Region.of(boxes, -(-region.opaque // line) * line if line else 0)
    flops = _shared_statistics_flops(context, needed, region)
    return Demand((needed, *(Region() for _ in context.op.reads[1:])), flops)


#: Batch norms, in training (batch statistics per channel) or eval (running statistics: a
#: per-channel scale and shift), as each PyTorch release traces them.
_BATCH_NORMS = (
    aten.native_batch_norm,
    aten._native_batch_norm_legit,
    aten._native_batch_norm_legit_functional,
    aten._native_batch_norm_legit_no_training,
    aten.cudnn_batch_norm,
    aten.miopen_batch_norm,
)

#: FLOPs per demanded output element that an op whose outputs share their line's (row's,
#: group's) statistics spends after them: softmax's divide, log_softmax's subtract, a norm's
#: normalise and affine (2 + 2). Its other FLOPs (:data:`costs.REDUCTION_FLOPS_PER_INPUT_ELEMENT`
#: less these) build the statistics, once per element of every line a demanded output needs.
#: Ops not listed (sort, topk, scans) spend everything on the line.
APPLY_FLOPS: dict[OpKey, int] = {}
add_rules(APPLY_FLOPS, [aten._softmax, aten.softmax, aten._safe_softmax], 1, "apply-flops")
add_rules(APPLY_FLOPS, [aten._log_softmax, aten.log_softmax], 1, "apply-flops")
add_rules(APPLY_FLOPS, [aten.native_layer_norm, aten.native_group_norm], 4, "apply-flops")
add_rules(APPLY_FLOPS, [aten._fused_rms_norm], 2, "apply-flops")  # multiply by rstd, weight
add_rules(APPLY_FLOPS, _BATCH_NORMS, 4, "apply-flops")


def _shared_statistics_flops(context: _Context, needed: Region, demanded: Region) -> FlopCount:
    """FLOPs of an op whose output elements share their line's statistics: a demanded element
    costs its whole line's statistics, not 1/line of them — the statistics FLOPs per input
    element over every ``needed`` input element, then :data:`APPLY_FLOPS` per ``demanded``
    output element."""
    moved = context.record.flops
    apply = lookup(APPLY_FLOPS, context.op) or 0
    outputs = math.prod(context.op.writes[0].shape)
    statistics = max(moved.vector - apply * outputs, 0)
    vector = statistics * needed.count // max(math.prod(context.op.reads[0].shape), 1)
    vector += apply * demanded.count
    return replace(moved, vector=min(vector, moved.vector))


@dataclass(frozen=True)
class _Statistics:
    """How a normalisation's statistics cover its input: each one spans the ``whole`` dims and,
    along dim 1, ``group`` consecutive channels; the other input dims index the statistics (a
    statistics output's dims, in order). ``channel_params``: its weight, bias and running
    statistics are per channel (dim 1), else per element of the trailing dims."""

    whole: frozenset[int]
    group: int = 1
    channel_params: bool = False

    def line(self, shape: Sequence[int]) -> int:
        """Input elements one statistic spans."""
        return self.group * math.prod(shape[d] for d in self.whole)

    def channels(self, index_set: IndexSet, size: int) -> IndexSet:
        """The channels whose group holds any of ``index_set`` (group indices when
        ``size`` counts groups)."""
        groups = {c // self.group for r in index_set for c in r}
        return normalize(range(g * self.group, min((g + 1) * self.group, size)) for g in groups)

    def input_box(self, box: Box, shape: Sequence[int]) -> Box:
        """The input elements the statistics of an output box (in input coordinates) span."""
        return tuple(
            (range(size),)
            if dim in self.whole
            else self.channels(box[dim], size)
            if dim == 1 and self.group > 1
            else box[dim]
            for dim, size in enumerate(shape)
        )


#: Normalisations keyed by op: (the traced op, its input's shape) → how its statistics cover
#: the input.
STATISTICS: dict[OpKey, Callable[[_Context, Sequence[int]], _Statistics]] = {}


def _trailing_statistics(context: _Context, shape: Sequence[int]) -> _Statistics:
    """Layer and RMS norm: one statistic per row of the ``normalized_shape`` trailing dims."""
    normalized = len(context.argument("normalized_shape", ()))
    return _Statistics(frozenset(range(len(shape) - normalized, len(shape))))


def _group_statistics(context: _Context, shape: Sequence[int]) -> _Statistics:
    """Group norm: one statistic per (sample, group of C/G channels) over all positions."""
    groups = context.argument("group", 1) or 1
    return _Statistics(frozenset(range(2, len(shape))), max(shape[1] // groups, 1), True)


def _batch_statistics(context: _Context, shape: Sequence[int]) -> _Statistics:
    """Batch norm: in training one statistic per channel over the batch and positions; in eval
    the running statistics make it a per-channel scale and shift (nothing shared)."""
    training = context.argument("training", False)
    whole = frozenset(d for d in range(len(shape)) if d != 1) if training else frozenset()
    return _Statistics(whole, channel_params=True)


add_rules(STATISTICS, [aten.native_layer_norm, aten._fused_rms_norm], _trailing_statistics,
          "statistics")
add_rules(STATISTICS, [aten.native_group_norm], _group_statistics, "statistics")
add_rules(STATISTICS, _BATCH_NORMS, _batch_statistics, "statistics")


@demand_rule([aten.native_layer_norm, aten._fused_rms_norm, aten.native_group_norm,
              *_BATCH_NORMS])
def norm_demand(context: _Context) -> Demand:
    """A normalised element needs every input element its statistics span (its row, its
    sample's channel group, its channel over the batch), so does a demanded statistic; the
    weight and bias at the demanded elements. FLOPs: the statistics of every needed line,
    then the normalise and affine of each demanded element."""
    source = context.op.reads[0]
    shape = source.shape
    statistics = lookup(STATISTICS, context.op)(context, shape)
    kept = [d for d in range(len(shape)) if d not in statistics.whole]
    main = context.outputs[0]
    if not shape or any(len(box) != len(shape) for box in main.boxes):
        return _proportional(context)
    boxes = [statistics.input_box(box, shape) for box in main.boxes]
    opaque = main.opaque
    for demanded, ref in zip(context.outputs[1:], context.op.writes[1:], strict=False):
        for box in demanded.boxes:
            if len(box) == len(shape):  # kept as size-1 dims
                boxes.append(statistics.input_box(box, shape))
            elif len(box) == len(kept):  # one dim per statistic index; dim 1 in groups
                at = dict(zip(kept, box, strict=True))
                if 1 in at and statistics.group > 1:
                    at[1] = mapped_set(at[1], 0, statistics.group)
                full = tuple(at.get(d, (range(size),)) for d, size in enumerate(shape))
                boxes.append(statistics.input_box(full, shape))
        opaque += demanded.opaque * (statistics.line(shape) if ref.shape != shape else 1)
    line = statistics.line(shape)
    needed = Region.of(boxes, -(-opaque // line) * line if line else 0)
    params = []
    for ref in context.op.reads[1:]:
        if statistics.channel_params and len(ref.shape) == 1 and len(shape) > 1:
            params.append(Region.of([(box[1],) for box in main.boxes]))
        else:
            params.append(_broadcast(main, shape, ref.shape) or Region())
    return Demand((needed, *params), _shared_statistics_flops(context, needed, main))


# --- Matmul-class ------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Walk:
    """One axis of a matmul operand seen as a view of a builder's matrix: operand index i sits
    at coordinate ``origin + i·step`` of the builder's axis ``axis`` (0: rows, 1: columns)."""

    axis: int
    origin: int
    step: int
    size: int

    def indices(self, low: int, high: int) -> IndexSet:
        """The operand indices whose coordinate lies in [low, high)."""
        first = max(-(-(low - self.origin) // self.step), 0)
        last = min(-(-(high - self.origin) // self.step), self.size)
        return (range(first, last),) if first < last else ()


@dataclass(frozen=True)
class _MatrixView:
    """A matmul operand as a strided view (a slice, a transpose, a broadcast batch) of the
    matrices an op built: its free axis (rows of a left operand, columns of a right one) and
    its contracted axis each walk one axis of the builder's matrices; ``batch`` leading
    broadcast dims come before the builder's own batch dims."""

    free: _Walk
    contracted: _Walk
    batch: int


def _matrix_view(ref: TensorRef, written: TensorRef, free_dim: int) -> _MatrixView | None:
    """``ref`` as a view of ``written`` (a contiguous (batch of) matrices), or None if it is not
    one whose two matrix axes each walk one axis of ``written``'s matrices."""
    rank = len(written.shape)
    batch = len(ref.shape) - rank
    if rank < 2 or batch < 0 or len(ref.strides) != len(ref.shape):
        return None
    height, width = written.shape[-2:]
    same_batch = ref.shape[batch:-2] == written.shape[:-2] and ref.strides[batch:-2] == (
        written.strides[:-2]
    )
    start = ref.offset - written.offset
    if (
        not same_batch
        or any(ref.strides[:batch])
        or written.strides[-2:] != (width, 1)
        or not 0 <= start < height * width
    ):
        return None
    steps: list[tuple[int, int] | None] = []
    for size, stride in zip(ref.shape[-2:], ref.strides[-2:], strict=True):
        if size == 1:
            steps.append(None)  # its step is never taken: the other axis decides
        elif stride > 0 and stride % width == 0:
            steps.append((0, stride // width))
        elif 0 < stride < width:
            steps.append((1, stride))
        else:
            return None
    free_step, other_step = steps if free_dim == -2 else steps[::-1]
    free_axis = free_step[0] if free_step else 1 - other_step[0] if other_step else 0
    other_axis = other_step[0] if other_step else 1 - free_axis
    if free_axis == other_axis:
        return None
    origin = divmod(start, width)
    free_size, other_size = ref.shape[free_dim], ref.shape[-1 if free_dim == -2 else -2]
    walks = (
        _Walk(free_axis, origin[free_axis], free_step[1] if free_step else 1, free_size),
        _Walk(other_axis, origin[other_axis], other_step[1] if other_step else 1, other_size),
    )
    if any(w.origin + (w.size - 1) * w.step >= (height, width)[w.axis] for w in walks):
        return None
    return _MatrixView(*walks, batch)


@dataclass(frozen=True)
class _Diagonal:
    """An operand with at most one nonzero per row and column, a diagonal of some offset:
    free index f pairs with contracted index ``pairs[f][0]``, whose value is element
    ``pairs[f][1]`` along the last dim of ``vector`` (None: ``eye``, or a scaled diagonal whose
    vector is charged nothing — less). ``complete``: every free index has a partner."""

    pairs: dict[int, tuple[int, int]]
    vector: TensorRef | None
    complete: bool

    def unsourced(self) -> _Diagonal:
        return replace(self, vector=None)

    def product(self, context: _Context, region: Region, position: int) -> Demand:
        """out[i, j] = d[i]·B[partner(i), j] (left) or A[i, partner(j)]·d[j] (right), zero for
        an index with no partner: one multiply per nonzero output (none for ``eye``)."""
        lead = len(context.op.writes[0].shape) - 2
        free_dim = lead + position
        other_boxes, vector_boxes, products = [], [], 0
        for box in region.boxes:
            hits = [f for r in box[free_dim] for f in r if f in self.pairs]
            if not hits:
                continue
            partners = positions_to_set(self.pairs[f][0] for f in hits)
            kept = box[lead + 1 - position]  # the other operand's free positions
            other_boxes.append(
                (*box[:lead], partners, kept) if position == 0 else (*box[:lead], kept, partners)
            )
            batch = box[lead + 1 - len(self.vector.shape) : lead] if self.vector else ()
            vector_boxes.append((*batch, positions_to_set(self.pairs[f][1] for f in hits)))
            products += len(hits) * set_size(kept) * math.prod(set_size(s) for s in box[:lead])
        # an output with no position may lie where the diagonal has no partner: only a full
        # diagonal maps c of them to c elements of the other operand
        opaque = region.opaque if self.complete else 0
        operands = [Region(), Region.of(other_boxes, opaque)][:: 1 - 2 * position]
        if self.vector is None:
            return Demand((*_biases(context, region), *operands), FlopCount(), structure=_DIAGONAL)
        picked = Region.of(vector_boxes, min(opaque, self.vector.elements))
        flops = FlopCount(vector=products + opaque)
        extra = ((self.vector, picked),)
        return Demand((*_biases(context, region), *operands), flops, extra, structure=_DIAGONAL)


def _diagonal(view: _MatrixView, offset: int, vector: TensorRef | None) -> _Diagonal:
    """Builder element (r, c) is nonzero only where c − r = ``offset``; its value is vector
    element min(r, c) (diag_embed's ``out[..., i, i + offset] = v[..., i]``, and for a
    negative offset ``out[..., i − offset, i] = v[..., i]``)."""
    free, contracted = view.free, view.contracted
    pairs = {}
    for f in range(free.size):
        coordinate = free.origin + f * free.step
        target = coordinate + offset if free.axis == 0 else coordinate - offset
        partner, remainder = divmod(target - contracted.origin, contracted.step)
        if not remainder and 0 <= partner < contracted.size:
            pairs[f] = (partner, min(coordinate, target))
    return _Diagonal(pairs, vector, len(pairs) == free.size)


@dataclass(frozen=True)
class _Block:
    """A dense block of a block-diagonal operand: the operand's free and contracted positions
    inside it, and where operand positions fall in its ``source`` (read ``position`` of the
    builder): ``origin + i·step`` along the builder axis ``free_axis`` or the other one."""

    free: IndexSet
    contracted: IndexSet
    source: TensorRef
    position: int
    free_axis: int
    free_walk: tuple[int, int]
    contracted_walk: tuple[int, int]

    def source_box(self, hits: IndexSet, contracted: IndexSet | None = None) -> Box:
        """The source elements the free positions ``hits`` need, at the contracted positions
        ``contracted`` (all of the block's by default); a 1-D source is one row of the
        matrix, a 0-d one a single element."""
        free = mapped_set(hits, *self.free_walk)
        other = mapped_set(self.contracted if contracted is None else contracted,
                           *self.contracted_walk)
        box = (free, other) if self.free_axis == 0 else (other, free)
        return box[2 - len(self.source.shape) :]


@dataclass(frozen=True)
class _BlockDiagonal:
    """An operand whose nonzeros are dense blocks on its diagonal (``torch.block_diag``)."""

    blocks: tuple[_Block, ...]
    charged: bool = True

    def unsourced(self) -> _BlockDiagonal:
        return replace(self, charged=False)

    def product(self, context: _Context, region: Region, position: int) -> Demand:
        """Each block multiplies only the other operand's slice facing it: 2·(block width)
        FLOPs per output element in the block's rows (columns); the zero blocks cost nothing."""
        lead = len(context.op.writes[0].shape) - 2
        free_dim = lead + position
        other_boxes, tensor = [], 0
        sources: dict[int, tuple[TensorRef, list[Box]]] = {}  # by builder read position
        for box in region.boxes:
            kept = box[lead + 1 - position]
            for block in self.blocks:
                hits = set_intersection(box[free_dim], block.free)
                if not hits:
                    continue
                other_boxes.append(
                    (*box[:lead], block.contracted, kept)
                    if position == 0
                    else (*box[:lead], kept, block.contracted)
                )
                sources.setdefault(block.position, (block.source, []))[1].append(
                    block.source_box(hits)
                )
                tensor += (
                    2 * set_size(block.contracted) * set_size(hits) * set_size(kept)
                    * math.prod(set_size(s) for s in box[:lead])
                )
        operands = [Region(), Region.of(other_boxes)][:: 1 - 2 * position]
        extra = tuple((ref, Region.of(boxes)) for ref, boxes in sources.values())
        flops = FlopCount(tensor=tensor, kind=MatmulKind.MATMUL)
        inputs = (*_biases(context, region), *operands)
        extra = extra if self.charged else ()
        return Demand(inputs, flops, extra, structure="block-diagonal matmul")


def _block_diagonal(view: _MatrixView, sources: Sequence[TensorRef]) -> _BlockDiagonal:
    """``block_diag(A₁, A₂, …)``: Aₖ (a 1-D tensor is one row, a 0-d one 1×1) sits at the rows
    and columns after the blocks before it."""
    blocks, corner = [], [0, 0]
    free, contracted = view.free, view.contracted
    for position, source in enumerate(sources):
        size = (*(1,) * (2 - len(source.shape)), *source.shape)
        low, other_low = corner[free.axis], corner[contracted.axis]
        free_positions = free.indices(low, low + size[free.axis])
        contracted_positions = contracted.indices(other_low, other_low + size[contracted.axis])
        if free_positions and contracted_positions:
            blocks.append(
                _Block(
                    free_positions,
                    contracted_positions,
                    source,
                    position,
                    free.axis,
                    (free.origin - low, free.step),
                    (contracted.origin - other_low, contracted.step),
                )
            )
        corner = [corner[0] + size[0], corner[1] + size[1]]
    return _BlockDiagonal(tuple(blocks))


_Structure = _Diagonal | _BlockDiagonal
_DIAGONAL = "diagonal matmul"
#: Ops that build matrices of known structure, keyed as the other registries: (the traced
#: builder, the operand's view of its output) → the structure, or None.
MATRIX_BUILDERS: dict[OpKey, Callable[[_Context, TracedOp, _MatrixView], _Structure | None]] = {}


def matrix_builder(ops: Sequence[OpKey]) -> Callable:
    """Decorator: register a structured-matrix builder for ``ops`` (no key twice)."""

    def decorate(builder: Callable) -> Callable:
        add_rules(MATRIX_BUILDERS, ops, builder, "matrix-builder")
        return builder

    return decorate


def _built_offset(builder: TracedOp) -> int | None:
    """The offset of the diagonal that ``builder`` (diag_embed, diag, diagflat) writes on the
    last two dims of its output from a vector; None when it extracts a diagonal instead (its
    output has fewer dims than its input) or writes on other dims."""
    rank = len(builder.writes[0].shape)
    if rank < 2 or not builder.reads or len(builder.reads[0].shape) >= rank:
        return None
    dims = (builder.argument("dim1", -2) % rank, builder.argument("dim2", -1) % rank)
    if dims != (rank - 2, rank - 1):
        return None
    return builder.argument("offset", builder.argument("diagonal", 0))


def _boxed_vector(builder: TracedOp) -> TensorRef | None:
    """The vector a diagonal builder reads, if a vector index is a position along its last dim
    (diagflat flattens a tensor of any rank: its index has no box there)."""
    vector = builder.reads[0]
    return vector if len(vector.shape) == len(builder.writes[0].shape) - 1 else None


@matrix_builder([aten.diag_embed, aten.diag, aten.diagflat])
def _built_diagonal(context: _Context, builder: TracedOp, view: _MatrixView) -> _Diagonal | None:
    offset = _built_offset(builder)
    return None if offset is None else _diagonal(view, offset, _boxed_vector(builder))


@matrix_builder([aten.eye])
def _built_identity(context: _Context, builder: TracedOp, view: _MatrixView) -> _Diagonal:
    return _diagonal(view, 0, None)


@matrix_builder([aten.block_diag])
def _built_blocks(context: _Context, builder: TracedOp, view: _MatrixView) -> _BlockDiagonal:
    return _block_diagonal(view, builder.reads)


def _scaling(dividend_only: bool) -> Callable[[_Context, TracedOp, _MatrixView], _Structure | None]:
    """A structured matrix times (or, as the dividend, over) a scalar keeps its zeros; its
    source is then charged nothing (less)."""

    def built(context: _Context, builder: TracedOp, view: _MatrixView) -> _Structure | None:
        matrices = [r for r in builder.reads if math.prod(r.shape) > 1]
        if len(matrices) != 1 or (dividend_only and builder.reads[0] is not matrices[0]):
            return None
        inner = context.producers.get(matrices[0].value_id)
        if inner is None or not inner.writes or not _as_written(matrices[0], inner.writes[0]):
            return None
        written = builder.writes[0]
        if (written.shape, written.strides) != (inner.writes[0].shape, inner.writes[0].strides):
            return None
        builder_of = lookup(MATRIX_BUILDERS, inner)
        structure = builder_of(context, inner, view) if builder_of else None
        return structure.unsourced() if structure else None

    return built


matrix_builder([aten.mul])(_scaling(dividend_only=False))
matrix_builder([aten.div])(_scaling(dividend_only=True))


def _as_written(ref: TensorRef, written: TensorRef) -> bool:
    return (ref.shape, ref.strides, ref.offset) == (written.shape, written.strides, written.offset)


def _structure(context: _Context, ref: TensorRef, free_dim: int) -> _Structure | None:
    """The known structure of a matmul operand, if an op in :data:`MATRIX_BUILDERS` built it."""
    producer = context.producers.get(ref.value_id)
    builder = lookup(MATRIX_BUILDERS, producer) if producer is not None else None
    if builder is None or not producer.writes:
        return None
    view = _matrix_view(ref, producer.writes[0], free_dim)
    return builder(context, producer, view) if view is not None else None


@demand_rule([aten.mm, aten.addmm, aten.bmm, aten.baddbmm])
def matmul_demand(context: _Context) -> Demand:
    """out[..., i, j] needs row i of A and column j of B: 2·K FLOPs per demanded element. A
    structured operand (a diagonal, a block diagonal) needs only its nonzeros; a batch both
    operands broadcast is computed once."""
    op = context.op
    *bias, left, right = op.reads
    region = context.output
    out_shape = op.writes[0].shape
    if any(len(box) != len(out_shape) for box in region.boxes) or len(left.shape) != len(out_shape):
        return _proportional(context)
    for position, ref in ((0, left), (1, right)):
        structure = _structure(context, ref, -2 if position == 0 else -1)
        if structure is not None:
            return structure.product(context, region, position)
    reduction = left.shape[-1]
    lead = len(out_shape) - 2
    left_boxes = [(*b[:lead], b[-2], (range(reduction),)) for b in region.boxes]
    right_boxes = [(*b[:lead], (range(reduction),), b[-1]) for b in region.boxes]
    inputs = list(_biases(context, region))
    # c outputs with no position span at least ⌈c/N⌉ rows of A and ⌈c/M⌉ columns of B
    rows, columns = out_shape[-2], out_shape[-1]
    left_opaque = -(-region.opaque // max(columns, 1)) * reduction
    right_opaque = -(-region.opaque // max(rows, 1)) * reduction
    inputs += [Region.of(left_boxes, left_opaque), Region.of(right_boxes, right_opaque)]
    computed = region
    structure = None
    if lead and _broadcast_batch(left) and _broadcast_batch(right):
        computed = Region.of(
            [((range(1),), *b[1:]) for b in region.boxes], region.opaque // out_shape[0]
        )
        structure = "broadcast batch"
    tensor = 2 * reduction * computed.count
    flops = FlopCount(tensor=min(tensor, context.record.flops.tensor), kind=MatmulKind.MATMUL)
    return Demand(tuple(inputs), flops, structure=structure)


@demand_rule([aten.mv, aten.addmv])
def matrix_vector_demand(context: _Context) -> Demand:
    """out[i] = (β·c[i] +) α·A[i, :] @ v needs row i of A and all of v: 2·K FLOPs per demanded
    element."""
    *_, matrix, vector = context.op.reads
    region = context.output
    if len(matrix.shape) != 2 or any(len(box) != 1 for box in region.boxes):
        return _proportional(context)
    reduction = matrix.shape[1]
    every = (range(reduction),)
    rows = Region.of([(box[0], every) for box in region.boxes], region.opaque * reduction)
    inputs = (*_biases(context, region), rows, Region.of([(every,)]) if region else Region())
    tensor = min(2 * reduction * region.count, context.record.flops.tensor)
    return Demand(inputs, FlopCount(tensor=tensor, kind=MatmulKind.MATMUL))


@demand_rule([aten.addbmm])
def batch_sum_matmul_demand(context: _Context) -> Demand:
    """``addbmm``: out[i, j] = β·c[i, j] + α·Σ_b A[b, i, :] @ B[b, :, j] needs row i of every
    A[b] and column j of every B[b]: 2·batch·K FLOPs per demanded element."""
    *_, left, right = context.op.reads
    region = context.output
    if len(left.shape) != 3 or any(len(box) != 2 for box in region.boxes):
        return _proportional(context)
    batch, rows, reduction = left.shape
    columns = right.shape[-1]
    every = ((range(batch),), (range(reduction),))
    left_boxes = [(every[0], box[0], every[1]) for box in region.boxes]
    right_boxes = [(every[0], every[1], box[1]) for box in region.boxes]
    # c outputs with no position span at least ⌈c/N⌉ rows of each A[b], ⌈c/M⌉ columns of B[b]
    per_line = batch * reduction
    left_opaque = -(-region.opaque // max(columns, 1)) * per_line
    right_opaque = -(-region.opaque // max(rows, 1)) * per_line
    inputs = (
        *_biases(context, region),
        Region.of(left_boxes, left_opaque),
        Region.of(right_boxes, right_opaque),
    )
    tensor = min(2 * per_line * region.count, context.record.flops.tensor)
    return Demand(inputs, FlopCount(tensor=tensor, kind=MatmulKind.MATMUL))


def _biases(context: _Context, region: Region) -> tuple[Region, ...]:
    """The added input of addmm/baddbmm, broadcast; none when ``beta`` is 0 (torch ignores it)."""
    *bias, _, _ = context.op.reads
    if context.argument("beta", 1) == 0:
        return tuple(Region() for _ in bias)
    out_shape = context.op.writes[0].shape
    return tuple(_broadcast(region, out_shape, ref.shape) or Region() for ref in bias)


def _broadcast_batch(ref: TensorRef) -> bool:
    return len(ref.strides) == len(ref.shape) and ref.shape[0] > 1 and ref.strides[0] == 0


def _window(
    out_set: IndexSet, in_size: int, kernel: int, stride: int, padding: int, dilation: int
) -> tuple[IndexSet, int, IndexSet]:
    """One spatial dim of a conv or pool: the input positions the demanded outputs read, the
    (output, tap) pairs that land inside the input (taps on padding cost nothing) and the taps
    used."""
    positions: list[range] = []
    pairs = 0
    taps = []
    for tap in range(kernel):
        shift = tap * dilation - padding
        low = -(shift // stride)  # first o with o·stride + shift ≥ 0 (ceil of −shift/stride)
        high = (in_size - 1 - shift) // stride  # last o with o·stride + shift < in_size
        valid = range(max(low, 0), high + 1)
        used = False
        for r in out_set:
            hit = range_intersection(r, valid)
            if hit:
                used = True
                pairs += len(hit)
                positions.append(
                    range(
                        hit.start * stride + shift, hit[-1] * stride + shift + 1, hit.step * stride
                    )
                )
        if used:
            taps.append(tap)
    return normalize(positions), pairs, positions_to_set(taps)


def _spatial_dims(base: str) -> int:
    """Spatial dims of a pooling or resampling op, from its name (``max_pool2d`` → 2)."""
    return next((int(d) for d in "321" if f"{d}d" in base), 1)


def _as_list(value: Any, count: int, default: int) -> list[int]:
    if value is None or value == [] or value == ():
        return [default] * count
    if isinstance(value, int):
        return [value] * count
    values = list(value)
    return values * count if len(values) == 1 else values


def _spatial_windows(
    window: Callable[..., tuple[IndexSet, int, IndexSet]],
    box: Box,
    source: TensorRef,
    weight: TensorRef,
    geometry: tuple[list[int], list[int], list[int]],
) -> list[tuple[IndexSet, int, IndexSet]]:
    """``window`` (conv or transposed conv) over each spatial dim of an (N, C, …) output box."""
    stride, padding, dilation = geometry
    return [
        window(
            box[2 + d], source.shape[2 + d], weight.shape[2 + d], stride[d], padding[d], dilation[d]
        )
        for d in range(len(source.shape) - 2)
    ]


def _unpadded(
    context: _Context, source: TensorRef, spatial: int, fill: float
) -> tuple[TensorRef, list[int]] | None:
    """(the tensor before an explicit ``constant_pad_nd`` with value ``fill`` on the spatial
    dims, the left pad of each dim), when ``source`` is that pad's output as it is: a conv over
    zeros (a max-pool over −inf) is the same window op with implicit padding, whose taps on the
    padding cost nothing. ``padding='same'`` with an even kernel pads this way."""
    producer = context.producers.get(source.value_id)
    if producer is None or aten.constant_pad_nd not in op_keys(producer) or not producer.reads:
        return None
    written = producer.writes[0]
    if (source.shape, source.strides) != (written.shape, written.strides):
        return None
    pads = list(producer.argument("pad", []))
    if producer.argument("value", 0) != fill or len(pads) > 2 * spatial or min(pads) < 0:
        return None
    left = [0] * spatial
    for index in range(0, len(pads), 2):
        left[spatial - 1 - index // 2] = pads[index]
    return producer.reads[0], left


def _conv_arguments(context: _Context, spatial: int) -> tuple[list[int], list[int], list[int], int]:
    """A convolution's stride, padding and dilation per spatial dim, and its groups."""
    return (
        _as_list(context.argument("stride"), spatial, 1),
        _as_list(context.argument("padding"), spatial, 0),
        _as_list(context.argument("dilation"), spatial, 1),
        context.argument("groups", 1) or 1,
    )


@demand_rule([aten.convolution, aten._convolution])
def convolution_demand(context: _Context) -> Demand:
    """out[n, co, p] needs the input window of p in co's group and co's filter taps that land on
    real input: FLOPs 2 · (Ci/groups) per (output, in-bounds tap) pair."""
    op = context.op
    if len(op.reads) < 2:
        return _proportional(context)
    if context.argument("transposed", False):
        return _transposed_convolution(context)
    source, weight, *bias = op.reads
    spatial = len(source.shape) - 2
    region = context.output
    if spatial < 1 or any(len(box) != spatial + 2 for box in region.boxes):
        return _proportional(context)
    stride, padding, dilation, groups = _conv_arguments(context, spatial)
    padded_source = source
    unpadded = _unpadded(context, source, spatial, 0)
    if unpadded is not None:
        source, left = unpadded
        padding = [p + extra for p, extra in zip(padding, left, strict=True)]
    out_channels, group_in = weight.shape[0], weight.shape[1]
    per_group_out = out_channels // groups
    in_boxes, weight_boxes, bias_boxes = [], [], []
    flops = 0
    sizes = 0
    # an input broadcast along the batch (x.expand(B, …)) gives B equal images: one conv
    broadcast = _broadcast_batch(source)
    for box in region.boxes:
        windows = _spatial_windows(_window, box, source, weight, (stride, padding, dilation))
        channels = normalize(
            range(g * group_in, (g + 1) * group_in)
            for g in sorted({c // per_group_out for r in box[1] for c in r})
        )
        in_boxes.append((box[0], channels, *(w[0] for w in windows)))
        weight_boxes.append((box[1], (range(group_in),), *(w[2] for w in windows)))
        bias_boxes.append((box[1],))
        images = min(set_size(box[0]), 1) if broadcast else set_size(box[0])
        flops += 2 * group_in * images * set_size(box[1]) * math.prod(w[1] for w in windows)
        sizes += box_size(box)
    share = region.count / sizes if sizes else 0.0
    tensor = min(int(flops * share), context.record.flops.tensor)
    flop_count = FlopCount(tensor=tensor, kind=MatmulKind.CONV)
    rest = (Region.of(weight_boxes), *(Region.of(bias_boxes) for _ in bias))
    if source is padded_source:
        structure = "broadcast batch" if broadcast else None
        return Demand((Region.of(in_boxes), *rest), flop_count, structure=structure)
    extra = ((source, Region.of(in_boxes)),)
    return Demand((Region(), *rest), flop_count, extra, structure="explicit padding")


def _transposed_window(
    out_set: IndexSet, in_size: int, kernel: int, stride: int, padding: int, dilation: int
) -> tuple[IndexSet, int, IndexSet]:
    """One spatial dim of a transposed conv: input i and tap k land on output
    i·stride − padding + k·dilation. Returns the input positions that reach demanded outputs,
    the (input, tap) pairs landing on them and the taps used."""
    positions: list[range] = []
    pairs = 0
    taps = []
    for tap in range(kernel):
        shift = tap * dilation - padding
        # the outputs this tap reaches: shift, shift + stride, … (one per input position)
        reached = range(shift, shift + stride * in_size, stride)
        used = False
        for r in out_set:
            hit = range_intersection(r, reached)
            if hit:
                used = True
                pairs += len(hit)
                first, step = (hit.start - shift) // stride, hit.step // stride
                positions.append(range(first, first + len(hit) * step, step))
        if used:
            taps.append(tap)
    return normalize(positions), pairs, positions_to_set(taps)


def _transposed_convolution(context: _Context) -> Demand:
    """out[n, co, p] gathers every (input position, tap) pair that lands on p, for the input
    channels of co's group: 2 · (Ci/groups) FLOPs per pair and output channel."""
    source, weight, *bias = context.op.reads
    spatial = len(source.shape) - 2
    region = context.output
    if spatial < 1 or any(len(box) != spatial + 2 for box in region.boxes):
        return _proportional(context)
    stride, padding, dilation, groups = _conv_arguments(context, spatial)
    in_channels, per_group_out = weight.shape[0], weight.shape[1]
    group_in = in_channels // groups
    in_boxes, weight_boxes, bias_boxes = [], [], []
    flops, sizes = 0, 0
    for box in region.boxes:
        windows = _spatial_windows(
            _transposed_window, box, source, weight, (stride, padding, dilation)
        )
        out_channels = [c for r in box[1] for c in r]
        groups_used = sorted({c // per_group_out for c in out_channels})
        channels = normalize(range(g * group_in, (g + 1) * group_in) for g in groups_used)
        in_boxes.append((box[0], channels, *(w[0] for w in windows)))
        weight_boxes.append(
            (
                channels,
                positions_to_set(c % per_group_out for c in out_channels),
                *(w[2] for w in windows),
            )
        )
        bias_boxes.append((box[1],))
        flops += (
            2 * group_in * set_size(box[0]) * len(out_channels) * math.prod(w[1] for w in windows)
        )
        sizes += box_size(box)
    share = region.count / sizes if sizes else 0.0
    inputs = (Region.of(in_boxes), Region.of(weight_boxes), *(Region.of(bias_boxes) for _ in bias))
    tensor = min(int(flops * share), context.record.flops.tensor)
    return Demand(inputs, FlopCount(tensor=tensor, kind=MatmulKind.CONV))


@demand_rule([aten._thnn_fused_lstm_cell, aten._thnn_fused_gru_cell])
def cell_demand(context: _Context) -> Demand:
    """A fused LSTM/GRU cell is row-wise: batch row b of its outputs needs row b of the gate
    pre-activations and of the previous state (and all of a bias)."""
    rows = normalize(r for region in context.outputs for box in region.boxes for r in box[0])
    if any(region.opaque for region in context.outputs) or any(
        len(w.shape) != 2 for w in context.op.writes
    ):
        return _proportional(context)
    inputs = tuple(
        Region.of([(rows, (range(ref.shape[1]),))])
        if len(ref.shape) == 2
        else Region.of([full_box(ref.shape)])
        for ref in context.op.reads
    )
    share = set_size(rows) / context.op.writes[0].shape[0]
    return Demand(inputs, _scaled(context.record.flops, share))


@demand_rule([aten.nll_loss_forward, aten.nll_loss, aten.nll_loss2d_forward])
def nll_loss_demand(context: _Context) -> Demand:
    """Negative log-likelihood picks one score per target: every target, and one class position
    in each target's row. Which class is data; the bound places it at class 0, so a softmax
    before it is charged each picked row in full (cross-entropy reads all its logits)."""
    scores, target, *rest = context.op.reads
    if not context.fraction:
        return Demand(tuple(Region() for _ in context.op.reads), FlopCount())
    shape = scores.shape
    class_dim = 1 if len(shape) > 1 else 0
    picked = tuple((range(1),) if d == class_dim else (range(n),) for d, n in enumerate(shape))
    inputs = (
        Region.of([picked]),
        Region.of([full_box(target.shape)]),
        *(Region(opaque=_data_chosen(target.elements)) for _ in rest),
    )
    return Demand(inputs, context.record.flops)


_MAX_POOLS = (
    aten.max_pool1d,
    aten.max_pool2d,
    aten.max_pool3d,
    aten.max_pool2d_with_indices,
    aten.max_pool3d_with_indices,
)


@demand_rule([*_MAX_POOLS, aten.avg_pool1d, aten.avg_pool2d, aten.avg_pool3d])
def pooling_demand(context: _Context) -> Demand:
    """out[..., p] needs the input window of p; one compare or add per in-bounds tap."""
    source = context.op.reads[0]
    spatial = _spatial_dims(context.op.base)
    kernel = _as_list(context.argument("kernel_size"), spatial, 1)
    stride = _as_list(context.argument("stride"), spatial, 0)
    stride = [s or k for s, k in zip(stride, kernel, strict=True)]
    padding = _as_list(context.argument("padding"), spatial, 0)
    dilation = _as_list(context.argument("dilation"), spatial, 1)
    lead = len(source.shape) - spatial
    region = context.output
    if any(len(box) != len(source.shape) for box in region.boxes):
        return _proportional(context)
    padded_source = source
    maximum = _one_of(context.op, frozenset(_MAX_POOLS))
    unpadded = _unpadded(context, source, spatial, -math.inf) if maximum else None
    if unpadded is not None:
        source, left = unpadded
        padding = [p + extra for p, extra in zip(padding, left, strict=True)]
    boxes, taps, sizes = [], 0, 0
    for box in region.boxes:
        windows = [
            _window(
                box[lead + d], source.shape[lead + d], kernel[d], stride[d], padding[d], dilation[d]
            )
            for d in range(spatial)
        ]
        boxes.append((*box[:lead], *(w[0] for w in windows)))
        taps += math.prod(set_size(s) for s in box[:lead]) * math.prod(w[1] for w in windows)
        sizes += box_size(box)
    share = region.count / sizes if sizes else 0.0
    flops = FlopCount(vector=int(taps * share))
    if source is padded_source:
        return Demand((Region.of(boxes),), flops)
    return Demand((Region(),), flops, ((source, Region.of(boxes)),), structure="explicit padding")


@demand_rule([aten.im2col])
def im2col_demand(context: _Context) -> Demand:
    """``F.unfold``: the whole output needs the input positions some window covers (a stride
    longer than the window skips the rest); a partial output its share, with no position."""
    source = context.op.reads[0]
    if context.fraction < 1.0 or len(source.shape) < 3:
        return _proportional(context)
    kernel = _as_list(context.argument("kernel_size"), 2, 1)
    dilation = _as_list(context.argument("dilation"), 2, 1)
    padding = _as_list(context.argument("padding"), 2, 0)
    stride = _as_list(context.argument("stride"), 2, 1)
    lead = len(source.shape) - 2
    windows = []
    for d in range(2):
        size = source.shape[lead + d]
        out = (size + 2 * padding[d] - dilation[d] * (kernel[d] - 1) - 1) // stride[d] + 1
        windows.append(
            _window((range(max(out, 0)),), size, kernel[d], stride[d], padding[d], dilation[d])[0]
        )
    box = (*full_box(source.shape[:lead]), *windows)
    return Demand((Region.of([box]),), FlopCount())


def _scale_ratios(context: _Context, spatial: int) -> list[float | None]:
    """Source steps per output step that the op was given (``scale_factor`` → 1/scale), per
    spatial dim; None where torch derives it from the sizes (in/out)."""
    names = [name for name in context.op.argument_names if name.startswith("scales")]
    if len(names) == 1 and spatial > 1:  # upsample_*.vec: one list for all dims
        given = context.argument(names[0])
        given = list(given) if isinstance(given, (list, tuple)) else [given] * spatial
    else:
        given = [context.argument(name) for name in names] or [None] * spatial
    given = (given + [None] * spatial)[:spatial]
    return [1.0 / scale if scale else None for scale in given]


def _resampled(
    context: _Context, source_positions: Callable[[int, int, int, float], Sequence[int]]
) -> Demand:
    """Resampling ops: per spatial dim, output o reads the source positions the mapping gives
    (``source_positions(o, in_size, out_size, ratio)``, ratio = source steps per output step)."""
    source = context.op.reads[0]
    out_shape = context.op.writes[0].shape
    region = context.output
    if len(out_shape) != len(source.shape) or any(len(b) != len(out_shape) for b in region.boxes):
        return _proportional(context)
    spatial = _spatial_dims(context.op.base)
    lead = len(out_shape) - spatial
    ratios = _scale_ratios(context, spatial)
    boxes = []
    for box in region.boxes:
        sets = list(box[:lead])
        for dim in range(lead, len(out_shape)):
            in_size, out_size = source.shape[dim], out_shape[dim]
            ratio = ratios[dim - lead] or in_size / out_size
            demanded = [o for r in box[dim] for o in r]
            if len(demanded) > 65536:
                return _proportional(context)
            sets.append(
                positions_to_set(
                    p
                    for o in demanded
                    for p in source_positions(o, in_size, out_size, ratio)
                    if 0 <= p < in_size
                )
            )
        boxes.append(tuple(sets))
    share = fraction_of(region, math.prod(out_shape))
    inputs = (Region.of(boxes),) + tuple(Region() for _ in context.op.reads[1:])
    return Demand(inputs, _scaled(context.record.flops, share))


@demand_rule([aten.upsample_nearest1d, aten.upsample_nearest2d, aten.upsample_nearest3d])
def nearest_demand(context: _Context) -> Demand:
    """Nearest: output o reads floor(o · ratio), ratio = in/out or 1/scale_factor."""
    return _resampled(context, lambda o, i, n, ratio: (min(math.floor(o * ratio), i - 1),))


@demand_rule(
    [aten._upsample_nearest_exact1d, aten._upsample_nearest_exact2d, aten._upsample_nearest_exact3d]
)
def nearest_exact_demand(context: _Context) -> Demand:
    """Nearest-exact: output o reads floor((o + ½) · ratio)."""
    return _resampled(context, lambda o, i, n, ratio: (min(math.floor((o + 0.5) * ratio), i - 1),))


def _linear_taps(extra_left: int, extra_right: int) -> Callable[..., Sequence[int]]:
    """Source taps around each output's centre; linear clamps a negative centre to 0 (torch's
    area_pixel_compute_source_index), cubic does not."""
    cubic = extra_left > 0

    def taps(context: _Context, o: int, i: int, n: int, ratio: float) -> Sequence[int]:
        if context.argument("align_corners", False):
            centre = o * (i - 1) / (n - 1) if n > 1 else 0.0
        else:
            centre = (o + 0.5) * ratio - 0.5
            centre = centre if cubic else max(centre, 0.0)
        base = math.floor(centre)
        return [min(max(base + k, 0), i - 1) for k in range(-extra_left, 2 + extra_right)]

    return taps


@demand_rule([aten.upsample_bilinear2d, aten.upsample_linear1d, aten.upsample_trilinear3d])
def linear_demand(context: _Context) -> Demand:
    """(Bi/tri)linear: output o reads the two source positions around its centre."""
    taps = _linear_taps(0, 0)
    return _resampled(context, lambda o, i, n, ratio: taps(context, o, i, n, ratio))


@demand_rule([aten.upsample_bicubic2d])
def cubic_demand(context: _Context) -> Demand:
    """Bicubic: output o reads the four source positions around its centre."""
    taps = _linear_taps(1, 1)
    return _resampled(context, lambda o, i, n, ratio: taps(context, o, i, n, ratio))


@demand_rule(
    [
        aten._adaptive_avg_pool2d,
        aten._adaptive_avg_pool3d,
        aten.adaptive_avg_pool1d,
        aten.adaptive_max_pool2d,
        aten.adaptive_max_pool3d,
        aten.adaptive_max_pool1d,
    ]
)
def adaptive_pool_demand(context: _Context) -> Demand:
    """Adaptive pooling: output o averages source [floor(o·in/out), ceil((o+1)·in/out))."""
    return _resampled(context, lambda o, i, n, ratio: range(o * i // n, -(-((o + 1) * i) // n)))


# --- Data movement -----------------------------------------------------------------------------


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
            inputs.append(Region())
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
    return Demand(tuple(inputs), FlopCount())


def _per_dim(context: _Context, positions: Callable[[int, IndexSet], IndexSet]) -> Demand:
    """Data movement where each output dim reads the same dim of the input: ``positions(dim,
    demanded)`` gives the input positions along ``dim`` that demanded output positions read.
    Output dims the input lacks (leading dims of ``repeat``) read no dim of their own; c outputs
    with no position read at least c·(input size / output size) elements."""
    source = context.op.reads[0]
    rank, out_shape = len(source.shape), context.op.writes[0].shape
    region = context.output
    lead = len(out_shape) - rank
    if lead < 0 or any(len(box) != len(out_shape) for box in region.boxes):
        return _proportional(context)
    boxes = [
        tuple(normalize(positions(d, box[lead + d])) for d in range(rank)) for box in region.boxes
    ]
    opaque = -(-region.opaque * source.elements // max(math.prod(out_shape), 1))
    rest = tuple(Region() for _ in context.op.reads[1:])
    return Demand((Region.of(boxes, opaque), *rest), FlopCount())


def _reversed(index_set: IndexSet, size: int) -> IndexSet:
    return tuple(range(size - 1 - r[-1], size - r.start, r.step) for r in index_set if r)


@demand_rule([aten.flip])
def flip_demand(context: _Context) -> Demand:
    """``flip``: output position p of a flipped dim of size n reads input position n − 1 − p."""
    shape = context.op.reads[0].shape
    flipped = {d % len(shape) for d in context.argument("dims", ())} if shape else set()
    return _per_dim(
        context, lambda d, s: _reversed(s, shape[d]) if d in flipped else s
    )


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
    roll with no dims rolls the flattened tensor (its share, with no position)."""
    shape = context.op.reads[0].shape
    shifts, dims = list(context.argument("shifts", ())), list(context.argument("dims", ()))
    if not dims or len(dims) != len(shifts):
        return _proportional(context)
    by_dim: dict[int, int] = {}
    for dim, shift in zip(dims, shifts, strict=True):
        by_dim[dim % len(shape)] = by_dim.get(dim % len(shape), 0) + shift
    return _per_dim(
        context, lambda d, s: _rolled(s, shape[d], by_dim[d]) if by_dim.get(d) else s
    )


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
    return Demand(tuple(inputs), FlopCount())


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
    return Demand((Region.of(boxes),), FlopCount())


#: Row bands a triangle is cut into: each band keeps the columns all its rows keep, so the
#: demand is inside the triangle, short of it by at most 1/(2·bands) of its area.
TRIANGLE_BANDS = 64


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
    return Demand((Region.of(boxes),), FlopCount())


@demand_rule([aten.diag_embed, aten.diag, aten.diagflat, aten.diagonal_copy])
def diagonal_demand(context: _Context) -> Demand:
    """Building a diagonal matrix from a vector (any offset, a batch of vectors) needs the vector
    entries on demanded diagonal positions, and nothing for the zeros; extracting a diagonal
    needs one element per demanded output (no index box)."""
    source = context.op.reads[0]
    region = context.output
    offset = _built_offset(context.op)
    if offset is None:
        return Demand((Region(opaque=min(region.count, source.elements)),), FlopCount())
    # builder element (r, c) holds v[min(r, c)] where c − r = offset: the demanded columns
    # c of some demanded row c − offset, and the vector index c − max(offset, 0)
    columns = [set_intersection(mapped_set(box[-2], offset), box[-1]) for box in region.boxes]
    if _boxed_vector(context.op) is None:
        return Demand((Region(opaque=sum(map(set_size, columns))),), FlopCount())
    boxes = [
        (*box[:-2], mapped_set(hit, -max(offset, 0)))
        for box, hit in zip(region.boxes, columns, strict=True)
        if hit
    ]
    return Demand((Region.of(boxes),), FlopCount())


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
    return Demand(tuple(Region.of(b) for b in boxes), FlopCount())


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
    picked = [
        position
        for position, ref in enumerate(context.op.reads)
        if position != mask_position and ref.elements * 2 > elements
    ]
    for position in picked:
        if mask is None:
            inputs[position] = Region()
            continue
        holds = mask.expand(out_shape).bool()
        where = holds if names[position] == when_true else ~holds
        chosen = _region_where(where, region)
        inputs[position] = _broadcast(chosen, out_shape, context.op.reads[position].shape)
    sourced = [p for p in picked if context.op.reads[p].value_id not in context.producers]
    if mask is None and len(picked) == 2 and sourced == picked:
        narrower = min(picked, key=lambda p: context.op.reads[p].itemsize)
        inputs[narrower] = _broadcast(region, out_shape, context.op.reads[narrower].shape)
    return Demand(tuple(inputs), _scaled(context.record.flops, context.fraction))


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
    their values: see :func:`_data_chosen` (an embedding: one row)."""
    source, *indices = context.op.reads
    demanded = context.output.count
    share = context.fraction
    # a grid sample may land on padding only, reading nothing of its source
    chosen = 0 if _one_of(context.op, _GRID_SAMPLERS) else _data_chosen(demanded)
    inputs = [Region(opaque=chosen)]
    inputs += [
        Region(opaque=int(ref.elements * share)) if context.loaded(position) else Region()
        for position, ref in enumerate(indices, start=1)
    ]
    if aten.embedding in op_keys(context.op):  # (weight, indices): indices are the 2nd read
        weight, index = context.op.reads[:2]
        inputs = [
            Region(opaque=_data_chosen(demanded) * _row_part(context.output, weight.shape[-1])),
            Region(opaque=int(index.elements * share)),
        ]
    return Demand(tuple(inputs), _scaled(context.record.flops, share))


def _covered(context: _Context) -> int:
    """Most destination elements a scatter can overwrite (:func:`costs.indexed_positions`)."""
    destination, *rest = context.op.reads
    if not rest:
        return 0
    largest = max(ref.elements for ref in rest)
    return min(destination.elements, indexed_positions(context.op, largest))


_SCALAR_FILLS = _op_set([aten.index_fill])


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
    end state of an input or buffer is already in memory where the scatter leaves it), the
    indices for the demanded outputs and the source as :func:`_data_chosen` says."""
    destination, *rest = context.op.reads
    demanded = context.output.count
    share = context.fraction
    read = sum(region.count for region in context.read)
    untouched = max(0, read - _covered(context))
    inputs = [Region(opaque=untouched)]
    *indices, source = rest if rest else [None]
    scalar_value = not isinstance(context.argument("value"), torch.Tensor)
    if _one_of(context.op, _SCALAR_FILLS) and scalar_value:
        indices, source = [*indices, source], None  # index_fill.int_Scalar: no source tensor
    inputs += [Region(opaque=int(ref.elements * share)) for ref in indices]
    inputs += [Region(opaque=_data_chosen(demanded))] if source is not None else []
    return Demand(tuple(inputs), _scaled(context.record.flops, share))


@demand_rule([aten.embedding_renorm])
def renorm_demand(context: _Context) -> Demand:
    """``embedding_renorm_`` rescales the rows its indices pick whose norm exceeds
    ``max_norm``: out[r, c] is old[r, c] times a factor of row r, so a read element needs its
    own old element (and, if renormed, its row — data), and every index, since any may pick
    its row. Which rows change is data; none may, so a kept weight nobody reads needs only the
    indices and one picked row — enough to find out."""
    weight, indices = context.op.reads[:2]
    read = Region()
    for region in context.read:
        read = read.union(region)
    picked = read if read else Region(opaque=_data_chosen(indices.elements) * weight.shape[-1])
    rest = tuple(Region() for _ in context.op.reads[2:])
    return Demand((picked, Region.of([full_box(indices.shape)]), *rest), FlopCount())


@demand_rule(
    [
        aten.scaled_dot_product_attention,
        aten._scaled_dot_product_efficient_attention,
        aten._scaled_dot_product_flash_attention,
        aten._scaled_dot_product_cudnn_attention,
        aten._scaled_dot_product_flash_attention_for_cpu,
    ]
)
def attention_demand(context: _Context) -> Demand:
    """out[..., l, e] needs query row l, the key and value rows row l attends to (all, or with a
    causal — top-left aligned — mask keys 0..l) and value column e; grouped-query heads map to
    their key/value head. 2·(E + Ev) FLOPs per kept (row, key) pair."""
    query, key, value, *rest = context.op.reads
    out_shape = context.op.writes[0].shape
    region = Region.of(context.outputs[0].boxes, context.outputs[0].opaque)
    if (
        not region.boxes
        or any(len(b) != len(out_shape) for b in region.boxes)
        or len(query.shape) != len(out_shape)
        or len(key.shape) != len(out_shape)
    ):
        return _proportional(context)
    keys = key.shape[-2]
    causal = bool(context.argument("is_causal", False))
    embed = query.shape[-1]
    flops, sizes = 0, 0
    query_boxes, key_boxes, value_boxes, mask_boxes = [], [], [], []
    for box in region.boxes:
        *lead, rows, columns = box
        kept = sum(min(r + 1, keys) if causal else keys for rng in rows for r in rng)
        flops += 2 * math.prod(set_size(x) for x in lead) * kept * (embed + set_size(columns))
        sizes += box_size(box)
        last_row = max(r[-1] for r in rows if r)
        attended = (range(min(last_row + 1, keys) if causal else keys),)
        key_lead = _heads(lead, out_shape[:-2], key.shape[:-2])
        value_lead = _heads(lead, out_shape[:-2], value.shape[:-2])
        query_boxes.append((*lead, rows, (range(embed),)))
        key_boxes.append((*key_lead, attended, (range(embed),)))
        value_boxes.append((*value_lead, attended, columns))
        mask_boxes.append((*lead, rows, attended))
    share = region.count / sizes if sizes else 0.0
    masks = []
    for ref in rest:
        mapped = _broadcast(Region.of(mask_boxes), (*out_shape[:-1], keys), ref.shape)
        masks.append(mapped if mapped is not None else Region())
    inputs = (Region.of(query_boxes), Region.of(key_boxes), Region.of(value_boxes), *masks)
    tensor = min(int(flops * share), context.record.flops.tensor)
    return Demand(inputs, FlopCount(tensor=tensor, kind=MatmulKind.ATTENTION))


def _heads(lead: Sequence[IndexSet], out_lead: Sequence[int], kv_lead: Sequence[int]) -> Box:
    """Query batch/head index sets seen from a key or value tensor: broadcast dims take index 0,
    grouped-query heads map head h to h // (query heads / key heads)."""
    mapped = []
    for index_set, size, kv_size in zip(lead, out_lead, kv_lead, strict=True):
        if kv_size == size:
            mapped.append(index_set)
        elif kv_size == 1:
            mapped.append((range(1),))
        else:
            group = max(size // kv_size, 1)
            mapped.append(positions_to_set(h // group for r in index_set for h in r))
    return tuple(mapped)


# --- Known values ------------------------------------------------------------------------------

#: Elements a value may have to be evaluated for real (a 2048 × 2048 causal mask is 4 M).
CONSTANT_LIMIT_ELEMENTS = 1 << 22


def _evaluable(op: TracedOp, known: dict[int, torch.Tensor]) -> bool:
    """Whether ``op``'s outputs depend only on shapes and on values already known: an aten op
    that is not random, writes nothing in place and allocates no uninitialised memory, whose
    every read is known and whose outputs are small."""
    func = op.func
    if func is None or op.is_view or not op.writes or op.written_arguments:
        return False
    if torch.Tag.nondeterministic_seeded in func.tags or "empty" in op.base:
        return False
    if any(w.storage_elements > CONSTANT_LIMIT_ELEMENTS for w in op.writes):
        return False
    return all(ref.value_id in known for ref in op.reads)


def _on_cpu(leaf: Any) -> Any:
    return torch.device("cpu") if isinstance(leaf, torch.device) else leaf


def _with_values(op: TracedOp, known: dict[int, torch.Tensor]) -> tuple[Any, Any]:
    """``op``'s arguments with each tensor replaced by its known value, on the CPU."""
    reads = iter(
        known[ref.value_id].as_strided(ref.shape, ref.strides, ref.offset) for ref in op.reads
    )
    return tree_map(
        lambda leaf: next(reads) if isinstance(leaf, torch.Tensor) else _on_cpu(leaf),
        (op.args, op.kwargs),
    )


def known_values(ops: Sequence[TracedOp]) -> dict[int, torch.Tensor]:
    """value id → its storage's elements (flat, on the CPU) for every value that depends only
    on shapes and constants: ``ones``, ``arange``, ``eye``, ``tril`` of them, a comparison of
    them — the causal masks and position ids a model builds in ``forward``. They are small, so
    the ops are run for real; the demand rules read them (:func:`_known`)."""
    known: dict[int, torch.Tensor] = {}
    for op in ops:
        if not _evaluable(op, known):
            continue
        args, kwargs = _with_values(op, known)
        try:
            output = op.func(*args, **kwargs)
        except Exception:  # noqa: BLE001 — an op the CPU cannot run stays unknown
            continue
        tensors = [leaf for leaf in tree_leaves(output) if isinstance(leaf, torch.Tensor)]
        for ref, tensor in zip(op.writes, tensors, strict=False):
            storage = torch.zeros(ref.storage_elements or ref.elements, dtype=tensor.dtype)
            storage.as_strided(ref.shape, ref.strides, ref.offset).copy_(tensor)
            known[ref.value_id] = storage
    return known


def _known(context: _Context, position: int) -> torch.Tensor | None:
    """The value of read ``position`` as the op sees it, if it is known."""
    ref = context.op.reads[position]
    storage = context.known.get(ref.value_id)
    return None if storage is None else storage.as_strided(ref.shape, ref.strides, ref.offset)


def _region_where(condition: torch.Tensor, region: Region) -> Region:
    """The demanded elements where the known boolean ``condition`` (broadcast to the output
    shape) holds. Leading dims must agree: what holds for every leading index is kept. Rows
    (the second-to-last dim) are cut into :data:`TRIANGLE_BANDS` bands, each keeping the
    columns all its rows keep — exact for masks constant along rows, and short of a causal
    mask's triangle by at most 1/(2·bands) of it. Outputs with no position: none kept."""
    boxes = []
    for box in region.boxes:
        picked = condition
        for dim, index_set in enumerate(box):
            positions = torch.tensor([i for r in index_set for i in r], dtype=torch.int64)
            picked = picked.index_select(dim, positions)
        if len(box) < 2:
            kept = picked.reshape(-1).nonzero().reshape(-1).tolist()
            flat = [i for r in box[0] for i in r] if box else []
            if box and kept:
                boxes.append((positions_to_set(flat[i] for i in kept),))
            elif not box and bool(picked):
                boxes.append(())
            continue
        matrix = picked.reshape(-1, *picked.shape[-2:]).all(0)
        rows = [i for r in box[-2] for i in r]
        columns = [i for r in box[-1] for i in r]
        band = max(1, -(-len(rows) // TRIANGLE_BANDS))
        for start in range(0, len(rows), band):
            kept = matrix[start : start + band].all(0).nonzero().reshape(-1).tolist()
            if kept:
                chunk = positions_to_set(rows[start : start + band])
                boxes.append((*box[:-2], chunk, positions_to_set(columns[i] for i in kept)))
    return Region.of(boxes)


# --- The walk --------------------------------------------------------------------------------

#: Structured operands the demand rules recognise, with the cheapest standard implementation
#: they price and why it computes the same function.
STRUCTURE_RULES: dict[str, str] = {
    "diagonal matmul": "diag(a, k) @ B (or A @ diag(b, k)), the diagonal built by diag, "
    "diag_embed, diagflat or eye, of any offset, sliced or transposed: priced as the row "
    "(column) scaling a[:, None] * B[k:], one multiply per output element with a nonzero on its "
    "row (column) — the zeros contribute nothing to any output; eye(n) @ B is a copy of B",
    "block-diagonal matmul": "block_diag(A₁, A₂, …) @ x (or x @ block_diag(…)): priced as one "
    "product per block, Aₖ @ x[rows of block k] — the zero blocks contribute nothing",
    "broadcast batch": "a batched matmul whose operands are both broadcast along the batch "
    "(stride 0, e.g. x.expand(B, M, K) @ W), or a convolution of an input broadcast along it: "
    "one GEMM (one convolution), written B times — every batch entry is the same product",
    "size-1 reduction": "sum/mean/amax/… over dims of size 1 are the input itself (no "
    "arithmetic); var/std/argmax over them are constants (no input needed)",
    "size-1 normalisation": "softmax over a size-1 dim is 1 and log_softmax is 0 everywhere: "
    "nothing upstream is needed",
    "broadcast reduction": "a reduction over dims the input is broadcast along (stride 0, "
    "x.expand(n, m).sum(0)): every reduced element is the same, so one multiply (n·x) or copy "
    "per output",
    "reduced product": "(x @ W + b).sum(1) or .mean(1), the product read by nothing else: "
    "priced as x @ W.sum(1) + b.sum() (divided by N for a mean), K·N adds to reduce W, then a "
    "matrix-vector product, 2·K FLOPs per row — the sum over columns moves inside the product, "
    "as a generated kernel for KernelBench's matmul → sum and matmul → mean problems does",
    "explicit padding": "a convolution over F.pad(x, value=0) (a max-pool over value=−inf), as "
    "padding='same' with an even kernel builds it: priced as the same op with implicit padding, "
    "so taps on the padding cost nothing — they multiply zeros (compare −inf)",
}


@dataclass(frozen=True)
class Necessary:
    """The bound's work: each op with its necessary FLOPs, the demanded elements of each input
    storage and the kept elements of each written storage (``TensorRef.elements``)."""

    ops: tuple[OpRecord, ...]
    input_refs: tuple[TensorRef, ...]
    output_refs: tuple[TensorRef, ...]
    structures: tuple[str, ...]
    dead_ops: int

    def bytes(self, float_bytes: int) -> int:
        """Compulsory HBM bytes at a float element size of ``float_bytes``."""
        return sum(tensor_bytes(ref, float_bytes) for ref in (*self.input_refs, *self.output_refs))

    @property
    def notes(self) -> tuple[str, ...]:
        notes = [
            f"structured operand: {name} ({STRUCTURE_RULES[name].split(':')[0]})"
            for name in self.structures
        ]
        if self.dead_ops:
            notes.append(
                f"{self.dead_ops} op(s) feed no kept value (dead code or unused slices): "
                "the bound charges them nothing"
            )
        return tuple(notes)


def necessary_work(trace: Trace, records: Sequence[OpRecord]) -> Necessary:
    """Walk ``trace`` backwards from its kept values; see the module docstring."""
    all_refs = [r for op in trace.ops for r in (*op.writes, *op.reads)] + list(trace.output_refs)
    storages = Storages(all_refs)
    producers = {w.value_id: op for op in trace.ops if not op.is_view for w in op.writes}
    previous = _previous_versions(trace.ops)
    demand: dict[int, Region] = {}
    #: the part of each value's demand that an op reads or the model returns (see _Context.read)
    read: dict[int, Region] = {}
    kept, kept_writes = _kept_regions(trace, storages, producers)
    sized_by_data = _sized_by_data(trace.ops)
    known = known_values(trace.ops)

    def add(value_id: int, region: Region, read_part: Region) -> None:
        if region:
            demand[value_id] = demand.get(value_id, Region()).union(region)
        if read_part:
            read[value_id] = read.get(value_id, Region()).union(read_part)

    # final values of inputs and buffers the model overwrote: until an op reads them, only the
    # end state wants them, and what an op leaves unchanged there is already in memory
    input_storages = {r.storage_id for r in all_refs if r.value_id in trace.input_value_ids}
    in_place = {w.value_id for op in trace.ops for w in op.writes if w.storage_id in input_storages}
    for value_id, region in kept.items():
        add(value_id, region, Region() if value_id in in_place else region)
    necessary_records = list(records)
    structures: list[str] = []
    dead = 0
    #: values a live op reads or the model keeps, however few of their elements
    used = set(trace.output_value_ids) | {ref.value_id for ref in trace.output_refs}
    readers = dict.fromkeys(used, 1)
    for op in trace.ops:
        for ref in op.reads if not op.is_view else ():
            readers[ref.value_id] = readers.get(ref.value_id, 0) + 1
    for index in range(len(trace.ops) - 1, -1, -1):
        op = trace.ops[index]
        if op.is_view or not op.writes:
            continue
        record = records[index]
        if record.category is Category.ZERO_COPY:
            # an in-place metadata op (transpose_, unsqueeze_…) makes a new version of the
            # same elements: what is demanded of it is demanded of the version before
            for write in op.writes:
                wanted = demand.pop(write.value_id, Region())
                read_wanted = read.pop(write.value_id, Region())
                if write.value_id in previous:
                    add(previous[write.value_id], wanted, read_wanted)
            necessary_records[index] = replace(record, flops=FlopCount())
            continue
        outputs, read_outputs = [], []
        for write in op.writes:
            wanted = demand.pop(write.value_id, Region())
            read_wanted = read.pop(write.value_id, Region())
            written = storages.region_of(write)
            if not _data_chosen_write(op):  # those rules split old and new elements themselves
                if write.value_id in previous:
                    add(
                        previous[write.value_id],
                        _outside(wanted, written),
                        _outside(read_wanted, written),
                    )
                wanted = _inside(wanted, written, write)
                read_wanted = _inside(read_wanted, written, write)
            outputs.append(storages.in_view(write, wanted))
            read_outputs.append(storages.in_view(write, read_wanted))
        # an empty output sized by data (the fallback's zero-filled masks pick nothing) still
        # needs its deciding inputs when anything uses it: only they show it is empty
        empty_but_used = (
            op.writes[0].value_id in used
            and op.writes[0].value_id in sized_by_data
            and not any(math.prod(w.shape) for w in op.writes)
        )
        if not any(outputs) and not empty_but_used:
            dead += 1
            necessary_records[index] = replace(record, flops=FlopCount())
            continue
        used.update(ref.value_id for ref in op.reads)
        context = _Context(
            op, record, tuple(outputs), producers, tuple(read_outputs), known, readers
        )
        result = _rule(op, record, sized_by_data)(context)
        flops = result.flops
        if any(ref.value_id in sized_by_data for ref in (*op.reads, *op.writes)):
            flops = FlopCount()  # on data-sized values, which any input may leave empty
        # an op computing a data-sized value (x[x > 0] + y) may compute nothing: its other
        # inputs may be needed nowhere (the data-sized ones lead back to what decides the size)
        may_be_empty = any(w.value_id in sized_by_data for w in op.writes) and any(
            r.value_id in sized_by_data for r in op.reads
        )
        host = _host_scalars(op)
        for position, (ref, region) in enumerate(zip(op.reads, result.inputs, strict=False)):
            if position not in host and (ref.value_id in sized_by_data or not may_be_empty):
                add(ref.value_id, storages.region_of(ref, region), storages.region_of(ref, region))
        for ref, region in result.extra:
            if ref.value_id in sized_by_data or not may_be_empty:
                add(ref.value_id, storages.region_of(ref, region), storages.region_of(ref, region))
        if result.structure and result.structure not in structures:
            structures.append(result.structure)
        necessary_records[index] = replace(record, flops=flops)
    written_by_model = {v: r for v, r in kept_writes.items() if v not in sized_by_data}
    return Necessary(
        ops=tuple(necessary_records),
        input_refs=_counted(trace, demand, all_refs, storages),
        output_refs=_kept_refs(written_by_model, all_refs, storages),
        structures=tuple(structures),
        dead_ops=dead,
    )


def _rule(op: TracedOp, record: OpRecord, sized_by_data: dict[int, set[int]]) -> Rule:
    """The demand rule of ``op``: its own, the data-sized rule when its output sizes come from
    values, else the pointwise rule or :func:`_proportional` by category."""
    if any(w.value_id in sized_by_data for w in op.writes) and not any(
        r.value_id in sized_by_data for r in op.reads
    ):
        return data_sized_demand
    return lookup(DEMAND_RULES, op) or (
        pointwise_demand if record.category is Category.POINTWISE else _proportional
    )


#: Ops torch tags ``dynamic_output_shape`` that size their output by values only when an index
#: is a boolean mask (integer indices give a size known from shapes).
_DATA_SIZED_ONLY_WITH_MASKS = frozenset({aten.index})


def _sizes_outputs_by_data(op: TracedOp) -> bool:
    """Whether the op's output sizes depend on tensor values (nonzero, masked_select, unique,
    bincount, boolean-mask indexing…), which torch tags ``dynamic_output_shape``."""
    if op.func is None or torch.Tag.dynamic_output_shape not in op.func.tags:
        return False
    masks = any(ref.dtype == "bool" for ref in op.reads[1:])
    return masks or op.func.overloadpacket not in _DATA_SIZED_ONLY_WITH_MASKS


def _sized_by_data(ops: Sequence[TracedOp]) -> dict[int, set[int]]:
    """value id → the sizes of its dims that tensor values chose. The trace ran such ops on
    random data (the real-data fallback), so their sizes are one draw: any input may make them
    empty. A size chosen by data stays so in every later value an op computes from it with a
    dim of that size (``x[x > 0] * 2``) or of a size no other input has (``cat([x[x > 0], y])``);
    a reduction over it (``.sum()``) ends it."""
    sized: dict[int, set[int]] = {}
    for op in ops:
        chosen = set().union(*(sized.get(ref.value_id, set()) for ref in op.reads))
        if op.is_view or not (chosen or _sizes_outputs_by_data(op)):
            continue
        fixed = {n for ref in op.reads for n in ref.shape} - chosen
        for ref in op.writes:
            if dims := {n for n in ref.shape if n in chosen or n not in fixed}:
                sized[ref.value_id] = dims
    return sized


def data_sized_demand(context: _Context) -> Demand:
    """An op whose output sizes depend on values: any input may leave its output empty, so the
    values it picks are needed nowhere, but finding out which it picks needs its deciding
    inputs (its boolean masks, or every input when none is one): all of them for the whole
    output — an empty one is known only after every element — and for part of it at least one
    element each (the first positions examined may already yield that part). No FLOPs."""
    reads = context.op.reads
    deciding = [ref.dtype == "bool" for ref in reads]
    deciding = deciding if any(deciding) else [True] * len(reads)
    whole = context.fraction >= 1.0 or not any(math.prod(w.shape) for w in context.op.writes)
    inputs = tuple(
        Region()
        if not decides
        else Region.of([full_box(ref.shape)])
        if whole
        else Region(opaque=min(1, ref.elements))
        for ref, decides in zip(reads, deciding, strict=True)
    )
    return Demand(inputs, FlopCount())


def _host_scalars(op: TracedOp) -> set[int]:
    """Positions of the reads that are 0-d CPU tensors: a CUDA kernel takes them by value as an
    argument (TensorIterator's CPU scalars), not from GPU memory."""
    tensors = [leaf for leaf in tree_leaves((op.args, op.kwargs)) if isinstance(leaf, torch.Tensor)]
    if len(tensors) != len(op.reads):  # an intercepted call: its reads are not its arguments
        return set()
    return {
        position
        for position, tensor in enumerate(tensors)
        if tensor.dim() == 0 and tensor.device.type == "cpu"
    }


def _inside(wanted: Region, written: Region, write: TensorRef) -> Region:
    if not written.boxes:
        return wanted
    total = write.storage_elements or write.elements
    result = Region()
    for box in written.boxes:
        result = result.union(wanted.intersect_box(box, box_size(box), total))
    return result


def _outside(wanted: Region, written: Region) -> Region:
    if not written.boxes:
        return Region(opaque=wanted.count - written.count)
    result = wanted
    for box in written.boxes:
        result = result.minus_box(box)
    return result


def _previous_versions(ops: Sequence[TracedOp]) -> dict[int, int]:
    """value id → the value of the same storage it overwrote (in-place and partial writes)."""
    latest: dict[int, int] = {}
    previous: dict[int, int] = {}
    for op in ops:
        for ref in op.reads:
            latest[ref.storage_id] = ref.value_id
        for ref in op.writes:
            if ref.storage_id in latest and latest[ref.storage_id] != ref.value_id:
                previous[ref.value_id] = latest[ref.storage_id]
            latest[ref.storage_id] = ref.value_id
    return previous


def _kept_regions(
    trace: Trace, storages: Storages, producers: dict[int, TracedOp]
) -> tuple[dict[int, Region], dict[int, Region]]:
    """What must be in memory at the end, per final value: the returned views of values the
    model computed, and every element the model overwrote in an input or buffer (what it left
    untouched is already there). Returns (the demand to walk back from, the elements that must
    be written: positions chosen by data may be none)."""
    kept: dict[int, Region] = {}
    written: dict[int, Region] = {}
    returned_values = set()
    initial_storages = {
        ref.storage_id
        for op in trace.ops
        for ref in op.reads
        if ref.value_id in trace.input_value_ids
    }
    for ref in trace.output_refs:
        returned_values.add(ref.value_id)
        if ref.storage_id in initial_storages or ref.value_id not in producers:
            continue  # an input (or what was overwritten in it, below) needs no other write
        kept[ref.value_id] = kept.get(ref.value_id, Region()).union(storages.region_of(ref))
        written[ref.value_id] = kept[ref.value_id]
    final_of_storage = {}
    for op in trace.ops:
        for ref in op.writes:
            final_of_storage[ref.storage_id] = ref.value_id
    for op in trace.ops:
        for ref in op.writes:
            if ref.storage_id in initial_storages:
                final = final_of_storage[ref.storage_id]
                region = storages.region_of(ref)
                kept[final] = kept.get(final, Region()).union(region)
                if not _data_chosen_write(op):
                    written[final] = written.get(final, Region()).union(region)
    for value_id in trace.output_value_ids - returned_values - set(kept):
        if value_id in producers:  # returned without a recorded view: all of its writes
            writes = [w for w in producers[value_id].writes if w.value_id == value_id]
            for ref in writes:
                kept[value_id] = kept.get(value_id, Region()).union(storages.region_of(ref))
            written[value_id] = kept[value_id]
    return kept, written


def _representative(all_refs: Sequence[TensorRef], storages: Storages) -> dict[int, TensorRef]:
    """A reference per value, in the element size its storage's regions count in."""
    by_value: dict[int, TensorRef] = {}
    for ref in all_refs:
        current = by_value.get(ref.value_id)
        unit = storages.unit(ref.storage_id)
        if current is None or (current.itemsize != unit and ref.itemsize == unit):
            by_value[ref.value_id] = ref
    return by_value


def _counted(
    trace: Trace, demand: dict[int, Region], all_refs: Sequence[TensorRef], storages: Storages
) -> tuple[TensorRef, ...]:
    """Each graph input storage once, with its demanded elements (all its views united)."""
    by_value = _representative(all_refs, storages)
    refs = []
    for value_id in sorted(trace.input_value_ids):
        region = demand.get(value_id)
        if region and value_id in by_value:
            refs.append(replace(by_value[value_id], elements=region.count))
    return tuple(refs)


def _kept_refs(
    kept: dict[int, Region], all_refs: Sequence[TensorRef], storages: Storages
) -> tuple[TensorRef, ...]:
    """Each kept storage once, with the elements that must be written to it."""
    by_value = _representative(all_refs, storages)
    by_storage: dict[int, tuple[TensorRef, Region]] = {}
    for value_id, region in kept.items():
        ref = by_value.get(value_id)
        if ref is None:
            continue
        if ref.storage_id in by_storage:
            first, united = by_storage[ref.storage_id]
            by_storage[ref.storage_id] = (first, united.union(region))
        else:
            by_storage[ref.storage_id] = (ref, region)
    return tuple(replace(ref, elements=region.count) for ref, region in by_storage.values())
