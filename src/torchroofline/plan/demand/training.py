"""Demand rules of an optimizer's multi-tensor and fused updates (``_foreach_*``,
``_fused_adam(w)_``, ``_fused_sgd_``): tensor ``j`` of the output list needs tensor ``j`` of
each input list, nothing of the others (a parameter's update reads its own gradient and
moments); a 0-dim scalar argument (a learning-rate tensor) is needed whole by any output.
FLOPs are charged per demanded element.

The backward kernels keep the default rule: each computes what its ``output_mask`` asks, and
autograd asks only for the gradients something needs, so their outputs are demanded whole.
"""

from __future__ import annotations

import math

from ...costs import aten
from ...costs.training import FOREACH_FLOPS_PER_ELEMENT, FUSED_OPTIMIZER_FLOPS_PER_ELEMENT
from ...trace.regions import NOWHERE, Region, fraction_of, full_box
from ._core import Demand, _Context, _proportional, demand_rule


@demand_rule([*FOREACH_FLOPS_PER_ELEMENT, aten._foreach_norm,
              *FUSED_OPTIMIZER_FLOPS_PER_ELEMENT])
def per_tensor_demand(context: _Context) -> Demand:
    """An optimizer's multi-tensor update: tensor j of the output list needs tensor j of each
    input list (a parameter's own gradient and moments) and any 0-dim scalar argument; FLOPs
    per demanded element."""
    first_list = context.op.args[0] if context.op.args else ()
    tensors = len(first_list) if isinstance(first_list, (list, tuple)) else 0
    if not tensors:
        return _proportional(context)
    writes = context.op.writes
    wanted: list[list[tuple[Region, tuple[int, ...]]]] = [[] for _ in range(tensors)]
    for position, (region, ref) in enumerate(zip(context.outputs, writes, strict=True)):
        wanted[position % tensors].append((region, ref.shape))
    inputs = [_needed(ref.shape, wanted[position % tensors]) if ref.shape
              else _needed(ref.shape, [pair for group in wanted for pair in group])
              for position, ref in enumerate(context.op.reads)]
    total = sum(math.prod(ref.shape) for ref in writes)
    share = sum(fraction_of(region, math.prod(ref.shape)) * math.prod(ref.shape)
                for region, ref in zip(context.outputs, writes, strict=True)) / max(total, 1)
    return Demand(tuple(inputs), context.record.flops.scaled(share))


def _needed(shape: tuple[int, ...], wanted: list[tuple[Region, tuple[int, ...]]]) -> Region:
    """What a read of ``shape`` gives the outputs of its tensor's group: the elements they
    want where the shapes match (element-wise updates), all of it for a scalar or a read of
    another shape that some wanted output needs."""
    needed = NOWHERE
    for region, output_shape in wanted:
        if not region:
            continue
        needed = needed.union(region if output_shape == shape and shape
                              else Region.of([full_box(shape)]))
    return needed
