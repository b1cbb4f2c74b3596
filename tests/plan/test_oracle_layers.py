"""The bound against the dependence oracle (tests/oracle.py) on layers drawn with their own
settings: norms (layer, group, batch in train and eval mode, instance, RMS), softmax and
log-softmax over any dim, windows (conv1d and conv2d with stride, padding, dilation and groups,
transposed convolutions, max, average and adaptive pools, nearest and bilinear resampling),
reductions (amax, argmax, var, std, logsumexp, norm) and pointwise chains with broadcasting,
and scaled-dot-product attention (causal, with a bool or a float mask, on a slice of the
queries or of the keys).

Each program is one or two layers over a small (batch, channels, height, width) tensor, then a
tail that keeps a part of the result; each is checked for tightness (compulsory bytes ≥ 0.95 ×
the oracle's bytes, per op FLOPs ≥ 0.95 × the proven ones) and soundness (compulsory bytes ≤
every input, parameter and constant read once and the outputs written once; compulsory ≤ fused
≤ unfused bytes; necessary ≤ executed FLOPs). Below them, the cases the generator found, as
closed forms.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.nn as nn
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from test_oracle import FLOAT_BYTES, HYPOTHESIS, assert_tight, figures
from test_oracle_selection import _bound, assert_sound

from conftest import Fn

Draw = Callable[..., Any]  #: hypothesis's ``data.draw``
Shape = tuple[int, int, int, int]  #: (batch, channels, height, width)
Layer = tuple[nn.Module, Shape]


class RMSNorm(nn.Module):
    """``x / sqrt(mean(x²) + ε) · weight`` over the last dim, written out (as models do)."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.randn(width))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * self.weight


def _norm(draw: Draw, shape: Shape) -> Layer:
    batch, channels, height, width = shape
    kind = draw(st.sampled_from(["layer", "layer_2d", "group", "batch_train", "batch_eval",
                                 "instance", "rms", "rms_functional"]))
    groups = draw(st.sampled_from([g for g in (1, 2, channels) if channels % g == 0]))
    layer = {
        "layer": lambda: nn.LayerNorm(width),
        "layer_2d": lambda: nn.LayerNorm((height, width), elementwise_affine=False),
        "group": lambda: nn.GroupNorm(groups, channels),
        "batch_train": lambda: nn.BatchNorm2d(channels),
        "batch_eval": lambda: nn.BatchNorm2d(channels).eval(),
        "instance": lambda: nn.InstanceNorm2d(channels, affine=draw(st.booleans())),
        "rms": lambda: RMSNorm(width),
        "rms_functional": lambda: nn.RMSNorm(width),
    }[kind]()
    for parameter in layer.parameters():  # away from the ones and zeros they start at
        parameter.data = torch.randn(parameter.shape)
    return layer, shape


def _softmax(draw: Draw, shape: Shape) -> Layer:
    dim = draw(st.integers(-4, 3))
    log = draw(st.booleans())
    return Fn(lambda x: x.log_softmax(dim) if log else x.softmax(dim)), shape


