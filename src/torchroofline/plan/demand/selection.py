"""Demand rules of selections by data: masks (``masked_fill``, ``where``) and losses that
pick one score per target (gathers: :mod:`.gathers`; scatters: :mod:`.scatters`)."""

from __future__ import annotations

import math

import torch

from ...costs import DESTINATION_ACCESS, NO_FLOPS, aten, lookup
from ...trace.refs import TracedOp
from ...trace.regions import NOWHERE, Region, full_box, positions_to_set
from ._core import Demand, _broadcast, _Context, _data_chosen, _proportional, demand_rule
from .constants import _known, _region_where, _unexpanded
from .numbered import _demanded_mask, _numbers_region
from .triangles import made_triangle, triangle_where


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
    :func:`known_values`; a triangle of a fill made in forward, at any size:
    :func:`made_triangle`, counted exactly) picks known elements: each tensor is needed where
    it is picked. A
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
    # a triangle made in forward is known from its ops, exactly, at any size
    triangle = made_triangle(context, mask_position)
    if triangle is not None:
        for position in others:
            where = triangle if names[position] == when_true else triangle.negated()
            chosen = triangle_where(where, region)
            inputs[position] = _broadcast(chosen, out_shape, context.op.reads[position].shape)
    elif mask is None:
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

