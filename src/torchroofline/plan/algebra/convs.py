"""Convolutions as structured linear maps: a sum or mean of a convolution's output over any set
of its dims is a small contraction of the weights with per-tap box sums of the input.

Over the reals, for a convolution (stride s, dilation d, padding p, groups g) along one spatial
dim of input length L and output length O,

    Σ_o conv(x, W)[n, co, o] = Σ_{ci, t} W[co, ci, t] · B[n, ci, t] + O·b[co],
    B[n, ci, t] = Σ_{o < O, 0 ≤ o·s + t·d − p < L} x[n, ci, o·s + t·d − p],

the input box tap t reaches (every s-th element from its first to its last, the border terms
cut where the padding is). A transposed convolution scatters input i through tap t to output
i·s + t·d − p, so the sum over its outputs is the same contraction with the box of the inputs
whose image lands inside the output: a contiguous range, cut where the padding crops. Each box
is a difference of two strided prefix sums of x (L adds per dim and two reads per tap). Summed
over several spatial dims the boxes are taken dim by dim; the taps of the summed dims are
folded into the input channels, and what remains is one convolution over the dims not summed
(a single position when all are: a (N, Cin·taps) @ (Cin·taps, Cout) product). A sum over the
output channels sums W within each group first (Σ_co conv(x, W) = conv(x, Σ_co W)); a sum over
the batch sums x first. One formula for every stride, dilation, padding, output padding,
cropping and group count, in 1-D, 2-D and 3-D.

The sum reaches the convolution through what :mod:`.sums` walks (views that keep whole dims,
pointwise steps, an eval-mode batch norm; whole-image average pools are means). Identities over
the reals for finite inputs; every removed intermediate read by the next op alone, no write
between.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from ...costs import aten
from ...trace.refs import TracedOp
from ._core import Graph
from .linear import RULE
from .sums import Summed, terminal

# --- the per-tap boxes of one spatial dim -------------------------------------------------------


@dataclass(frozen=True)
class _Conv:
    """A convolution's arguments, one entry per spatial dim."""

    stride: tuple[int, ...]
    padding: tuple[int, ...]
    dilation: tuple[int, ...]
    transposed: bool
    output_padding: tuple[int, ...]
    groups: int

    @classmethod
    def of(cls, op: TracedOp) -> _Conv:
        spatial = len(op.reads[0].shape) - 2

        def per_dim(name: str) -> tuple[int, ...]:
            value = op.argument(name)
            return tuple(value) * (spatial if len(value) == 1 else 1)

        return cls(per_dim("stride"), per_dim("padding"), per_dim("dilation"),
                   bool(op.argument("transposed")), per_dim("output_padding"),
                   int(op.argument("groups")))

    def rest(self, keep: Sequence[int]) -> tuple:
        """The arguments of the convolution over the spatial dims ``keep`` (a single position,
        kernel 1, where none is kept)."""
        if not keep:
            return [1], [0], [1], self.transposed, [0], self.groups
        return ([self.stride[k] for k in keep], [self.padding[k] for k in keep],
                [self.dilation[k] for k in keep], self.transposed,
                [self.output_padding[k] for k in keep], self.groups)


#: One tap's box along a dim: (first input position, last input position, step), or None
#: where no input reaches the summed outputs through the tap
Box = tuple[int, int, int] | None


