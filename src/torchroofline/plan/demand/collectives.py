"""Demand of a distributed trace's collectives (:mod:`...trace.distributed`): whatever part
of its output the rank needs, it sends the whole of its inputs, which the other ranks' outputs
need (a reduce-scatter's shard of rank 0 comes from every rank's input; rank 0's input feeds
every other shard). So any demanded output needs every input element."""

from __future__ import annotations

import torch

from ...trace.distributed import COLLECTIVE_KINDS
from ...trace.regions import Region, full_box
from ._core import Demand, _Context, demand_rule


def _packets() -> list:
    """The collective packets this PyTorch build has (a build without distributed has none)."""
    found = []
    for name in COLLECTIVE_KINDS:
        namespace, _, op = name.partition(".")
        packet = getattr(getattr(torch.ops, namespace), op, None)
        if packet is not None:
            found.append(packet)
    return found


@demand_rule(_packets())
def whole_inputs(context: _Context) -> Demand:
    return Demand(
        tuple(Region.of([full_box(ref.shape)]) for ref in context.op.reads),
        context.record.flops,
    )
