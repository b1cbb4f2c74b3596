"""Normalised values summed (torchroofline.plan.algebra.norms): a softmax's rows sum to 1 over
any dims that hold its dim and after a scale, a normalisation has mean 0 (β with a shift) over
its normalised dims; a softmax whose row may be masked to −∞ throughout keeps its sum. Each
with a closed form where it fires, a program where it must not, and a float64 value check.

A constant output is only written: 0 FLOPs and its own bytes (4 per fp32 element).
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from test_algebra import _Buffered, _double, _replacement, _rules, _With

from conftest import Fn, analyze, meta

B, S, C, SIZE = 8, 512, 64, 32
SOFTMAX = "softmax rows sum to 1"
CAUSAL = torch.ones(S, S, dtype=torch.bool).tril()


@pytest.mark.parametrize(
    ("function", "outputs"),
    [
        # Σ over both dims of a row softmax: S rows of 1 each, per batch
        (lambda x: torch.softmax(x, -1).sum((-2, -1)), B),
        (lambda x: (2 * torch.softmax(x, -1)).sum(-1), B * S),
        (lambda x: F.log_softmax(x, -1).exp().sum(-1), B * S),
        (lambda x: torch.softmax(x, 1).mean((0, 1)), S),
    ],
    ids=["two-dims", "scaled", "log-softmax-exp", "mean-with-batch"],
)
def test_softmax_sums_are_constants(function: Callable, outputs: int) -> None:
    result = analyze(Fn(function), meta(B, S, S))
    assert (result.flops, result.compulsory_bytes) == (0, outputs * 4)
    assert _rules(result) == [("", SOFTMAX)]


def test_a_softmax_under_a_known_causal_mask_sums_to_one() -> None:
    # row i keeps columns 0…i: no row is masked throughout
    model = _Buffered(lambda s, x: x.masked_fill(~s.m, float("-inf")).softmax(-1).sum(-1),
                      m=CAUSAL)
    result = analyze(model, meta(B, S, S))
    assert result.flops == 0 and _rules(result) == [("", SOFTMAX)]


def _first_row_masked() -> torch.Tensor:
    mask = CAUSAL.clone()
    mask[0] = False
    return mask


@pytest.mark.parametrize(
    "model",
    [
        # a mask from the data: a row may be −∞ throughout (NaN, not 1)
        Fn(lambda x: x.masked_fill(x > 0, float("-inf")).softmax(-1).sum(-1)),
        Fn(lambda x: torch.where(x > 0, x, float("-inf")).softmax(-1).sum(-1)),
        # a known mask whose first row is masked throughout
        _Buffered(lambda s, x: x.masked_fill(~s.m, float("-inf")).softmax(-1).sum(-1),
                  m=_first_row_masked()),
        _Buffered(lambda s, x: (x + s.m).softmax(-1).sum(-1),
                  m=torch.zeros(S, S).masked_fill(~_first_row_masked(), float("-inf"))),
        # summed across rows, not along them
        Fn(lambda x: torch.softmax(x, -1).sum(-2)),
    ],
    ids=["data-mask", "data-where", "known-full-row", "additive-full-row", "other-dim"],
)
def test_a_softmax_that_may_not_sum_to_one_keeps_its_sum(model: nn.Module) -> None:
    result = analyze(model, meta(B, S, S))
    assert not result.rewrites and result.flops > B * S * S


NORMS = {
    # no shift: the mean is 0; with β: the mean of β over the summed dims
    "layer-norm": (lambda s, x: F.layer_norm(x, (SIZE, SIZE)).mean((2, 3)), {}, 0),
    "layer-norm-shift": (lambda s, x: F.layer_norm(x, (SIZE,), None, s.b).sum(-1),
                         {"b": nn.Parameter(torch.empty(SIZE, device="meta"))}, SIZE),
    "group-norm": (lambda s, x: s.n(x).mean((1, 2, 3)),
                   {"n": nn.GroupNorm(8, C, affine=False, device="meta")}, 0),
    "group-norm-channel": (lambda s, x: s.n(x).mean((2, 3)),
                           {"n": nn.GroupNorm(C, C, device="meta")}, C),
    "instance-norm": (lambda s, x: s.n(x).mean((2, 3)),
                      {"n": nn.InstanceNorm2d(C, affine=True, device="meta")}, C),
    "batch-norm-train": (lambda s, x: s.n(x).mean((0, 2, 3)),
                         {"n": nn.BatchNorm2d(C, track_running_stats=False, device="meta")}, C),
}


@pytest.mark.parametrize(("function", "parts", "shift"), list(NORMS.values()), ids=list(NORMS))
def test_a_normalisation_has_mean_zero_or_its_shift(function, parts, shift: int) -> None:
    # only β is read (its elements summed, scaled to a mean): no FLOP depends on x, at most
    # three per output (a sum, a scale, a divide)
    result = analyze(_With(function, **parts), meta(B, C, SIZE, SIZE))
    assert result.flops <= 3 * B * C * SIZE
    assert len(result.rewrites) == 1
    assert result.rewrites[0].rule.endswith("sum to 0" if not shift else "sum to the shift")


def test_a_batch_norm_tracking_running_statistics_still_computes_them() -> None:
    # the running statistics are state the program updates: the batch norm stays (4 FLOPs an
    # element as the cost rules count it) with the num_batches_tracked add (1); the mean of
    # its output is β times the count, divided by the count (2 per channel), not a sum
    model = _With(lambda s, x: s.n(x).mean((0, 2, 3)), n=nn.BatchNorm2d(C, device="meta"))
    result = analyze(model, meta(B, C, SIZE, SIZE))
    assert [s.rule for s in result.rewrites] == ["normalised channels sum to the shift"]
    assert result.flops == 4 * B * C * SIZE * SIZE + 1 + 2 * C


@pytest.mark.parametrize(
    ("function", "parts"),
    [
        # γ varies along the normalised dims
        (lambda s, x: s.n(x).mean(-1), {"n": nn.LayerNorm(SIZE, device="meta")}),
        (lambda s, x: s.n(x).mean((1, 2, 3)), {"n": nn.GroupNorm(8, C, device="meta")}),
        # not all the normalised dims summed
        (lambda s, x: s.n(x).mean((2, 3)), {"n": nn.BatchNorm2d(C, device="meta")}),
        (lambda s, x: s.n(x).mean(3), {"n": nn.InstanceNorm2d(C, device="meta")}),
        # running statistics: the mean depends on x
        (lambda s, x: s.n(x).mean((0, 2, 3)), {"n": nn.BatchNorm2d(C, device="meta").eval()}),
    ],
    ids=["layer-norm-weight", "group-norm-weight", "batch-norm-spatial", "instance-norm-row",
         "batch-norm-eval"],
)
def test_no_constant_where_the_normalisation_does_not_cancel(function, parts) -> None:
    # every element of x is still read and summed (more than B·C·SIZE² FLOPs); an eval batch
    # norm, a per-channel affine map, may take its mean through the linear map (fewer FLOPs
    # at the same time, both reading x once), never a constant
    result = analyze(_With(function, **parts), meta(B, C, SIZE, SIZE))
    assert not any(s.rule.startswith("normalised") for s in result.rewrites)
    assert result.flops > B * C * SIZE * SIZE


def _affine(module: nn.Module) -> nn.Module:
    for parameter in module.parameters():
        nn.init.uniform_(parameter, -1, 1)
    return module.double()


x4 = _double(3, 4, 5, 6)
EXACT = [
    ("softmax-two-dims", Fn(lambda x: torch.softmax(x, -1).sum((-2, -1))), (x4,)),
    ("softmax-scaled-mean", Fn(lambda x: (-3 * torch.softmax(x, 1) + 1).mean((0, 1))), (x4,)),
    ("log-softmax-exp", Fn(lambda x: F.log_softmax(x, 2).exp().sum(2)), (x4,)),
    ("causal", _Buffered(lambda s, x: x.masked_fill(~s.m, float("-inf")).softmax(-1).sum(-1),
                         m=torch.ones(6, 6, dtype=torch.bool).tril()), (_double(2, 6, 6),)),
    ("layer-norm-shift", Fn(lambda x, b: F.layer_norm(x, (5, 6), None, b).mean((2, 3))),
     (x4, _double(5, 6))),
    ("group-norm", _With(lambda s, x: s.n(x).sum((1, 2, 3)),
                         n=nn.GroupNorm(2, 4, affine=False).double()), (x4,)),
    ("group-norm-channel", _With(lambda s, x: s.n(x).mean((2, 3)),
                                 n=_affine(nn.GroupNorm(4, 4))), (x4,)),
    ("instance-norm", _With(lambda s, x: s.n(x).flatten(2).mean(-1),
                            n=nn.InstanceNorm2d(4).double()), (x4,)),
    ("batch-norm-train", _With(lambda s, x: (s.n(x) * 2).sum((0, 2, 3)),
                               n=_affine(nn.BatchNorm2d(4))), (x4,)),
]


@pytest.mark.parametrize(("model", "inputs"), [c[1:] for c in EXACT], ids=[c[0] for c in EXACT])
def test_the_constant_is_the_value(model: nn.Module, inputs: tuple) -> None:
    _, replaced = _replacement(model, inputs)
    expected = model(*inputs)
    assert replaced.shape == expected.shape
    assert torch.allclose(replaced, expected.to(replaced.dtype), atol=1e-9)
