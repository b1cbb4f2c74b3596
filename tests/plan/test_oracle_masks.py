"""The bound against the dependence oracle (tests/oracle.py) on programs that read their inputs
in part through masks made in ``forward``: attention written by hand under a causal mask
(``triu(ones).bool()``, ``~tril(ones(bool))``, ``tril(ones) == 0``, at a drawn diagonal) or a
padding mask (``arange(n) >= valid``, one length per row or for all), filled with −inf before a softmax or with 0 before the
second product (``masked_fill`` or ``where``); a triangle of the data summed along its rows;
norms and softmaxes over a slice or a strided part of each row.

Programs: one to three stages over a small 2-D tensor (test_oracle_selection's
:func:`program`), then a tail that keeps a part of the result; checked for tightness and
soundness as there. Below them, the cases the generator found, as closed forms.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from test_oracle import HYPOTHESIS
from test_oracle_selection import Draw, Stage, assert_generated_tight_and_sound


def _mask(draw: Draw, rows: int, columns: int, keep_diagonal: bool) -> Callable[[], torch.Tensor]:
    """What makes (in ``forward``) a (rows, columns) mask from constants, True where masked:
    above a drawn diagonal
    (0 or 1 when ``keep_diagonal``, so no row is wholly masked, else −1 too), spelled three
    ways, or the columns from a drawn valid length on (one for all rows, or one per row)."""
    shift = draw(st.sampled_from([0, 1] if keep_diagonal else [-1, 0, 1]))
    valid = draw(st.integers(1, columns))
    lengths = draw(st.lists(st.integers(1, columns), min_size=rows, max_size=rows))
    return {
        "ragged": lambda: torch.arange(columns)[None] >= torch.tensor(lengths)[:, None],
        "triu_bool": lambda: torch.triu(torch.ones(rows, columns), shift + 1).bool(),
        "not_tril": lambda: ~torch.ones(rows, columns, dtype=torch.bool).tril(shift),
        "tril_eq0": lambda: torch.tril(torch.full((rows, columns), 2.0), shift) == 0,
        "padding": lambda: (torch.arange(columns) >= valid)[None].expand(rows, columns),
    }[draw(st.sampled_from(["triu_bool", "not_tril", "tril_eq0", "padding", "ragged"]))]


def _attention(draw: Draw, rows: int, columns: int) -> Stage:
    """x's rows as tokens attending to x's (or its flipped features') rows: softmax of the
    masked scores (−inf) times x, or the scores filled with 0 (``masked_fill`` or ``where``)
    times x."""
    kind = draw(st.sampled_from(["softmax", "zero_fill", "zero_where"]))
    flip = draw(st.booleans())
    make = _mask(draw, rows, rows, keep_diagonal=kind == "softmax")
    scale = 1 / math.sqrt(columns)

    def attend(x: torch.Tensor) -> torch.Tensor:
        keys = x.flip(1) if flip else x
        scores, masked = x @ keys.transpose(0, 1) * scale, make()
        if kind == "softmax":
            return scores.masked_fill(masked, float("-inf")).softmax(-1) @ x
        if kind == "zero_fill":
            return scores.masked_fill(masked, 0.0) @ x
        return torch.where(masked, 0.0, scores) @ x

    return attend, (rows, columns)


def _masked_sum(draw: Draw, rows: int, columns: int) -> Stage:
    """The elements a mask made from constants leaves of x (a triangle or the first columns),
    summed along each row (a column of sums) or kept (0 elsewhere)."""
    make = _mask(draw, rows, columns, keep_diagonal=False)
    if draw(st.booleans()):
        return (lambda x: x.masked_fill(make(), 0.0).sum(1, keepdim=True)), (rows, 1)
    return (lambda x: torch.where(make(), 0.0, x.exp())), (rows, columns)


def _sliced_norm(draw: Draw, rows: int, columns: int) -> Stage:
    """A layer norm, a softmax or an RMS norm by hand over a slice of each row (``start:stop``)
    or its every other element from a drawn start."""
    start = draw(st.integers(0, columns - 1))
    stop = draw(st.integers(start + 1, columns))
    strided = draw(st.booleans())
    cut = slice(start, columns, 2) if strided else slice(start, stop)
    width = len(range(columns)[cut])
    return {
        "layer_norm": lambda x: F.layer_norm(x[:, cut], (width,)),
        "softmax": lambda x: x[:, cut].softmax(1),
        "rms": lambda x: x[:, cut] * x[:, cut].pow(2).mean(1, keepdim=True).add(1e-6).rsqrt(),
    }[draw(st.sampled_from(["layer_norm", "softmax", "rms"]))], (rows, width)


#: Programs that read their inputs in part through masks made in forward and slices
FAMILIES = {"attention": _attention, "masked_sum": _masked_sum, "sliced_norm": _sliced_norm}


@settings(HYPOTHESIS, max_examples=20)
@given(st.data())
def test_generated_masked_and_sliced_programs_are_tight_and_sound(data):
    assert_generated_tight_and_sound(data.draw, FAMILIES)
