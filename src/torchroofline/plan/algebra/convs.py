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

The sum is found through what lies between it and the convolution: a view that keeps whole
dims (``flatten(2).mean(-1)``), the pointwise steps of :data:`.linear.STEPS` and an eval-mode
batch norm (a per-channel affine); whole-image average pools (``avg_pool2d`` over the whole
input, ``adaptive_avg_pool2d(x, 1)``) are means over the pooled dims. Identities over the reals
for finite inputs; every removed intermediate read by the next op alone, no write between.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from ...costs import aten, lookup
from ...trace.refs import TensorRef, TracedOp
from ._core import SUMS, Graph, Match, algebra_rule, folded, is_contiguous, reduced_dims
from .linear import RULE, STEPS, _Step, _step, _summed

_FLOATS = ("float32", "float16", "bfloat16", "float64")


# --- which dims of the convolution's output a sum folds -----------------------------------------


def _bounds(shape: Sequence[int]) -> set[int]:
    """The element strides where a contiguous ``shape``'s dims begin and end."""
    return {math.prod(shape[d:]) for d in range(len(shape) + 1)}


def dims_through_view(
    ref: TensorRef, out: TensorRef, dims: Sequence[int]
) -> tuple[int, ...] | None:
    """The dims of ``out`` that a reduction over ``dims`` of ``ref`` (a view of ``out``) folds,
    or None where ``ref`` is no contiguous reshape of ``out`` or a summed dim of ``ref`` cuts a
    dim of ``out`` (a view that keeps whole dims: ``flatten(2)``, ``unsqueeze``)."""
    if (ref.shape, ref.strides, ref.offset) == (out.shape, out.strides, out.offset):
        return tuple(dims)
    if ref.offset != out.offset or not (is_contiguous(ref) and is_contiguous(out)) or (
        math.prod(ref.shape) != math.prod(out.shape)
    ):
        return None
    bounds = _bounds(out.shape)
    spans = []
    for d in dims:
        low, high = math.prod(ref.shape[d + 1:]), math.prod(ref.shape[d:])
        if low not in bounds or high not in bounds:
            return None
        spans.append((low, high))
    return tuple(
        e for e, size in enumerate(out.shape)
        if size > 1 and any(low <= math.prod(out.shape[e + 1:]) and
                            math.prod(out.shape[e:]) <= high for low, high in spans)
    )


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


def conv_sum(op: TracedOp, dims: Sequence[int]) -> Callable[..., torch.Tensor] | None:
    """``build(x, w, *b)``: Σ over ``dims`` of ``op``'s output (a convolution's), those dims
    kept at size 1, as the contraction of the module doc; None where nothing is summed."""
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

    return build


# --- the walk from the sum back to the convolution ----------------------------------------------


@dataclass(frozen=True)
class _Stage:
    """A step between the convolution and the sum, with the shape and summed dims it sees."""

    step: _Step
    shape: tuple[int, ...]
    dims: tuple[int, ...]


def _walk(graph: Graph, root: int, dims: tuple[int, ...]) -> tuple[int, tuple[int, ...],
                                                                   list[_Stage]] | None:
    """From the sum back through views, :data:`.linear.STEPS` and eval-mode batch norms to a
    convolution: (its index, the summed dims of its output, the steps in program order)."""
    ref, reader = graph.op(root).reads[0], root
    stages: list[_Stage] = []
    while True:
        if not graph.read_only_by(ref, reader):
            return None
        found = graph.producer(ref)
        if found is None:
            return None
        index, producer = found
        out = producer.writes[0]
        dims = dims_through_view(ref, out, dims)
        if not dims or any(
            graph.readers.get(w.value_id) or w.value_id in graph.trace.output_value_ids
            for w in producer.writes[1:]
        ):
            return None
        if producer.func is not None and producer.func.overloadpacket is aten.convolution:
            return index, dims, stages[::-1]
        rule = lookup(STEPS, producer)
        if rule is None:
            return None
        shape = out.shape
        step = None
        for main, read in enumerate(producer.reads):
            if read.shape == shape and graph.producer(read) is not None:
                step = rule(producer, main, dims, shape)
                if step is not None:
                    ref = read
                    break
        if step is None:
            return None
        stages.append(_Stage(step, shape, dims))
        reader = index


