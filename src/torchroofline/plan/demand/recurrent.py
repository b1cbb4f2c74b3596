"""Demand rule of a whole recurrent network (``torch._VF.lstm/gru/rnn_*``, one traced op): which
steps of which layer and direction the kept outputs need.

A forward direction's step t needs its steps 0..t, a backward one's steps t..T−1; a layer's
step t reads the layer below at step t (both its directions); ``h_n``/``c_n`` of one layer and
direction need all of its steps. Batch rows are independent. So the last step of a
one-direction network needs everything, but its first step (``out[0]``) needs one step of each
layer, and ``h_n[0]`` of a two-layer network needs the first layer only."""

from __future__ import annotations

import dataclasses

from ...costs import INTERCEPTED_KEYS, FlopCount
from ...costs.matmul import RNN_CELL_FLOPS, RNN_GATES
from ...trace.regions import NOWHERE, IndexSet, Region, normalize, set_size
from ._core import Demand, _Context, _proportional, demand_rule
from .constants import _known

#: Share of a one-step cell's input weights and biases the outputs need when its initial state
#: is known to be zero (the default): an LSTM's forget gate multiplies c₀ = 0, so it is not
#: needed; the others need every gate. One such step needs no recurrent weight either (its
#: product with h₀ = 0 is 0). Later steps are charged in full, the first one's product too.
_ONE_STEP_SHARE = {"lstm": 3 / 4, "gru": 1.0, "rnn_tanh": 1.0, "rnn_relu": 1.0}


@dataclasses.dataclass(frozen=True)
class _Layout:
    """Where the time, batch and feature dims of the input and ``output`` are."""

    time: int
    batch: int | None  #: None: an unbatched input (time, features)
    steps: int
    rows: int


def _layout(context: _Context) -> _Layout:
    input_, batch_first = context.op.args[0], context.op.args[8]
    if input_.dim() == 2:
        return _Layout(0, None, input_.shape[0], 1)
    time = 1 if batch_first else 0
    return _Layout(time, 1 - time, input_.shape[time], input_.shape[1 - time])


def _top_needs(
    context: _Context, layout: _Layout, directions: int, layers: int
) -> tuple[dict[tuple[int, int], range], IndexSet] | None:
    """(layer, direction) → the steps the kept outputs read directly, and the batch rows they
    read; None where a demanded output has no box (unknown positions)."""
    if any(region.opaque or region.spreads for region in context.outputs):
        return None
    hidden = context.op.writes[0].shape[-1] // directions
    last = layout.steps - 1
    needs: dict[tuple[int, int], range] = {}
    rows: list[range] = []
    for box in context.outputs[0].boxes:
        steps = box[layout.time]
        rows += box[layout.batch] if layout.batch is not None else [range(1)]
        for direction in range(directions):
            units = range(direction * hidden, (direction + 1) * hidden)
            if not any(range(max(r.start, units.start), min(r.stop, units.stop))
                       for r in box[-1]):
                continue
            first, latest = min(s[0] for s in steps), max(s[-1] for s in steps)
            reach = range(0, latest + 1) if direction == 0 else range(first, last + 1)
            needs[(layers - 1, direction)] = _hull(needs.get((layers - 1, direction)), reach)
    for region in context.outputs[1:]:  # h_n, c_n: (layers · directions[, batch], hidden)
        for box in region.boxes:
            rows += box[1] if layout.batch is not None else [range(1)]
            for index in (i for r in box[0] for i in r):
                needs[divmod(index, directions)] = range(layout.steps)
    return needs, normalize(rows)


def _hull(old: range | None, new: range) -> range:
    return new if old is None else range(min(old.start, new.start), max(old.stop, new.stop))


def _steps_below(needs: dict[tuple[int, int], range], layer: int, directions: int) -> IndexSet:
    """Steps of layer ``layer``'s input (the layer below's output) its needed steps read."""
    return normalize(needs[(layer, d)] for d in range(directions) if (layer, d) in needs)