def _boxes(conv: _Conv, k: int, length: int, kernel: int, out: int) -> tuple[Box, ...]:
    """The input box of each tap along spatial dim ``k`` (see the module doc)."""
    s, d, p = conv.stride[k], conv.dilation[k], conv.padding[k]
    boxes: list[Box] = []
    for t in range(kernel):
        if conv.transposed:  # inputs i with 0 ≤ i·s + t·d − p < out
            low = max(0, -((t * d - p) // s))
            high = min(length - 1, (out - 1 + p - t * d) // s)
            step = 1
            first, last = low, high
        else:  # outputs o with 0 ≤ o·s + t·d − p < length
            start = t * d - p
            low, high = max(0, -(start // s)), min(out - 1, (length - 1 - start) // s)
            step = s
            first, last = start + s * low, start + s * high
        boxes.append((first, last, step) if low <= high else None)
    return tuple(boxes)


def _box_sums(x: torch.Tensor, dim: int, boxes: Sequence[Box]) -> torch.Tensor:
    """``x`` with dim ``dim`` replaced by one entry per box: the sum of the box's elements, a
    difference of two prefix sums over the elements ``step`` apart."""
    step = next((box[2] for box in boxes if box is not None), 1)
    length = x.shape[dim]
    rows = -(-length // step)
    x = x.movedim(dim, -1)
    if rows * step != length:
        x = F.pad(x, (0, rows * step - length))
    prefix = x.unflatten(-1, (rows, step)).cumsum(-2)  # prefix[j, r] = Σ_{j' ≤ j} x[j'·step + r]

    def box_sum(box: Box) -> torch.Tensor:
        if box is None:
            return torch.zeros_like(prefix[..., 0, 0])
        first, last, _ = box
        total = prefix[..., last // step, first % step]
        return total - prefix[..., first // step - 1, first % step] if first >= step else total

    return torch.stack([box_sum(box) for box in boxes], -1).movedim(-1, dim)


def _distinct(boxes: Sequence[Box]) -> tuple[tuple[Box, ...], tuple[tuple[int, ...], ...]]:
    """The distinct non-empty boxes and, for each, the taps that reach it: taps sharing a box
    share its sum (Σ_t W[t]·B = (Σ_t W[t])·B), so the weights of those taps are summed first
    (an uncropped transposed convolution has one box per dim: Σx · ΣW)."""
    taps: dict[Box, list[int]] = {}
    for t, box in enumerate(boxes):
        if box is not None:
            taps.setdefault(box, []).append(t)
    return tuple(taps), tuple(tuple(group) for group in taps.values())


def _tap_sums(w: torch.Tensor, axis: int, groups: Sequence[Sequence[int]]) -> torch.Tensor:
    """``w`` with its taps along ``axis`` summed within each group."""
    if [list(g) for g in groups] == [[t] for t in range(w.shape[axis])]:
        return w
    return torch.stack([sum(w.select(axis, t) for t in group) for group in groups], axis)


# --- the summed convolution ---------------------------------------------------------------------


@terminal([aten.convolution])
def summed_convolution(graph: Graph, index: int, dims: tuple[int, ...]) -> Summed | None:
    """Σ over ``dims`` of a convolution's output, those dims kept at size 1, as the
    contraction of the module doc (``build(x, w, *b)``)."""
    op = graph.op(index)
    source, weight = op.reads[0], op.reads[1]
    shape = op.writes[0].shape
    spatial = len(shape) - 2
    if spatial < 1 or not dims:
        return None
    conv = _Conv.of(op)
    summed = [k for k in range(spatial) if 2 + k in dims]
    keep = [k for k in range(spatial) if 2 + k not in dims]
    boxes = {k: _distinct(_boxes(conv, k, source.shape[2 + k], weight.shape[2 + k],
                                 shape[2 + k])) for k in summed}
    if any(not unique for unique, _ in boxes.values()):
        return None  # no input reaches the summed outputs: the bias alone
    count = math.prod(shape[d] for d in dims if d != 1)  # the bias's copies in the sum
    groups, channels = conv.groups, 1 in dims
    keep_shape = tuple(1 if d in dims else n for d, n in enumerate(shape))
    summed_axes, keep_axes = [2 + k for k in summed], [2 + k for k in keep]

    def build(x: torch.Tensor, w: torch.Tensor, *b: torch.Tensor) -> torch.Tensor:
        if 0 in dims:
            x = x.sum(0, keepdim=True)
        for k in summed:
            x = _box_sums(x, 2 + k, boxes[k][0])
            w = _tap_sums(w, 2 + k, boxes[k][1])
        # the summed dims' taps folded into the input channels
        x = x.permute(0, 1, *summed_axes, *keep_axes).flatten(1, 1 + len(summed))
        if conv.transposed:  # W: (Cin, Cout/g, taps…)
            if channels:
                w = w.sum(1, keepdim=True)
            w = w.permute(0, *summed_axes, 1, *keep_axes).flatten(0, len(summed))
        else:  # W: (Cout, Cin/g, taps…)
            if channels:
                w = w.unflatten(0, (groups, -1)).sum(1)
            w = w.permute(0, 1, *summed_axes, *keep_axes).flatten(1, 1 + len(summed))
        if not keep:
            x, w = x.unsqueeze(-1), w.unsqueeze(-1)
        y = torch.ops.aten.convolution(x, w, None, *conv.rest(keep))
        if not keep:
            y = y.squeeze(-1)
        if channels:
            y = y.sum(1, keepdim=True)
        y = y.reshape(keep_shape)
        if b:
            bias = b[0].sum(0, keepdim=True) if channels else b[0]
            y = y + (bias * count).reshape(1, -1, *(1,) * spatial)
        return y

    return Summed(RULE, op.reads, build)


