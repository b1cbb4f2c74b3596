"""Convolutions as structured linear maps (torchroofline.plan.algebra.convs): a sum or mean of a
convolution over any of its dims, for any stride, dilation, padding, cropping and groups, is a
contraction of the weights with per-tap box sums of the input. Closed forms where the rule
fires, programs where it must not, and every replacement checked on float64 data.

A convolution's tensor FLOPs are 2·(output elements)·(Cin/g)·taps; after the rule the one
convolution left has Cin·(distinct boxes) input channels over the dims not summed.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from test_algebra import _double, _replacement, _rules, _With
from test_tensor_network import _always_fire, _forced_replacements  # noqa: F401 (a fixture)

from conftest import Fn, analyze, meta

N, CIN, COUT, SIZE = 64, 128, 256, 64  # compute-bound as written: TF32 convolutions
RULE = "sum through the linear map"


def _conv_then(reduce, conv: nn.Module, *extra: nn.Module):
    parts = {"conv": conv} | {f"m{i}": m for i, m in enumerate(extra)}

    def forward(s: nn.Module, x: torch.Tensor) -> torch.Tensor:
        y = s.conv(x)
        for i in range(len(extra)):
            y = getattr(s, f"m{i}")(y)
        return reduce(y)

    return _With(forward, **parts)


GLOBAL_MEANS = {
    "mean": lambda y: y.mean((2, 3)),
    "flatten-mean": lambda y: y.flatten(2).mean(-1),
    "avg-pool-whole": lambda y: F.avg_pool2d(y, y.shape[-2:]),
    "adaptive-pool": lambda y: F.adaptive_avg_pool2d(y, 1),
    "sum-of-means": lambda y: y.mean((2, 3), keepdim=True).mean((2, 3), keepdim=True),
}


@pytest.mark.parametrize("reduce", list(GLOBAL_MEANS.values()), ids=list(GLOBAL_MEANS))
@pytest.mark.parametrize(
    ("conv", "boxes"),
    [
        # stride 2, no padding: tap t sums x[t::2][:31] along each dim, 3 distinct boxes a dim
        (nn.Conv2d(CIN, COUT, 3, stride=2, device="meta"), 9),
        # dilation 2, padding 1: taps t·2 − 1 + o, each cut differently by the border
        (nn.Conv2d(CIN, COUT, 3, dilation=2, padding=1, device="meta"), 9),
        # transposed, stride 2, padding 1 crops, output padding 1 (KernelBench level 2 #44):
        # tap 0 reaches inputs 1…63, taps 1 and 2 all of them (63 + 1 out of 128 outputs):
        # 2 distinct boxes a dim
        (nn.ConvTranspose2d(CIN, COUT, 3, stride=2, padding=1, output_padding=1,
                            device="meta"), 4),
        # transposed, uncropped: every tap reaches the whole input, one box (Σx · ΣW)
        (nn.ConvTranspose2d(CIN, COUT, 3, stride=2, device="meta"), 1),
    ],
    ids=["strided", "dilated", "cropped-transposed", "transposed"],
)
def test_a_global_mean_of_a_convolution_is_one_small_product(reduce, conv, boxes) -> None:
    # Σ_p conv(x, W)[n, co, p] = Σ_{ci, box} (Σ_{t → box} W[co, ci, t]) · S[n, ci, box]:
    # one (N, Cin·boxes) @ (Cin·boxes, Cout) product
    result = analyze(_conv_then(reduce, conv), meta(N, CIN, SIZE, SIZE))
    assert result.tensor_flops == 2 * N * CIN * boxes * COUT
    # (a mean of means takes the rule once a round, as the fixed point reaches each: on the
    # convolution, or as a tensor network over the first mean's output)
    assert {rule for _, rule in _rules(result)} == {RULE}
    assert result.time_ms["sol_as_written"] > result.time_ms["sol"]


def test_an_eval_batch_norm_between_is_a_per_channel_affine() -> None:
    bn = nn.BatchNorm2d(COUT, device="meta").eval()
    conv = nn.Conv2d(CIN, COUT, 3, padding=1, device="meta")
    result = analyze(_conv_then(lambda y: y.flatten(2).mean(-1), conv, bn).eval(),
                     meta(N, CIN, SIZE, SIZE))
    assert result.tensor_flops == 2 * N * CIN * 9 * COUT
    assert _rules(result) == [("conv", RULE)]


def test_a_mean_over_one_spatial_dim_leaves_a_one_dimensional_convolution() -> None:
    # Σ_w conv(x, W)[n, co, h, w] = conv1d over h of S (Cin·3 channels, the 3 boxes along w)
    # with W's w-taps folded into its channels: 2·N·Cout·62·(Cin·3)·3 (62 = 64 − 3 + 1)
    conv = nn.Conv2d(CIN, COUT, 3, device="meta")
    result = analyze(_conv_then(lambda y: y.mean(3), conv), meta(N, CIN, SIZE, SIZE))
    assert result.tensor_flops == 2 * N * COUT * 62 * CIN * 3 * 3
    assert _rules(result) == [("conv", RULE)]


def test_a_grouped_convolution_keeps_its_groups() -> None:
    # 4 groups: each output channel reads Cin/4 channels · 9 boxes
    conv = nn.Conv2d(CIN, COUT, 3, padding=1, groups=4, device="meta")
    result = analyze(_conv_then(lambda y: y.mean((2, 3)), conv), meta(N, CIN, SIZE, SIZE))
    assert result.tensor_flops == 2 * N * COUT * (CIN // 4) * 9


def test_a_channel_and_spatial_sum_is_a_dot_product_per_sample() -> None:
    # Σ_{co, p}: W summed over its output channels first, then (N, Cin·9) @ (Cin·9, 1)
    conv = nn.Conv2d(CIN, COUT, 3, stride=2, device="meta")
    result = analyze(_conv_then(lambda y: y.sum((1, 2, 3)), conv), meta(N, CIN, SIZE, SIZE))
    assert result.tensor_flops == 2 * N * CIN * 9


NOT_FIRING = {
    "relu-between": (lambda y: torch.relu(y).mean((2, 3)), ()),
    "window-pool": (lambda y: F.avg_pool2d(y, 2), ()),
    "train-batch-norm": (lambda y: y.mean((2, 3)), (nn.BatchNorm2d(COUT, device="meta"),)),
}


def test_an_eval_batch_norm_summed_over_its_channels_is_still_an_affine_map() -> None:
    # Σ_{c,p} (γ_c (y − μ_c)/σ_c + β_c) = Σ_c (γ_c/σ_c) Σ_p y[c, p] + const: the tensor network
    # weighs each channel's spatial sum, and the convolution's rule takes that sum
    bn = nn.BatchNorm2d(COUT, device="meta").eval()
    conv = nn.Conv2d(CIN, COUT, 3, stride=2, device="meta")
    result = analyze(_conv_then(lambda y: y.mean((1, 2, 3)), conv, bn).eval(),
                     meta(N, CIN, SIZE, SIZE))
    assert {rule for _, rule in _rules(result)} == {RULE}
    assert result.time_ms["sol_as_written"] > result.time_ms["sol"]


@pytest.mark.parametrize(("reduce", "extra"), list(NOT_FIRING.values()), ids=list(NOT_FIRING))
def test_no_rule_where_the_sum_does_not_commute_with_the_convolution(reduce, extra) -> None:
    # a nonlinearity, a window smaller than the image, or batch statistics that depend on the
    # values: the convolution stays
    conv = nn.Conv2d(CIN, COUT, 3, stride=2, device="meta")
    model = _conv_then(reduce, conv, *extra)
    result = analyze(model, meta(N, CIN, SIZE, SIZE))
    assert not result.rewrites
    # 31 × 31 outputs a channel (a 2 × 2 pool reads 30 × 30 of them)
    side = 30 if reduce is NOT_FIRING["window-pool"][0] else 31
    assert result.tensor_flops == 2 * N * COUT * side * side * CIN * 9


def _bn() -> nn.BatchNorm2d:
    bn = nn.BatchNorm2d(4).double().eval()
    bn.running_mean.uniform_(-1, 1)
    bn.running_var.uniform_(0.5, 2)
    nn.init.uniform_(bn.weight, -1, 1)
    nn.init.uniform_(bn.bias, -1, 1)
    return bn


class _ConvBn(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.bn = _bn()

    def forward(self, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        y = self.bn(F.conv2d(x, w, stride=2, padding=1))  # (2, 4, 4, 3)
        return F.avg_pool2d(y, (4, 3))


x2, w2, b4 = _double(2, 3, 7, 6), _double(4, 3, 3, 3), _double(4)
EXACT = [
    ("strided", Fn(lambda x, w, b: F.conv2d(x, w, b, stride=2).mean((2, 3))), (x2, w2, b4)),
    ("dilated-padded", Fn(lambda x, w: F.conv2d(x, w, dilation=2, padding=2).sum((2, 3))),
     (x2, w2)),
    ("stride-3-padded", Fn(lambda x, w, b: F.conv2d(x, w, b, stride=3, padding=2).mean(2)),
     (x2, w2, b4)),
    ("one-dim", Fn(lambda x, w, b: F.conv2d(x, w, b, padding=1).mean(3)), (x2, w2, b4)),
    ("batch-and-width", Fn(lambda x, w, b: F.conv2d(x, w, b, stride=2).sum((0, 3))),
     (x2, w2, b4)),
    ("channels-and-space", Fn(lambda x, w, b: F.conv2d(x, w, b, stride=2).sum((1, 2, 3))),
     (x2, w2, b4)),
    ("groups", Fn(lambda x, w, b: F.conv2d(x, w, b, stride=2, groups=2).mean((2, 3))),
     (_double(2, 4, 7, 6), _double(6, 2, 3, 2), _double(6))),
    ("groups-channels", Fn(lambda x, w: F.conv2d(x, w, padding=1, groups=2).sum(1)),
     (_double(2, 4, 7, 6), _double(6, 2, 3, 2))),
    ("transposed-cropped", Fn(lambda x, w, b: F.conv_transpose2d(
        x, w, b, stride=2, padding=1, output_padding=1).mean((2, 3))), (x2, _double(3, 4, 3, 3),
                                                                      b4)),
    ("transposed-heavy-crop", Fn(lambda x, w: F.conv_transpose2d(
        x, w, stride=3, padding=3, dilation=2).sum(-1)), (x2, _double(3, 4, 3, 3))),
    ("transposed-groups", Fn(lambda x, w: F.conv_transpose2d(
        x, w, stride=2, padding=1, groups=3).mean((1, 2, 3))), (x2, _double(3, 2, 3, 3))),
    ("conv1d", Fn(lambda x, w: F.conv1d(x, w, stride=2, padding=1).sum(-1)),
     (_double(2, 3, 9), _double(4, 3, 3))),
    ("conv3d-depth", Fn(lambda x, w, b: F.conv3d(x, w, b, stride=(2, 1, 2), padding=1).mean(2)),
     (_double(2, 3, 5, 4, 6), _double(4, 3, 3, 2, 3), b4)),
    ("conv3d-transposed", Fn(lambda x, w: F.conv_transpose3d(
        x, w, stride=2, padding=1, output_padding=1).mean((2, 3, 4))),
     (_double(2, 3, 3, 4, 3), _double(3, 4, 3, 2, 3))),
    ("conv3d-transposed-one-dim", Fn(lambda x, w, b: F.conv_transpose3d(
        x, w, b, stride=2, padding=1).mean(3, keepdim=True)),
     (_double(2, 3, 3, 4, 3), _double(3, 4, 3, 2, 3), b4)),
    ("flatten-mean-scaled", Fn(lambda x, w: (F.conv2d(x, w, stride=2) * 0.5).flatten(2)
                               .mean(-1)), (x2, w2)),
    ("adaptive", Fn(lambda x, w: F.adaptive_avg_pool2d(F.conv2d(x, w, dilation=2), 1)),
     (x2, w2)),
    ("batch-norm-pool", _ConvBn(), (x2, w2)),
]


@pytest.mark.parametrize(("model", "inputs"), [c[1:] for c in EXACT], ids=[c[0] for c in EXACT])
def test_the_summed_convolution_computes_the_same_values(model: nn.Module, inputs: tuple) -> None:
    rule, replaced = _replacement(model, inputs)
    expected = model(*inputs)
    assert rule == RULE
    assert replaced.shape == expected.shape
    assert torch.allclose(replaced, expected, atol=1e-9)


def _one_tap_minus_einsum(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return F.conv2d(x, w[:, :, None, None], b) - torch.einsum("bchw,oc->bohw", x, w)


@pytest.mark.parametrize(("forward", "convolutions"), [
    # conv2d(x, w[:, :, None, None], b) is einsum('bchw,oc->bohw', x, w) + b: the difference
    # is b broadcast, no product (it charged the convolution: no network step read it)
    (_one_tap_minus_einsum, 0),
    # a relu between: relu(x) is no x, but w is common: (relu(x) − x)·w + b, one product
    # (2·N·COUT·CIN·SIZE²), emitted as the convolution it was, so on TF32 tensor cores as the
    # one written (it charged two: the factored product was an fp32 einsum, slower here)
    (lambda x, w, b: F.conv2d(torch.relu(x), w[:, :, None, None], b)
     - torch.einsum("bchw,oc->bohw", x, w), 1),
    # nothing common (relu(x) is no x, relu(w) no w): both products stay
    (lambda x, w, b: F.conv2d(torch.relu(x), w[:, :, None, None], b)
     - torch.einsum("bchw,oc->bohw", x, torch.relu(w)), 2),
], ids=["one-tap", "common-weight", "nothing-common"])
def test_a_one_tap_convolution_is_a_product_over_the_channels(forward, convolutions) -> None:
    result = analyze(Fn(forward), meta(N, CIN, SIZE, SIZE), meta(COUT, CIN), meta(COUT))
    assert result.tensor_flops == convolutions * 2 * N * COUT * CIN * SIZE * SIZE


@pytest.mark.usefixtures("_always_fire")
@pytest.mark.parametrize(("forward", "inputs"), [
    (_one_tap_minus_einsum, (_double(2, 3, 4, 5), _double(6, 3), _double(6))),
    # a @ b as a 1-tap conv1d over b's columns, minus a @ b: 0
    (lambda a, b: F.conv1d(b[None], a[:, :, None])[0] - a @ b, (_double(5, 4), _double(4, 3))),
], ids=["conv2d-bias", "conv1d-matmul"])
def test_a_one_tap_convolution_read_as_a_product_computes_its_value(forward, inputs) -> None:
    model = Fn(forward)
    found = _forced_replacements(model, inputs)
    assert found
    for _, replaced in found:
        assert torch.allclose(replaced, model(*inputs), atol=1e-9)