@demand_rule([INTERCEPTED_KEYS[cell] for cell in RNN_CELL_FLOPS])
def recurrent_demand(context: _Context) -> Demand:
    """Each needed step of a (layer, direction) needs its input at that step, its weights, the
    batch rows' initial state and its share of the FLOPs (:func:`costs.rnn_flops`'s per-step
    terms); steps nobody needs cost nothing. Unknown positions: every step (the rule of
    :func:`_core._proportional`)."""
    _, state, weights, _, layers, _, _, bidirectional, _ = context.op.args
    directions = 2 if bidirectional else 1
    states = len(state) if isinstance(state, (tuple, list)) else 1
    layout = _layout(context)
    top = _top_needs(context, layout, directions, layers)
    if top is None or len(context.op.reads) != 1 + states + len(weights):
        return _proportional(context)
    needs, rows = top
    zero_state = all(
        (value := _known(context, position)) is not None and not value.any()
        for position in range(1, 1 + states)
    )
    for layer in range(layers - 1, 0, -1):  # the layer below feeds every needed step
        steps = _steps_below(needs, layer, directions)
        if not steps:
            continue
        first, latest = min(s[0] for s in steps), max(s[-1] for s in steps)
        for direction in range(directions):
            reach = range(0, latest + 1) if direction == 0 else range(first, layout.steps)
            needs[(layer - 1, direction)] = _hull(needs.get((layer - 1, direction)), reach)
    return Demand(
        _input_regions(context, layout, needs, rows, (states, directions, zero_state)),
        _needed_flops(context, needs, set_size(rows), (directions, zero_state)),
    )


def _input_regions(
    context: _Context,
    layout: _Layout,
    needs: dict[tuple[int, int], range],
    rows: IndexSet,
    counts: tuple[int, int, bool],
) -> tuple[Region, ...]:
    """What the needed steps read: the input at the first layer's steps, the initial state of
    each needed (layer, direction) and its weights (see :data:`_ONE_STEP_SHARE`)."""
    states, directions, zero_state = counts
    input_ref = context.op.reads[0]
    steps = _steps_below(needs, 0, directions)
    box: list[IndexSet] = [(range(size),) for size in input_ref.shape]
    box[layout.time] = steps
    if layout.batch is not None:
        box[layout.batch] = rows
    regions = [Region.of([tuple(box)]) if steps else NOWHERE]
    for ref in context.op.reads[1 : 1 + states]:  # (layers · directions[, batch], hidden)
        held = normalize(range(k[0] * directions + k[1], k[0] * directions + k[1] + 1)
                         for k in needs)
        middle = (rows,) if len(ref.shape) == 3 else ()
        regions.append(Region.of([(held, *middle, (range(ref.shape[-1]),))]) if held else NOWHERE)
    weights = context.op.reads[1 + states :]
    per_layer = len(weights) // (context.op.args[4] * directions)
    cell = context.op.base
    for index, ref in enumerate(weights):
        key = divmod(index // per_layer, directions)
        kind = index % per_layer  # w_ih, w_hh[, b_ih, b_hh][, w_hr]
        if key not in needs:
            regions.append(NOWHERE)
        elif len(needs[key]) > 1 or not zero_state or kind == per_layer - 1 and per_layer in (3, 5):
            regions.append(Region.of([tuple((range(size),) for size in ref.shape)]))
        elif kind == 1:  # the recurrent weight of one step from h₀: see _ONE_STEP_SHARE
            regions.append(NOWHERE)
        else:
            regions.append(Region(opaque=int(ref.elements * _ONE_STEP_SHARE[cell])))
    return tuple(regions)


def _needed_flops(
    context: _Context,
    needs: dict[tuple[int, int], range],
    rows: int,
    counts: tuple[int, bool],
) -> FlopCount:
    """:func:`costs.rnn_flops` for the needed steps and rows of each (layer, direction): the
    recurrent GEMM for all but a first step, the input GEMM and cell math for each (a lone first
    step at :data:`_ONE_STEP_SHARE`)."""
    directions, zero_state = counts
    weights = context.op.args[2]
    per_layer = len(weights) // (context.op.args[4] * directions)
    hidden = weights[0].shape[0] // RNN_GATES[context.op.base]
    tensor = vector = 0
    for (layer, direction), steps in needs.items():
        w_ih, w_hh, *rest = weights[(layer * directions + direction) * per_layer :][:per_layer]
        projection = rest[-1].numel() if per_layer in (3, 5) else 0
        first = len(steps) == 1 and zero_state  # a lone first step from a zero state
        share = _ONE_STEP_SHARE[context.op.base] if first else 1.0
        tensor += 2 * rows * (int(len(steps) * w_ih.numel() * share) + len(steps) * projection
                              + (len(steps) - first) * w_hh.numel())
        vector += int(len(steps) * rows * hidden * RNN_CELL_FLOPS[context.op.base] * share)
    executed = context.record.flops
    return dataclasses.replace(
        executed, tensor=min(tensor, executed.tensor), vector=min(vector, executed.vector)
    )
