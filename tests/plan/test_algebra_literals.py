"""Zero and one tensors as literals (torchroofline.plan.algebra.literals): x · zeros is 0,
x · ones, x / ones, x + zeros and x − zeros are x, where the tensor is known to be 0 or 1
throughout; a tensor of other values, or one that broadcasts x, is no literal."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
from test_algebra import _Buffered, _double, _replacement, _rules, _With

from conftest import analyze, meta

M = 1024


@pytest.mark.parametrize(
    ("function", "rule", "flops"),
    [
        # the product is never needed: the output (M × M) is written
        (lambda s, x: (x @ s.w) * torch.zeros(1, device=x.device), "x·0 = 0", 0),
        (lambda s, x: (x @ s.w) * s.zeros, "x·0 = 0", 0),
        # the product (2·M³) and the ReLU (one per element) stay, the multiply or add by the
        # literal goes
        (lambda s, x: torch.relu((x @ s.w) * s.ones), "x mul 1 = x", 2 * M**3 + M * M),
        (lambda s, x: torch.relu((x @ s.w) / s.ones), "x div 1 = x", 2 * M**3 + M * M),
        (lambda s, x: torch.relu(s.zeros + x @ s.w), "x add 0 = x", 2 * M**3 + M * M),
    ],
    ids=["zeros-made", "zeros-buffer", "ones", "divide-ones", "add-zeros"],
)
def test_a_zero_or_one_tensor_acts_as_the_number(function: Callable, rule: str,
                                                 flops: int) -> None:
    model = _Buffered(function, zeros=torch.zeros(M, M), ones=torch.ones(1, M))
    model.w = torch.nn.Parameter(torch.empty(M, M, device="meta"))
    result = analyze(model, meta(M, M))
    assert result.flops == flops
    assert _rules(result) == [("", rule)]


@pytest.mark.parametrize(
    "function",
    [
        lambda s, x: (x @ s.w) * s.twos,  # not 1
        lambda s, x: (x @ s.w) * s.ones_stacked,  # x broadcast: the output is no x
        lambda s, x: (x @ s.w) * s.w,  # a parameter is data, never known
        lambda s, x: (x @ s.w) * s.ones,  # the model's output: a kernel still writes it
    ],
    ids=["twos", "broadcast", "parameter", "model-output"],
)
def test_no_literal_where_the_tensor_is_not_one_everywhere(function: Callable) -> None:
    model = _Buffered(function, twos=torch.full((M,), 2.0), ones_stacked=torch.ones(2, 1, 1),
                      ones=torch.ones(1, M))
    model.w = torch.nn.Parameter(torch.ones(M, M))
    result = analyze(model, meta(M, M))
    assert not result.rewrites and result.tensor_flops == 2 * M**3


def test_the_literal_rules_compute_the_same_values() -> None:
    model = _With(lambda s, x: torch.exp(x) * torch.zeros(1, dtype=torch.float64))
    _, replaced = _replacement(model, (_double(3, 4),))
    assert torch.equal(replaced, model(_double(3, 4)))
