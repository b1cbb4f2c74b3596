"""The bound against the dependence oracle (tests/oracle.py) on recurrences read in part: the
cells (``RNNCell`` with tanh or ReLU, ``LSTMCell``, ``GRUCell``) stepped over a short sequence
by a Python loop, from a given or a zero state, and the whole layers (``RNN``, ``LSTM``,
``GRU``: one or two layers, one or both directions, batch first or not), each followed by a
tail that keeps a part of what they return (a step, a sample, some features, a final state, a
cell state, a mean).

Each program is checked for tightness (compulsory bytes ≥ 0.95 × the oracle's bytes, per op
FLOPs ≥ 0.95 × the proven ones) and soundness (compulsory bytes ≤ every input, parameter and
constant read once and the outputs written once; compulsory ≤ fused ≤ unfused bytes;
necessary ≤ executed FLOPs). Below it, the cases the generator found, as closed forms.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.nn as nn
from hypothesis import given, settings
from hypothesis import strategies as st
from test_oracle import HYPOTHESIS, assert_tight, figures
from test_oracle_selection import assert_sound

Draw = Callable[..., Any]  #: hypothesis's ``data.draw``

#: what a stepped cell's program keeps of its (steps, batch, hidden) outputs and final state
CELL_TAILS: dict[str, Callable[[torch.Tensor, torch.Tensor], Any]] = {
    "all": lambda outs, last: outs,
    "first_step": lambda outs, last: outs[0],
    "last_state": lambda outs, last: last,
    "sample_0": lambda outs, last: outs[:, 0],
    "feature_0": lambda outs, last: outs[..., 0],
    "state_features": lambda outs, last: last[:, 1:],
    "mean_steps": lambda outs, last: outs.mean(0),
}


class SteppedCell(nn.Module):
    """``cell`` applied to each of the ``steps`` inputs in turn from a zero or a given state
    (an LSTM cell's state is (h, c): ``keep_cell`` keeps c as the final state)."""

    def __init__(self, cell: nn.Module, tail: Callable, given_state: bool,
                 keep_cell: bool) -> None:
        super().__init__()
        self.cell, self.tail, self.given_state, self.keep_cell = (
            cell, tail, given_state, keep_cell
        )

    def forward(self, x: torch.Tensor, h: torch.Tensor) -> Any:
        lstm = isinstance(self.cell, nn.LSTMCell)
        state = ((h, h.tanh()) if lstm else h) if self.given_state else None
        outs = []
        for step in x:
            state = self.cell(step, state)
            outs.append(state[0] if lstm else state)
        last = state[1] if lstm and self.keep_cell else outs[-1]
        return self.tail(torch.stack(outs), last)


def cell(draw: Draw) -> tuple:
    """A cell of (2..3 inputs, 2..4 hidden) stepped 1..3 times over batch 1..2."""
    torch.manual_seed(draw(st.integers(0, 2**16)))
    steps, batch = draw(st.integers(1, 3)), draw(st.integers(1, 2))
    inputs, hidden = draw(st.integers(2, 3)), draw(st.integers(2, 4))
    kind = draw(st.sampled_from(["tanh", "relu", "lstm", "gru"]))
    module = {
        "tanh": lambda: nn.RNNCell(inputs, hidden),
        "relu": lambda: nn.RNNCell(inputs, hidden, nonlinearity="relu"),
        "lstm": lambda: nn.LSTMCell(inputs, hidden),
        "gru": lambda: nn.GRUCell(inputs, hidden),
    }[kind]()
    model = SteppedCell(module, CELL_TAILS[draw(st.sampled_from(sorted(CELL_TAILS)))],
                        draw(st.booleans()), draw(st.booleans()))
    return model, torch.randn(steps, batch, inputs), torch.randn(batch, hidden)


#: what a program keeps of a whole layer's (output, final state)
LAYER_TAILS: dict[str, Callable[[Any], Any]] = {
    "output": lambda y: y[0],
    "step_0": lambda y: y[0][0],
    "last_step": lambda y: y[0][-1],
    "features_0": lambda y: y[0][..., :1],
    "final_layer_0": lambda y: (y[1][0] if isinstance(y[1], tuple) else y[1])[0],
    "final_last": lambda y: (y[1][0] if isinstance(y[1], tuple) else y[1])[-1],
    "cell_state": lambda y: y[1][1] if isinstance(y[1], tuple) else y[1],
    "output_sum": lambda y: y[0].sum(-1),
}


class Layer(nn.Module):
    def __init__(self, layer: nn.Module, tail: Callable[[Any], Any]) -> None:
        super().__init__()
        self.layer, self.tail = layer, tail

    def forward(self, x: torch.Tensor) -> Any:
        return self.tail(self.layer(x))


def layer(draw: Draw) -> tuple:
    """A whole RNN, LSTM or GRU of (2..3 inputs, 2..3 hidden), 1..2 layers, one or both
    directions, over 1..3 steps."""
    torch.manual_seed(draw(st.integers(0, 2**16)))
    kind = draw(st.sampled_from([nn.RNN, nn.LSTM, nn.GRU]))
    steps, batch = draw(st.integers(1, 3)), draw(st.integers(1, 2))
    inputs, hidden = draw(st.integers(2, 3)), draw(st.integers(2, 3))
    first = draw(st.booleans())
    module = kind(inputs, hidden, draw(st.integers(1, 2)), batch_first=first,
                  bidirectional=draw(st.booleans()))
    x = torch.randn(batch, steps, inputs) if first else torch.randn(steps, batch, inputs)
    return Layer(module, LAYER_TAILS[draw(st.sampled_from(sorted(LAYER_TAILS)))]), x


@settings(HYPOTHESIS, max_examples=15)
@given(st.data())
def test_generated_recurrences_are_tight_and_sound(data):
    found = figures(*data.draw(st.sampled_from([cell, cell, layer]))(data.draw))
    assert_tight(found)
    assert_sound(found)


# --- the cases the generator found -----------------------------------------------------------


def test_a_cell_from_no_given_state_multiplies_none_of_its_zeros() -> None:
    # RNNCell(2, 2) on x (1, 2) with no state: tanh(x W_ihᵀ + b_ih + 0 W_hhᵀ + b_hh), the
    # state zeros made in forward. x W_ihᵀ + b_ih is 2·1·2·2 = 8 FLOPs, the add of the second
    # addmm's output 2, the tanh 2: 12; the second addmm is b_hh itself (no FLOP). The oracle
    # claimed its 8 FLOPs as proven (its share of outputs demanded), not seeing the zeros: it
    # now counts a product's pairs where both factors may be nonzero for addmm as for mm
    torch.manual_seed(0)
    found = figures(SteppedCell(nn.RNNCell(2, 2), CELL_TAILS["all"], False, False),
                    torch.randn(1, 1, 2), torch.randn(1, 2))
    assert found.result.flops == 8 + 2 + 2
    assert_tight(found)
