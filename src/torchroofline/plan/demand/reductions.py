"""Demand rules of pointwise ops, reductions, ops along a dim (softmax, scans, sorts) and
normalisations: the rules whose outputs share their line's statistics."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import torch

from ...costs import (
    NO_FLOPS,
    FlopCount,
    MatmulKind,
    OpKey,
    add_rules,
    aten,
    lookup,
)
from ...trace.refs import TensorRef, TracedOp
from ...trace.regions import (
    NOWHERE,
    Box,
    IndexSet,
    Region,
    Spread,
    fraction_of,
    full_box,
    mapped_set,
    normalize,
    positions_to_set,
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
from .constants import _known, _region_where
from .masked import constant_lines, finite_scores, pattern_count
from .numbered import _demanded_mask, _numbers_region, element_sources, source_value
from .structures import ZERO_PATTERNS, _as_written, seen_through


def pointwise_demand(context: _Context) -> Demand:
    """Every pointwise op (the rule for Category.POINTWISE): element i of the output needs
    element i of each (broadcast) input it loads — none of a destination it overwrites or a
    template it takes only the shape of."""
    region = context.output
    out_shape = context.op.writes[0].shape
    inputs = []
    for position, ref in enumerate(context.op.reads):
        if not context.loaded(position):
            inputs.append(NOWHERE)
            continue
        mapped = _broadcast(region, out_shape, ref.shape)
        if mapped is None:
            return _proportional(context)
        inputs.append(mapped)
    share = fraction_of(region, math.prod(out_shape))
    return Demand(tuple(inputs), context.record.flops.scaled(share))


#: Losses of elements alike (their inputs broadcast, each output element one loss), whose
#: ``reduction`` argument 0 keeps every loss (1 averages, 2 sums them into one scalar).
_ELEMENTWISE_LOSSES = [
    aten.mse_loss, aten.l1_loss, aten.smooth_l1_loss, aten.huber_loss, aten.soft_margin_loss,
    aten.binary_cross_entropy, aten.binary_cross_entropy_with_logits, aten.kl_div,
    aten.margin_ranking_loss, aten.hinge_embedding_loss,
]
_KEEPS_EVERY_LOSS = 0


#: Differences of their two inputs and losses of one, f(a − b) with f(0) = 0
_DIFFERENCES = _op_set([aten.sub, aten.mse_loss, aten.l1_loss, aten.smooth_l1_loss,
                        aten.huber_loss])


@demand_rule(_ELEMENTWISE_LOSSES)
def elementwise_loss_demand(context: _Context) -> Demand:
    """A loss of elements alike with ``reduction="none"`` is pointwise: a demanded loss needs
    its own element of each (broadcast) input (``smooth_l1_loss(x, x.flip(1))[:, -1]`` reads
    x's last and first columns; was the share of each input, as a count that two views of one
    tensor share). Averaged or summed to one scalar: every element. A loss of a difference
    whose two inputs hold one element of one tensor at a position is 0 there whatever it
    holds: those positions need nothing (:func:`_without_self_differences`)."""
    per_element = context.argument("reduction", 1) == _KEEPS_EVERY_LOSS
    demand = pointwise_demand(context) if per_element else _proportional(context)
    return _without_self_differences(context, demand, per_element)


def _without_self_differences(context: _Context, demand: Demand, per_element: bool) -> Demand:
    """``demand`` of a difference (or a loss of one) with the positions where its two inputs
    hold one element (:func:`_self_differences`) left out of both inputs: of the demanded
    outputs (``per_element``) or of all. Its FLOPs are the share of the positions that remain
    (an output at a self difference is the constant 0, written with no arithmetic:
    ``x − x.flip(1)`` of width 3 charges 6 of 9 subtractions), none where every demanded output
    is that constant (``x − x``); demanded outputs with no position (a count) are charged as
    positions that remain, as many as there are. As it is for the program as written (``x − x``
    is a shortcut it does not take)."""
    same = _self_differences(context) if context.shortcuts and context.output else None
    if same is None:
        return demand
    shape = context.op.reads[0].shape
    demanded = (_demanded_mask(context.output, shape) if per_element
                else torch.ones(shape, dtype=torch.bool))
    remaining = demanded & ~same
    kept = int(remaining.sum())
    if not kept:
        return Demand((NOWHERE, NOWHERE), NO_FLOPS, structure="self difference")
    unplaced = min(context.output.opaque, int((~same).sum()) - kept) if per_element else 0
    needed = _numbers_region(remaining.reshape(-1).nonzero().reshape(-1), shape)
    flops = context.record.flops.scaled((kept + unplaced) / same.numel())
    return Demand((needed, needed), flops, structure="self difference")


def _self_differences(context: _Context) -> torch.Tensor | None:
    """Where the two inputs of a difference (``sub`` with ``alpha`` 1, a loss of
    :data:`_DIFFERENCES`), of one shape, hold the same element of one tensor
    (``mse_loss(x, x.flip(1))``'s middle column: :func:`element_sources`); None where no
    position does."""
    reads = context.op.reads
    if not _one_of(context.op, _DIFFERENCES) or len(reads) != 2 or (
        reads[0].shape != reads[1].shape or context.argument("alpha", 1) != 1
    ) or source_value(context, reads[0]) != source_value(context, reads[1]):
        return None
    sources = [element_sources(context, ref) for ref in reads]
    if any(found is None for found in sources) or sources[0][0] != sources[1][0]:
        return None
    (_, left), (_, right) = sources
    same = (left == right) & (left >= 0)
    return same if bool(same.any()) else None


@demand_rule([aten.mul])
def product_demand(context: _Context) -> Demand:
    """``a * b``: pointwise, or, both factors known (the given inputs under ``data="given"``,
    constants) with one all zeros and the other all finite, the constant 0 whatever its
    factors hold: nothing read, no FLOPs, the output written (a given ``torch.zeros`` z times
    a given y). For any input values a factor may hold inf or NaN (0·inf is NaN): unknown."""
    reads = context.op.reads
    if len(reads) == 2 and context.loaded(0) and context.loaded(1):
        factors = [_known(context, position) for position in (0, 1)]
        if all(factor is not None for factor in factors) and any(
            not bool(factor.any()) and bool(other.isfinite().all())
            for factor, other in (factors, factors[::-1])
        ):
            return Demand((NOWHERE, NOWHERE), NO_FLOPS, structure="zero factor")
    return pointwise_demand(context)


@demand_rule([aten.glu])
def glu_demand(context: _Context) -> Demand:
    """``glu(x, dim)``: output i along ``dim`` is x[i]·σ(x[i + n/2]): each demanded element
    reads its position in both halves."""
    source = context.op.reads[0]
    rank = len(source.shape)
    region = context.output
    if not rank or any(len(box) != rank for box in region.boxes):
        return _proportional(context)
    dim = context.argument("dim", -1) % rank
    half = source.shape[dim] // 2
    boxes = [
        (*box[:dim], (*index_set, *mapped_set(index_set, half)), *box[dim + 1 :])
        for box in region.boxes
        for index_set in (box[dim],)
    ]
    share = fraction_of(region, math.prod(context.op.writes[0].shape))
    return Demand((Region.of(boxes, 2 * region.opaque),), context.record.flops.scaled(share))


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
        aten.var_mean,
        aten.std_mean,
    ]
)

#: Norms, whose result over a size-1 dimension is |x| (any order p > 0 or ∞; ``x != 0`` for
#: p = 0): one op per output, not none. See :data:`STRUCTURE_RULES`.
_ABS_WHEN_SIZE_ONE = _op_set([aten.linalg_vector_norm, aten.norm])


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
    if reduced == {len(source.shape) - 1} and context.shortcuts and _one_of(
        context.op, _LINEAR_REDUCTIONS
    ):
        rewritten = _reduced_product(context, region)
        if rewritten is not None:
            return rewritten
    share = fraction_of(region, math.prod(context.op.writes[0].shape))
    if all(source.shape[d] == 1 for d in reduced):
        boxes = [_expand_reduced(b, source.shape, reduced, keepdim) for b in region.boxes]
        inputs = (Region.of(boxes, region.opaque), *[NOWHERE] * (len(context.op.reads) - 1))
        if _one_of(context.op, _IDENTITY_WHEN_SIZE_ONE):
            return Demand(inputs, NO_FLOPS, structure="size-1 reduction")
        if _one_of(context.op, _ABS_WHEN_SIZE_ONE):
            return Demand(inputs, FlopCount(vector=region.count), structure="size-1 norm")
        return Demand(
            tuple(NOWHERE for _ in context.op.reads), NO_FLOPS, structure="size-1 reduction"
        )
    boxes = [_expand_reduced(b, source.shape, reduced, keepdim) for b in region.boxes]
    if _one_of(context.op, _IDENTITY_WHEN_SIZE_ONE) and all(
        len(source.strides) == len(source.shape) and source.strides[d] == 0 for d in reduced
    ):
        # every reduced element is the same one (x.expand(n, m).sum(0) = n·x): one op each
        inputs = (Region.of(boxes), *[NOWHERE] * (len(context.op.reads) - 1))
        return Demand(inputs, FlopCount(vector=region.count), structure="broadcast reduction")
    # c outputs with no position need at least c whole reduced lines
    line = math.prod(source.shape[d] for d in reduced)
    inputs = (Region.of(boxes, region.opaque * line), *[NOWHERE] * (len(context.op.reads) - 1))
    nonzeros = _summed_nonzeros(context, reduced, keepdim, region)
    if nonzeros is not None:
        # a sum adds only the elements that may be nonzero: the cost rule's FLOPs per element
        # read, times the demanded lines' nonzeros
        elements = math.prod(source.shape)
        return Demand(inputs, context.record.flops.scaled(nonzeros / elements),
                      structure="sum of structural zeros")
    return Demand(inputs, context.record.flops.scaled(share))


def _summed_nonzeros(context: _Context, reduced: set[int], keepdim: bool,
                     region: Region) -> int | None:
    """Elements the demanded outputs of a sum or mean add that may be nonzero, where its
    source, as written or through a view (``F.pad(x[None], p)[0]``), is an op of
    :data:`.structures.ZERO_PATTERNS` (a zero pad, a triangle, a diagonal); an output with no
    position counts its line with the fewest; None elsewhere."""
    source = context.op.reads[0]
    producer = context.producers.get(source.value_id)
    if not _one_of(context.op, _LINEAR_REDUCTIONS) or producer is None or not producer.writes:
        return None
    pattern = lookup(ZERO_PATTERNS, producer)
    written = pattern(producer) if pattern else None
    nonzeros = None if written is None else seen_through(written, source, producer.writes[0])
    if nonzeros is None:
        return None
    per_output = nonzeros.sum(sorted(reduced), keepdim=keepdim)
    demanded = per_output[_demanded_mask(region, tuple(per_output.shape))]
    return int(demanded.sum()) + region.opaque * int(per_output.min())


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
    return Demand(
        (NOWHERE,), flops, extra, structure="reduced product", absorbed=(source.value_id,)
    )


#: Matrix products a column reduction can be moved into (:func:`_reduced_product`).
_PRODUCTS = _op_set([aten.mm, aten.addmm])


_CONSTANT_WHEN_SIZE_ONE = _op_set(
    [aten._softmax, aten.softmax, aten._safe_softmax, aten._log_softmax, aten.log_softmax]
)


_SCANS = _op_set([aten.cumsum, aten.cumprod, aten.logcumsumexp, aten.cummax, aten.cummin])


def _line_needed(op: TracedOp, demanded: IndexSet, line: int, hit: bool = False) -> IndexSet:
    """Positions along ``dim`` that demanded outputs need: a scan (cumsum, cummax…) the prefix
    up to the last demanded position (up to the first where ``demanded`` is a spread's hit set:
    which of its positions each line holds is unknown), everything else the whole line."""
    if _one_of(op, _SCANS) and demanded:
        last = (min if hit else max)(r[0] if hit else r[-1] for r in demanded if r)
        return (range(0, last + 1),)
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
    if source.shape[dim] == 1 and context.shortcuts and _one_of(
        context.op, _CONSTANT_WHEN_SIZE_ONE
    ):
        return Demand((NOWHERE,), NO_FLOPS, structure="size-1 normalisation")
    region = context.output
    if any(len(box) != rank for box in region.boxes):
        return _proportional(context)
    if _one_of(context.op, _CONSTANT_WHEN_SIZE_ONE):
        masked = _masked_softmax_demand(context, dim)
        if masked is not None:
            return masked
    line = source.shape[dim]
    boxes = [
        (*box[:dim], _line_needed(context.op, box[dim], line), *box[dim + 1 :])
        for box in region.boxes
    ]
    # c outputs with no position lie on at least ⌈c / line⌉ lines; those known dim by dim
    # (a diagonal's) on the lines through their indices
    spreads = [
        s.lines({dim: _line_needed(context.op, s.box[dim], line, s.hit[dim])})
        for s in region.spreads
    ]
    needed = Region.of(boxes, -(-region.opaque // line) * line if line else 0, spreads)
    flops = _shared_statistics_flops(context, needed, region)
    return Demand((needed, *(NOWHERE for _ in context.op.reads[1:])), flops)


@demand_rule([aten._fft_r2c, aten._fft_c2c, aten._fft_c2r])
def fft_demand(context: _Context) -> Demand:
    """An FFT's output element needs the whole input line along every transformed dim (each
    frequency sums every sample; each sample every frequency) at its own index elsewhere.
    FLOPs: the demanded outputs' share of the transform, and at least n − 1 per line holding a
    demanded output (one frequency of n samples is a sum of n terms: ``rfft(x)[:, 0]`` is the
    row sums, never more than the line's share of the transform) and one more for each other
    demanded output of the line (a distinct linear form of the same inputs: one op at least),
    never more than the whole transform. A real FFT along one dim kept for one part of its
    outputs alone (``fft(x).imag``): the samples that part weighs (:func:`_fft_part_demand`)."""
    source = context.op.reads[0]
    region = context.output
    if any(len(box) != len(source.shape) for box in region.boxes):
        return _proportional(context)
    transformed = {d % len(source.shape) for d in context.argument("dim", ())}
    part = context.parts.get(context.op.writes[0].value_id)
    if part is not None and len(transformed) == 1 and _one_of(context.op, _REAL_FFTS) and not (
        region.opaque or region.spreads
    ):
        return _fft_part_demand(context, part, *transformed)
    whole = {d: (range(source.shape[d]),) for d in transformed}
    boxes = [tuple(whole.get(d, s) for d, s in enumerate(box)) for box in region.boxes]
    line = math.prod(source.shape[d] for d in transformed)
    frequencies = math.prod(context.op.writes[0].shape[d] for d in transformed)
    # c outputs with no position lie on at least ⌈c / frequencies⌉ lines
    opaque = -(-region.opaque // max(frequencies, 1)) * line
    needed = Region.of(boxes, opaque, region.lines(whole))
    moved = context.record.flops
    flops = moved.scaled(context.fraction)
    per_line = min(line - 1, moved.vector * line // max(math.prod(source.shape), 1))
    lines = needed.count // max(line, 1)
    further = max(region.count - lines, 0) if line > 1 else 0
    floor = min(lines * per_line + further, moved.vector)
    if floor > flops.vector:  # (the transform is vector work: costs.complex_fft_flops)
        flops = replace(flops, vector=floor)
    return Demand((needed,), flops)


#: FFTs of real samples (rfft, and fft of a real tensor)
_REAL_FFTS = _op_set([aten._fft_r2c])

#: Most (sample, frequency) pairs :func:`_part_weights` weighs; past it every sample counts.
_PART_PAIRS = 1 << 22


def _fft_part_demand(context: _Context, part: int, dim: int) -> Demand:
    """One part of a real FFT's outputs (``fft(x).imag``: :attr:`_Context.parts`) along one
    dim: Re X_k = Σ_j x_j cos(2πjk/n), Im X_k = −Σ_j x_j sin(2πjk/n), so a demanded output
    needs the samples its part weighs by nonzero (``imag`` skips x_0, and ``Im X_0`` needs
    nothing). FLOPs per line, at least: the most samples one kept output weighs, less one (its
    adds), and one op for each other kept output weighing any (a distinct form of them), never
    more than the transform; or the demanded outputs' share of it, if more."""
    source = context.op.reads[0]
    n = source.shape[dim]
    boxes, floor = [], 0
    for box in context.output.boxes:
        weights = _part_weights(part, n, [k for r in box[dim] for k in r])
        samples = weights.any(1).nonzero().reshape(-1).tolist()
        if samples:
            boxes.append((*box[:dim], positions_to_set(samples), *box[dim + 1 :]))
        live = int(weights.any(0).sum())
        if live:
            lines = math.prod(set_size(s) for d, s in enumerate(box) if d != dim)
            floor += lines * (int(weights.sum(0).max()) - 1 + live - 1)
    moved = context.record.flops
    flops = moved.scaled(context.fraction)
    floor = min(floor, moved.vector)
    if floor > flops.vector:
        flops = replace(flops, vector=floor)
    return Demand((Region.of(boxes),), flops, structure=None)


def _part_weights(part: int, n: int, frequencies: list[int]) -> torch.Tensor:
    """(n, frequencies) booleans: whether the real (``part`` 0) or imaginary (1) part of
    frequency k of n real samples weighs sample j by nonzero: cos(2πm/n) = 0 where 4m ≡ n
    (mod 2n), sin(2πm/n) = 0 where 2m ≡ 0 (mod n), m = jk mod n. Past :data:`_PART_PAIRS`
    pairs: every pair."""
    if n * len(frequencies) > _PART_PAIRS:
        return torch.ones(n, len(frequencies), dtype=torch.bool)
    m = torch.arange(n)[:, None] * torch.tensor(frequencies, dtype=torch.int64)[None] % n
    return (2 * m) % n != 0 if part else (4 * m) % (2 * n) != n


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


def _shared_statistics_flops(context: _Context, needed: Region | int,
                             demanded: Region | int) -> FlopCount:
    """FLOPs of an op whose output elements share their line's statistics: a demanded element
    costs its whole line's statistics, not 1/line of them — the statistics FLOPs per input
    element over every ``needed`` input element, then :data:`APPLY_FLOPS` per ``demanded``
    output element (each a region, or a count of elements)."""
    needed, demanded = (r if isinstance(r, int) else r.count for r in (needed, demanded))
    moved = context.record.flops
    apply = lookup(APPLY_FLOPS, context.op) or 0
    outputs = math.prod(context.op.writes[0].shape)
    statistics = max(moved.vector - apply * outputs, 0)
    vector = statistics * needed // max(math.prod(context.op.reads[0].shape), 1)
    vector += apply * demanded
    return replace(moved, vector=min(vector, moved.vector))


def _masked_softmax_demand(context: _Context, dim: int) -> Demand | None:
    """A softmax or log-softmax along ``dim`` of scores masked with −inf by known values
    (:func:`.masked.finite_scores`): a line left one finite score (causal row 0) or none is a
    constant (the one-hot; NaN), needing nothing; each other demanded line needs its scores,
    its statistics counted over the finite ones (exp(−inf) is 0, no work), and the apply FLOPs
    over its finite demanded outputs. None where the scores are not so masked. The scores
    are read at their finite positions only (a masked one is the constant −inf whatever the
    data under it: ``s + bias`` need not read s there), in bands (a floor)."""
    source = context.op.reads[0]
    region = context.output
    finite = finite_scores(context, source)
    if finite is None or region.opaque or region.spreads or region.diagonals:
        return None
    constants = constant_lines(finite, dim, source.shape)
    if constants is None:
        return None
    for box in constants:
        region = region.minus_box(box)
    line = (range(source.shape[dim]),)
    lines = [(*box[:dim], line, *box[dim + 1 :]) for box in region.boxes]
    flops = _shared_statistics_flops(
        context, pattern_count(finite, lines), pattern_count(finite, region.boxes)
    )
    needed = _region_where(finite, Region.of(lines))
    return Demand((needed, *(NOWHERE for _ in context.op.reads[1:])), flops,
                  structure="masked probabilities")


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
    spreads = [
        Spread(statistics.input_box(box, shape),
               tuple(is_hit and d not in statistics.whole for d, is_hit in enumerate(hit)))
        for box, hit in main.spreads
    ]
    needed = Region.of(boxes, -(-opaque // line) * line if line else 0, spreads)
    params = []
    for ref in context.op.reads[1:]:
        if statistics.channel_params and len(ref.shape) == 1 and len(shape) > 1:
            params.append(Region.of([(box[1],) for box in main.boxes]))
        else:
            params.append(_broadcast(main, shape, ref.shape) or NOWHERE)
    return Demand((needed, *params), _shared_statistics_flops(context, needed, main))


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
    return Demand(inputs, context.record.flops.scaled(share))


#: Reductions that are their input itself over dims of size 1 (not nansum: a NaN becomes 0).
_SELF_OVER_SIZE_ONE = _op_set(
    [aten.sum, aten.mean, aten.amax, aten.amin, aten.prod, aten.max.dim, aten.min.dim]
)


def _is_self_over_size_one(context: _Context, value: TensorRef, of: TensorRef) -> bool:
    """Whether ``value`` is a size-1 reduction of exactly the view ``of`` (same element order,
    same shape), i.e. the same numbers."""
    producer = context.producers.get(value.value_id)
    if producer is None or not _one_of(producer, _SELF_OVER_SIZE_ONE) or not producer.reads:
        return False
    source = producer.reads[0]
    reduced = _reduced_dims(producer.argument("dim"), len(source.shape))
    return (
        all(source.shape[d] == 1 for d in reduced)
        and value.shape == source.shape
        and (source.value_id, source.shape, source.strides, source.offset)
        == (of.value_id, of.shape, of.strides, of.offset)
    )


@demand_rule([aten.sub])
def difference_demand(context: _Context) -> Demand:
    """``x − r(x)`` (or ``r(x) − x``) with ``r`` a sum, mean, max… over dims of size 1 only, which
    is ``x`` itself: zero for every finite ``x``, so nothing upstream is needed (KernelBench
    level 2 #80's ``x − x.mean(1, keepdim=True)`` after a max over dim 1). Else pointwise, less
    the positions where both inputs hold one element (:func:`_without_self_differences`:
    ``x − x.flip(1)``'s middle column)."""
    reads = context.op.reads
    if len(reads) == 2 and context.shortcuts and context.argument("alpha", 1) == 1 and (
        _is_self_over_size_one(context, reads[1], reads[0])
        or _is_self_over_size_one(context, reads[0], reads[1])
    ):
        return Demand((NOWHERE, NOWHERE), NO_FLOPS, structure="self difference")
    return _without_self_differences(context, pointwise_demand(context), per_element=True)
