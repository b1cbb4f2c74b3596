"""Demand rules of matrix products and attention."""

from __future__ import annotations

import math
from collections.abc import Sequence

from ..costs import (
    FlopCount,
    MatmulKind,
    aten,
)
from ..regions import (
    Box,
    IndexSet,
    Region,
    box_size,
    positions_to_set,
    set_size,
)
from ._core import (
    Demand,
    _biases,
    _broadcast,
    _broadcast_batch,
    _Context,
    _proportional,
    demand_rule,
)
from .structures import _structure


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
