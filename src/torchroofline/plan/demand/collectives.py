"""Demand of a distributed trace's collectives (:mod:`...trace.distributed`), keyed by name in
:data:`._core.LIBRARY_DEMAND`."""

from __future__ import annotations

from ...trace.distributed import COLLECTIVE_KINDS
from ...trace.regions import Region, full_box
from ._core import LIBRARY_DEMAND, Demand, _Context


def whole_inputs(context: _Context) -> Demand:
    """A collective: whatever part of its output the rank needs, it sends the whole of its
    inputs, which the other ranks' outputs need (rank 0's input of a reduce-scatter feeds every
    rank's shard), so any demanded output needs every input element; its FLOPs all."""
    return Demand(
        tuple(Region.of([full_box(ref.shape)]) for ref in context.op.reads),
        context.record.flops,
    )


LIBRARY_DEMAND.update(dict.fromkeys(COLLECTIVE_KINDS, whole_inputs))