def _conv(draw: Draw, shape: Shape) -> Layer:
    """A conv2d, or a conv1d over the flattened rows (height · width), drawn with its
    stride, padding, dilation and groups (the output kept at least one wide)."""
    batch, channels, height, width = shape
    groups = draw(st.sampled_from([g for g in (1, channels) if channels % g == 0]))
    out = groups * draw(st.integers(1, 2))
    kernel, stride = draw(st.integers(1, 3)), draw(st.integers(1, 2))
    padding, dilation = draw(st.integers(0, 1)), draw(st.integers(1, 2))
    reach = dilation * (kernel - 1) + 1
    if draw(st.booleans()):
        length = height * width
        size = (length + 2 * padding - reach) // stride + 1
        if size < 1:
            kernel = dilation = reach = 1
            size = (length + 2 * padding - 1) // stride + 1
        conv1d = nn.Conv1d(channels, out, kernel, stride, padding, dilation, groups)
        return (
            nn.Sequential(nn.Flatten(2), conv1d, nn.Unflatten(2, (1, size))),
            (batch, out, 1, size),
        )
    if min(height, width) + 2 * padding < reach:
        kernel = dilation = reach = 1
    conv = nn.Conv2d(channels, out, kernel, stride, padding, dilation, groups,
                     bias=draw(st.booleans()))
    size = [(d + 2 * padding - reach) // stride + 1 for d in (height, width)]
    return conv, (batch, out, *size)


def _conv_transpose(draw: Draw, shape: Shape) -> Layer:
    batch, channels, height, width = shape
    groups = draw(st.sampled_from([g for g in (1, channels) if channels % g == 0]))
    kernel, stride = draw(st.integers(1, 3)), draw(st.integers(1, 2))
    padding = draw(st.integers(0, (kernel - 1) // 2))
    conv = nn.ConvTranspose2d(channels, groups, kernel, stride, padding, groups=groups)
    size = [(d - 1) * stride - 2 * padding + kernel for d in (height, width)]
    return conv, (batch, groups, *size)


def _pool(draw: Draw, shape: Shape) -> Layer:
    batch, channels, height, width = shape
    kind = draw(st.sampled_from(["max", "avg", "avg_exclude_pad", "adaptive_max",
                                 "adaptive_avg", "max_1d"]))
    kernel = draw(st.integers(1, min(3, height, width)))
    stride = draw(st.integers(1, kernel))
    padding = draw(st.integers(0, kernel // 2))
    size = [(d + 2 * padding - kernel) // stride + 1 for d in (height, width)]
    if kind.startswith("adaptive"):
        size = [draw(st.integers(1, d)) for d in (height, width)]
        pool = (nn.AdaptiveMaxPool2d if kind == "adaptive_max" else nn.AdaptiveAvgPool2d)(size)
        return pool, (batch, channels, *size)
    if kind == "max_1d":  # over the width, each row a sequence
        length = (width + 2 * padding - kernel) // stride + 1
        pool = nn.MaxPool1d(kernel, stride, padding)
        return (Fn(lambda x: pool(x.flatten(0, 2)).unflatten(0, (batch, channels, height))),
                (batch, channels, height, length))
    pool = (nn.MaxPool2d(kernel, stride, padding) if kind == "max" else
            nn.AvgPool2d(kernel, stride, padding, count_include_pad=kind == "avg"))
    return pool, (batch, channels, *size)


def _interpolate(draw: Draw, shape: Shape) -> Layer:
    batch, channels, height, width = shape
    mode = draw(st.sampled_from(["nearest", "bilinear", "bilinear_aligned"]))
    size = [draw(st.integers(max(1, d // 2), 2 * d)) for d in (height, width)]
    corners = True if mode == "bilinear_aligned" else None
    mode = mode.removesuffix("_aligned")
    return (Fn(lambda x: F.interpolate(x, size, mode=mode, align_corners=corners)),
            (batch, channels, *size))


def _reduction(draw: Draw, shape: Shape) -> Layer:
    """A reduction over one dim of two or more elements (a var of one is NaN, an argmax of
    one 0), kept (as size 1) so the tail still sees four dims."""
    wide = [d for d in (1, 2, 3) if shape[d] > 1]
    if not wide:
        return _pointwise(draw, shape)
    dim = draw(st.sampled_from(wide))
    kind = draw(st.sampled_from(["amax", "argmax", "var", "std", "logsumexp", "norm",
                                 "norm_1"]))
    reduce = {
        "amax": lambda x: x.amax(dim, keepdim=True),
        # an index picks a value: the pick is differentiable, the index alone is not
        "argmax": lambda x: x.gather(dim, x.argmax(dim, keepdim=True)),
        "var": lambda x: x.var(dim, keepdim=True),
        "std": lambda x: x.std(dim, keepdim=True, correction=0),
        "logsumexp": lambda x: x.logsumexp(dim, keepdim=True),
        "norm": lambda x: torch.linalg.vector_norm(x, dim=dim, keepdim=True),
        "norm_1": lambda x: x.norm(p=1, dim=dim, keepdim=True),
    }[kind]
    kept = list(shape)
    kept[dim] = 1
    return Fn(reduce), tuple(kept)


class Broadcast(nn.Module):
    """``f(x ⊙ p)`` with ``p`` a parameter broadcast along some dims of x, ``⊙`` and ``f``
    drawn (a bias, a scale, a gate; exp, tanh, a square)."""

    def __init__(self, shape: Shape, along: list[bool], combine: str, act: str) -> None:
        super().__init__()
        self.p = nn.Parameter(torch.randn([1 if a else s for s, a in zip(shape, along,
                                                                          strict=True)]))
        self.combine, self.act = combine, act

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = {"add": torch.add, "mul": torch.mul, "max": torch.maximum,
             "gate": lambda a, b: a * b.sigmoid()}[self.combine](x, self.p)
        return {"exp": torch.exp, "tanh": torch.tanh, "square": torch.square,
                "none": lambda t: t}[self.act](y)


def _pointwise(draw: Draw, shape: Shape) -> Layer:
    along = [draw(st.booleans()) for _ in shape]
    combine = draw(st.sampled_from(["add", "mul", "max", "gate"]))
    act = draw(st.sampled_from(["exp", "tanh", "square", "none"]))
    return Broadcast(shape, along, combine, act), shape


LAYERS: dict[str, Callable[[Draw, Shape], Layer]] = {
    "norm": _norm, "softmax": _softmax, "conv": _conv, "conv_transpose": _conv_transpose,
    "pool": _pool, "interpolate": _interpolate, "reduction": _reduction,
    "pointwise": _pointwise,
}

#: what the program keeps of the last (batch, channels, height, width) tensor
TAILS: dict[str, Callable[[torch.Tensor], Any]] = {
    "all": lambda y: y,
    "channel_0": lambda y: y[:, :1],
    "last_row": lambda y: y[:, :, -1],
    "first_column": lambda y: y[..., :1],
    "strided": lambda y: y[:, :, ::2, 1::2],
    "sample_1": lambda y: y[-1],
    "channel_sums": lambda y: y.sum(1),
    "row_maxima": lambda y: y.amax(-1),
}


class Chain(nn.Module):
    def __init__(self, layers: list[nn.Module], tail: Callable[[torch.Tensor], Any]) -> None:
        super().__init__()
        self.layers, self.tail = nn.Sequential(*layers), tail

    def forward(self, x: torch.Tensor) -> Any:
        return self.tail(self.layers(x))


def program(draw: Draw) -> tuple:
    """One or two layers over a (2, 2..4, 2..5, 2..6) tensor, then a tail (``draw``:
    hypothesis's ``data.draw``, so a failure lists every drawn setting)."""
    torch.manual_seed(draw(st.integers(0, 2**16)))
    shape = 2, draw(st.sampled_from([2, 4])), draw(st.integers(2, 5)), draw(st.integers(2, 6))
    start, layers = shape, []
    for _ in range(draw(st.integers(1, 2))):
        layer, shape = LAYERS[draw(st.sampled_from(sorted(LAYERS)))](draw, shape)
        layers.append(layer)
    return Chain(layers, TAILS[draw(st.sampled_from(sorted(TAILS)))]), torch.randn(*start)


# --- attention ---------------------------------------------------------------------------------


def attention_by_hand(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                      attn_mask: torch.Tensor | None = None,
                      is_causal: bool = False) -> torch.Tensor:
    """SDPA written out as models do: ``q @ kᵀ``, scaled, a bool mask (or the causal one,
    top-left aligned) by ``masked_fill`` with −inf, a float one added, ``softmax``, ``@ v``."""
    scores = q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5
    if is_causal:
        attn_mask = torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool).tril()
    if attn_mask is not None and attn_mask.dtype == torch.bool:
        scores = scores.masked_fill(~attn_mask, float("-inf"))
    elif attn_mask is not None:
        scores = scores + attn_mask
    return scores.softmax(-1) @ v


class Attention(nn.Module):
    """``scaled_dot_product_attention`` (or :func:`attention_by_hand`) of q (batch, heads,
    queries, E) against k and v (batch, heads, keys, E) cut to ``keys``, queries cut to
    ``queries``, with a mask: none, causal, a bool mask or a float bias (built in ``forward``
    from lists: constants)."""

    def __init__(self, queries: slice, keys: slice, mask: str, pattern: list[list[bool]],
                 tail: Callable[[torch.Tensor], Any], by_hand: bool = False) -> None:
        super().__init__()
        self.queries, self.keys, self.mask, self.pattern, self.tail = (
            queries, keys, mask, pattern, tail
        )
        self.attend = attention_by_hand if by_hand else F.scaled_dot_product_attention

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> Any:
        q, k, v = q[:, :, self.queries], k[:, :, self.keys], v[:, :, self.keys]
        mask = None
        if self.mask in ("bool", "float"):
            keep = torch.tensor(self.pattern)[: q.shape[2], : k.shape[2]]
            mask = keep if self.mask == "bool" else torch.zeros(keep.shape).masked_fill(
                ~keep, float("-inf")
            )
        out = self.attend(q, k, v, attn_mask=mask, is_causal=self.mask == "causal")
        return self.tail(out)


ATTENTION_TAILS: dict[str, Callable[[torch.Tensor], Any]] = {
    "all": lambda y: y,
    "query_0": lambda y: y[:, :, 0],
    "last_query": lambda y: y[:, :, -1],
    "head_0": lambda y: y[:, 0],
    "feature_0": lambda y: y[..., 0],
    "query_mean": lambda y: y.mean(2),
}


def attention(draw: Draw) -> tuple:
    """SDPA (or written by hand) over (1..2, 1..2, 2..5, 2..4) queries and keys, sliced and
    masked as drawn; a bool mask keeps the first key of every row (a row with none is NaN)."""
    torch.manual_seed(draw(st.integers(0, 2**16)))
    batch, heads, length, embed = (draw(st.integers(1, 2)), draw(st.integers(1, 2)),
                                   draw(st.integers(2, 5)), draw(st.integers(2, 4)))
    start = draw(st.integers(0, length - 1))
    cut = slice(start, draw(st.integers(start + 1, length)))
    queries, keys = (cut, slice(None)) if draw(st.booleans()) else (slice(None), cut)
    pattern = [[j == 0 or draw(st.booleans()) for j in range(length)] for _ in range(length)]
    model = Attention(queries, keys, draw(st.sampled_from(["none", "causal", "bool", "float"])),
                      pattern, ATTENTION_TAILS[draw(st.sampled_from(sorted(ATTENTION_TAILS)))],
                      by_hand=draw(st.booleans()))
    q, k, v = (torch.randn(batch, heads, length, embed) for _ in range(3))
    return model, q, k, v


@settings(HYPOTHESIS, max_examples=40)
@given(st.data())
def test_generated_layers_and_attention_are_tight_and_sound(data):
    generate = data.draw(st.sampled_from([program, program, attention]))
    found = figures(*generate(data.draw))
    assert_tight(found)
    assert_sound(found)


# --- the cases the generator found -----------------------------------------------------------


def test_a_walk_shortcut_in_the_program_as_written_keeps_its_ops_for_the_oracle() -> None:
    # x.var(3, keepdim=True) is (2, 4, 2, 1): its log_softmax over the size-1 dim is 0
    # everywhere (a shortcut the demand walk takes in the program as written, no rewrite), so
    # the output, amax of zeros, needs no input: 16 outputs written, 64 B (the oracle's
    # per-op comparison looked for a rewritten program and crashed)
    found = figures(Fn(lambda x: x.var(3, keepdim=True).log_softmax(3).amax(-1)),
                    torch.randn(2, 4, 2, 2))
    assert found.result.compulsory_bytes == 16 * FLOAT_BYTES
    assert_tight(found)


def test_a_query_row_attending_one_key_is_that_keys_value_row() -> None:
    # causal SDPA, q, k, v (1, 1, 4, 3): row 0 attends key 0 alone, and a softmax of one score
    # is 1, so out[0] = v[0]: 3 reads, 3 writes, no FLOP (was q[0]·k[0] and its product, 12)
    q, k, v = (torch.randn(1, 1, 4, 3) for _ in range(3))
    causal = F.scaled_dot_product_attention
    result = _bound(lambda q, k, v: causal(q, k, v, is_causal=True)[:, :, 0], q, k, v)
    assert (result.compulsory_bytes, result.flops) == ((3 + 3) * FLOAT_BYTES, 0)
    # all rows: q rows 1..3 (9), k and v rows 0..3 (12 + 12), 12 writes; rows 1..3 attend
    # 2 + 3 + 4 keys, 2·(E + E) = 12 FLOPs each (was 10 pairs with row 0's)
    result = _bound(lambda q, k, v: causal(q, k, v, is_causal=True), q, k, v)
    assert result.compulsory_bytes == (9 + 12 + 12 + 12) * FLOAT_BYTES
    assert result.flops == (2 + 3 + 4) * 12
    # one key: every row is v[0], broadcast: 3 reads, 12 writes, no FLOP
    result = _bound(lambda q, k, v: causal(q, k[:, :, :1], v[:, :, :1]), q, k, v)
    assert (result.compulsory_bytes, result.flops) == ((3 + 12) * FLOAT_BYTES, 0)


def _flops_by_op(result) -> dict[str, int]:
    """The bound's FLOPs summed per aten op (``bmm``, ``_softmax``)."""
    flops: dict[str, int] = {}
    for op, record in zip(result.plans.trace.ops, result.necessary.ops, strict=True):
        flops[op.base] = flops.get(op.base, 0) + record.flops.tensor + record.flops.vector
    return flops


def test_attention_by_hand_charges_what_sdpa_charges_of_its_masked_scores() -> None:
    # attention_by_hand, causal, q, k, v (1, 1, 4, 3): row 0 keeps one finite score, whose
    # softmax is the constant 1, so out[0] = v[0]: 3 reads, 3 writes, no FLOP (was 84 B and
    # 54 FLOPs: q[0]·k[0], its softmax line and 4 value products)
    q, k, v = (torch.randn(1, 1, 4, 3) for _ in range(3))
    result = _bound(lambda q, k, v: attention_by_hand(q, k, v, is_causal=True)[:, :, 0],
                    q, k, v)
    assert (result.compulsory_bytes, result.flops) == ((3 + 3) * FLOAT_BYTES, 0)
    # all rows: rows 1..3 keep 2 + 3 + 4 = 9 (row, key) pairs, each 2·E = 6 FLOPs of score and
    # 2·Ev = 6 of value product: 108 in the two bmm, as SDPA (was 54 + 96: the masked
    # probabilities' products and row 0's); the softmax 5 FLOPs (the cost rule's 4 for the
    # statistics and 1 to apply) per finite score of rows 1..3: 45 (was 80, every score)
    flops = _flops_by_op(_bound(lambda q, k, v: attention_by_hand(q, k, v, is_causal=True),
                                q, k, v))
    assert (flops["bmm"], flops["_softmax"]) == (2 * 9 * (3 + 3), 5 * 9)
    # where(mask, s, −inf) is the same masking: 108 and 45 again
    causal = torch.ones(4, 4, dtype=torch.bool).tril()
    flops = _flops_by_op(_bound(
        lambda q, k, v: torch.where(causal, q @ k.transpose(-2, -1), float("-inf")).softmax(-1)
        @ v, q, k, v))
    assert (flops["bmm"], flops["_softmax"]) == (2 * 9 * (3 + 3), 5 * 9)
    # the probabilities kept, rows 0 and 1: row 0 a constant, row 1 two scores (2 pairs, 12
    # FLOPs) read from q[1] and k[0..1] (9 elements), 8 writes; its softmax 5·2; the mask at
    # the line's 2 finite scores, read (1 B each) and negated (2 FLOPs): a masked score is
    # −inf whatever q·k is, so nothing of it is read
    found = figures(
        Fn(lambda q, k: (q @ k.transpose(-2, -1)).masked_fill(~causal, float("-inf"))
           .softmax(-1)[:, :, :2]), q, k)
    assert found.result.compulsory_bytes == (9 + 8) * FLOAT_BYTES + 2
    assert found.result.flops == 12 + 10 + 2
    assert_tight(found)


def test_a_softmax_of_scores_masked_with_minus_infinity_skips_them() -> None:
    # softmax(x.masked_fill(~causal, −inf), −1), x (4, 4): row 0 keeps one finite score, the
    # constant one-hot; rows 1..3 keep 2 + 3 + 4 = 9, read (36 B) with the mask under them
    # (9 B), 16 outputs written (64 B): 109 B; 9 negations of the mask and the softmax's 5 per
    # finite score, 45 (was every score read and 80)
    causal = torch.ones(4, 4, dtype=torch.bool).tril()
    x = torch.randn(4, 4)
    found = figures(Fn(lambda x: x.masked_fill(~causal, float("-inf")).softmax(-1)), x)
    assert (found.result.compulsory_bytes, found.result.flops) == (
        (9 + 16) * FLOAT_BYTES + 9, 9 + 5 * 9
    )
    assert_tight(found)
    # x + bias (0 on the triangle, −inf above it): x and the bias read at the 9 finite scores
    # (72 B), 64 B written; 9 adds and 45
    bias = torch.zeros(4, 4).masked_fill(~causal, float("-inf"))
    found = figures(Fn(lambda x: (x + bias).softmax(-1)), x)
    assert (found.result.compulsory_bytes, found.result.flops) == (
        (2 * 9 + 16) * FLOAT_BYTES, 9 + 5 * 9
    )
    assert_tight(found)
    # where(causal, x, −inf) down the columns (log_softmax(0)): column 3 keeps row 3 alone, the
    # constant 0; columns 0..2 keep 4 + 3 + 2 = 9: 109 B again, and 45
    found = figures(Fn(lambda x: torch.where(causal, x, float("-inf")).log_softmax(0)), x)
    assert (found.result.compulsory_bytes, found.result.flops) == (
        (9 + 16) * FLOAT_BYTES + 9, 5 * 9
    )
    assert_tight(found)


def test_a_softmax_of_scores_not_masked_with_minus_infinity_charges_every_score() -> None:
    # a finite fill (−1e9, as many models write it) leaves every probability nonzero: the
    # softmax's 5 FLOPs on all 16 scores, x read at the 10 it keeps, the mask's 16 negated;
    # x − bias (alpha −1) makes +inf, not −inf: all 16 of x and the bias read, 16 adds; a mask
    # of the data (x < 0) is not known: 16 compares and 80
    causal = torch.ones(4, 4, dtype=torch.bool).tril()
    bias = torch.zeros(4, 4).masked_fill(~causal, float("-inf"))
    x = torch.randn(4, 4)
    filled = _bound(lambda x: x.masked_fill(~causal, -1e9).softmax(-1), x)
    assert (filled.compulsory_bytes, filled.flops) == ((10 + 16) * FLOAT_BYTES + 16, 16 + 80)
    subtracted = _bound(lambda x: torch.add(x, bias, alpha=-1).softmax(-1), x)
    assert (subtracted.compulsory_bytes, subtracted.flops) == (3 * 16 * FLOAT_BYTES, 16 + 80)
    data_masked = _bound(lambda x: x.masked_fill(x < 0, float("-inf")).softmax(-1), x)
    assert (data_masked.compulsory_bytes, data_masked.flops) == (2 * 16 * FLOAT_BYTES, 16 + 80)


def test_a_sum_adds_none_of_a_pad_a_triangle_or_a_diagonal_zeros() -> None:
    # the sum's cost rule charges one FLOP per element it adds; over a structural zero it
    # adds nothing. F.pad(x, (0, 3)).sum(1), x (3, 4): 4 of each row's 7 (was 21)
    x = torch.randn(3, 4)
    assert _bound(lambda x: F.pad(x, (0, 3)).sum(1), x).flops == 3 * 4
    # a pad by 1 is no zero: all 7
    assert _bound(lambda x: F.pad(x, (1, 2), value=1.0).sum(1), x).flops == 3 * 7
    # tril(a).sum(1)[2:], a (4, 4): rows 2 and 3 hold 3 and 4 nonzeros (was 8)
    assert _bound(lambda a: a.tril().sum(1)[2:], torch.randn(4, 4)).flops == 3 + 4
    # diag_embed(x).sum(1) (or a mean over the other dim): one nonzero per line, 12 (was 48)
    assert _bound(lambda x: torch.diag_embed(x).sum(1), x).flops == 12
    assert _bound(lambda x: torch.diag_embed(x).mean(2), x).flops == 12
    # read through a view, the same zeros: F.pad(x[None], (0, 3))[0].sum(0) adds the 3 rows
    # of x's 4 columns, 12 (was 21, every element of the pad); rows 1 and 2 of
    # x.tril()[None][0] hold 2 + 3 nonzeros (was 8); diag_embed(x)[1:].sum(1):
    # one nonzero per line of 2 planes, 8 (was 32)
    assert _bound(lambda x: F.pad(x[None], (0, 3))[0].sum(0), x).flops == 3 * 4
    assert _bound(lambda x: x.tril()[None][0, 1:].sum(1), x).flops == 2 + 3
    assert _bound(lambda x: torch.diag_embed(x)[1:].sum(1), x).flops == 2 * 4
    found = figures(Fn(lambda x: F.pad(x, (0, 3)).t().sum(1)), x)  # a transpose: 12 again
    assert found.result.flops == 3 * 4
    assert_tight(found)


def test_an_unrolled_reduction_read_in_part_loads_its_whole_lines() -> None:
    # x.softmax(1)[:, :1] * 2, x (3, 4): a softmax over 4 (< 8) is unrolled into its reader,
    # which still needs each kept row whole: 12 reads and 3 writes, 60 B, the compulsory
    # bytes too (the fused plan loaded x[:, :1] alone: 24 B, below compulsory)
    result = _bound(lambda x: x.softmax(1)[:, :1] * 2, torch.randn(3, 4))
    assert result.compulsory_bytes == result.fused_bytes == (12 + 3) * FLOAT_BYTES
    # over dim 0, the last two columns: 6 reads, 4 writes
    result = _bound(lambda x: x.softmax(0)[1:, 2:] * 2, torch.randn(3, 4))
    assert result.compulsory_bytes == result.fused_bytes == (6 + 4) * FLOAT_BYTES


def test_a_gather_by_data_reads_one_element_per_position_off_its_dim() -> None:
    # x.gather(1, i), x (3, 5), i (3, 2) of any values: out[r, c] = x[r, i[r, c]], so rows
    # differ in the element they read whatever i holds: 3 of x (was 1), the 6 int64 indices,
    # 6 writes
    result = _bound(lambda x, i: x.gather(1, i), torch.randn(3, 5), torch.randint(0, 5, (3, 2)))
    assert result.compulsory_bytes == 3 * FLOAT_BYTES + 6 * 8 + 6 * FLOAT_BYTES
    # argmax over a dim of size 1 can only be 0: the gather is a copy of x, (3, 1): 3 + 3
    found = figures(Fn(lambda x: x.gather(1, x.argmax(1, keepdim=True))), torch.randn(3, 1))
    assert found.result.compulsory_bytes == (3 + 3) * FLOAT_BYTES
    assert_tight(found)