def _summed_through(graph: Graph, root: int, dims: tuple[int, ...], divisor: int) -> Match | None:
    """Σ over ``dims`` of what ``root`` reads (÷ ``divisor``), where a convolution feeds it."""
    op = graph.op(root)
    source = op.reads[0]
    if source.dtype not in _FLOATS or folded(source.shape, dims) <= 1:
        return None
    walked = _walk(graph, root, dims)
    if walked is None:
        return None
    anchor, conv_dims, stages = walked
    conv = graph.op(anchor)
    build_sum = conv_sum(conv, conv_dims)
    if build_sum is None:
        return None
    operands = conv.reads
    sides = [side for stage in stages for side in stage.step.sides]
    inputs = (*operands, *sides)
    if graph.written_between(inputs, anchor, root):
        return None
    count = len(operands)
    out_shape = op.writes[0].shape

    def build(*tensors: torch.Tensor) -> torch.Tensor:
        y = build_sum(*tensors[:count])
        rest = iter(tensors[count:])
        for stage in stages:
            keep = tuple(1 if d in stage.dims else n for d, n in enumerate(stage.shape))
            values = [
                _summed(next(rest), stage.shape, stage.dims) if summed else next(rest)
                for summed in stage.step.summed
            ]
            y = stage.step.replay(y.reshape(keep), *values)
        return (y / divisor if divisor != 1 else y).reshape(out_shape)

    return Match(RULE, root, inputs, build, anchor)


@algebra_rule(SUMS)
def sum_through_convolution(graph: Graph, root: int) -> Match | None:
    """Σ_D (or the mean) of a convolution's output, through views and :data:`STEPS`, as the
    contraction of the module doc."""
    op = graph.op(root)
    if not op.reads or op.argument("dtype") is not None:
        return None
    dims = reduced_dims(op)
    divisor = folded(op.reads[0].shape, dims) if op.func.overloadpacket is aten.mean else 1
    return _summed_through(graph, root, dims, divisor)


_POOLS = {aten.avg_pool1d: 1, aten.avg_pool2d: 2, aten.avg_pool3d: 3}
_ADAPTIVE = {aten.adaptive_avg_pool1d: 1, aten._adaptive_avg_pool2d: 2,
             aten._adaptive_avg_pool3d: 3}


@algebra_rule(list(_POOLS))
def whole_image_pool(graph: Graph, root: int) -> Match | None:
    """An average pool whose one window is the whole unpadded image is a mean over the pooled
    dims (÷ ``divisor_override`` where given)."""
    op = graph.op(root)
    source = op.reads[0]
    rank = _POOLS[op.func.overloadpacket]
    window = tuple(op.argument("kernel_size"))
    window = window * (rank if len(window) == 1 else 1)
    if window != source.shape[-rank:] or any(op.argument("padding", (0,))):
        return None
    dims = tuple(range(len(source.shape) - rank, len(source.shape)))
    divisor = op.argument("divisor_override") or math.prod(window)
    return _summed_through(graph, root, dims, divisor)


@algebra_rule(list(_ADAPTIVE))
def adaptive_pool_to_one(graph: Graph, root: int) -> Match | None:
    """``adaptive_avg_pool(x, 1)`` is the mean over the pooled dims."""
    op = graph.op(root)
    source = op.reads[0]
    rank = _ADAPTIVE[op.func.overloadpacket]
    if any(n != 1 for n in op.writes[0].shape[-rank:]):
        return None
    dims = tuple(range(len(source.shape) - rank, len(source.shape)))
    return _summed_through(graph, root, dims, folded(source.shape, dims))


# --- an eval-mode batch norm is a per-channel affine --------------------------------------------

_EVAL_NORMS = [aten.native_batch_norm, aten._native_batch_norm_legit_no_training,
               aten.cudnn_batch_norm, aten.miopen_batch_norm]


def _tensor_arguments(op: TracedOp) -> dict[str, TensorRef]:
    """``op``'s tensor arguments by schema name, as the refs it read them by."""
    names = [n for n in op.argument_names if isinstance(op.argument(n), torch.Tensor)]
    return dict(zip(names, op.reads, strict=False))


@_step(_EVAL_NORMS)
def _eval_batch_norm(op: TracedOp, main: int, dims: Sequence[int],
                     shape: Sequence[int]) -> _Step | None:
    """Σ_D BN(y) = (Σ_D y − |D|·μ)·γ/√(σ² + ε) + |D|·β with the running statistics (eval
    mode), for D without the channel dim: a per-channel affine commutes with the sum."""
    tensors = _tensor_arguments(op)
    if main != 0 or op.argument("training", False) or 1 in dims or not (
        "running_mean" in tensors and "running_var" in tensors
    ):
        return None
    eps = float(op.args[-1])
    count = folded(shape, dims)
    names = [n for n in ("running_mean", "running_var", "weight", "bias") if n in tensors]
    sides = tuple(tensors[n] for n in names)
    channel = (1, -1, *(1,) * (len(shape) - 2))

    def replay(y: torch.Tensor, *values: torch.Tensor) -> torch.Tensor:
        given = {n: v.reshape(channel) for n, v in zip(names, values, strict=True)}
        y = (y - count * given["running_mean"]) * torch.rsqrt(given["running_var"] + eps)
        if "weight" in given:
            y = y * given["weight"]
        return y + count * given["bias"] if "bias" in given else y

    return _Step(sides, (False,) * len(sides), replay)
