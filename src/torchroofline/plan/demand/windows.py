"""Demand rules of window ops: convolutions (plain and transposed), pooling, unfold and
resampling."""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from ...costs import (
    NO_FLOPS,
    FlopCount,
    MatmulKind,
    aten,
    op_keys,
)
from ...trace.refs import TensorRef
from ...trace.regions import (
    NOWHERE,
    Box,
    Diagonal,
    IndexSet,
    Region,
    Spread,
    box_size,
    diagonals_count,
    fraction_of,
    full_box,
    make_diagonal,
    mapped_set,
    normalize,
    positions_to_set,
    range_intersection,
    set_intersection,
    set_size,
)
from ._core import Demand, _broadcast_batch, _Context, _one_of, _proportional, demand_rule
from .rearrange import _quotients, _remapped


def _tap_walk(
    out_set: IndexSet,
    kernel: int,
    padding: int,
    dilation: int,
    reached: Callable[[int], range],
    sources: Callable[[range, int], range],
) -> tuple[IndexSet, int, IndexSet]:
    """The taps of one spatial dim over demanded outputs ``out_set``: for each tap (its offset
    ``shift`` = tap·dilation − padding), ``reached(shift)`` is where it can land and
    ``sources(hit, shift)`` the input positions of the outputs ``hit`` it lands on. Returns the
    input positions read, the (output, tap) pairs and the taps used."""
    positions: list[range] = []
    pairs = 0
    taps = []
    for tap in range(kernel):
        shift = tap * dilation - padding
        hits = [hit for r in out_set if (hit := range_intersection(r, reached(shift)))]
        if hits:
            taps.append(tap)
            pairs += sum(map(len, hits))
            positions += [sources(hit, shift) for hit in hits]
    return normalize(positions), pairs, positions_to_set(taps)


def _window(
    out_set: IndexSet, in_size: int, kernel: int, stride: int, padding: int, dilation: int
) -> tuple[IndexSet, int, IndexSet]:
    """One spatial dim of a conv or pool: output o and tap k read input o·stride + k·dilation −
    padding. The input positions the demanded outputs read, the (output, tap) pairs that land
    inside the input (taps on padding cost nothing) and the taps used."""
    return _tap_walk(
        out_set, kernel, padding, dilation,
        # outputs whose tap lands inside: first o with o·stride + shift ≥ 0, last < in_size
        lambda shift: range(max(-(shift // stride), 0), (in_size - 1 - shift) // stride + 1),
        lambda hit, shift: range(
            hit.start * stride + shift, hit[-1] * stride + shift + 1, hit.step * stride
        ),
    )


def _cheapest_output_taps(
    out_shape: Sequence[int], in_shape: Sequence[int], kernel: Sequence[int],
    geometry: tuple[list[int], list[int], list[int]],
    window: Callable[..., tuple[IndexSet, int, IndexSet]] = _window,
) -> int:
    """The fewest in-bounds taps any one output position of a conv or pool (``window``: of a
    transposed conv) has, the trailing ``len(kernel)`` dims being spatial: what each demanded
    output with no known position costs at least, and the fewest input positions it reads."""
    stride, padding, dilation = geometry
    spatial = len(kernel)
    fewest = 1
    for d in range(spatial):
        out_size, in_size = out_shape[-spatial + d], in_shape[-spatial + d]
        fewest *= min(
            (window((range(o, o + 1),), in_size, kernel[d], stride[d], padding[d], dilation[d])[1]
             for o in range(out_size)),
            default=0,
        )
    return fewest


def _spatial_dims(base: str) -> int:
    """Spatial dims of a pooling or resampling op, from its name (``max_pool2d`` → 2)."""
    return next((int(d) for d in "321" if f"{d}d" in base), 1)


def _as_list(value: Any, count: int, default: int) -> list[int]:
    if value is None or value == [] or value == ():
        return [default] * count
    if isinstance(value, int):
        return [value] * count
    values = list(value)
    return values * count if len(values) == 1 else values


def _spatial_windows(
    window: Callable[..., tuple[IndexSet, int, IndexSet]],
    box: Box,
    source: TensorRef,
    weight: TensorRef,
    geometry: tuple[list[int], list[int], list[int]],
) -> list[tuple[IndexSet, int, IndexSet]]:
    """``window`` (conv or transposed conv) over each spatial dim of an (N, C, …) output box."""
    stride, padding, dilation = geometry
    return [
        window(
            box[2 + d], source.shape[2 + d], weight.shape[2 + d], stride[d], padding[d], dilation[d]
        )
        for d in range(len(source.shape) - 2)
    ]


def _unpadded(
    context: _Context, source: TensorRef, spatial: int, fill: float
) -> tuple[TensorRef, list[int]] | None:
    """(the tensor before an explicit ``constant_pad_nd`` with value ``fill`` on the spatial
    dims, the left pad of each dim), when ``source`` is that pad's output as it is: a conv over
    zeros (a max-pool over −inf) is the same window op with implicit padding, whose taps on the
    padding cost nothing. ``padding='same'`` with an even kernel pads this way."""
    producer = context.producers.get(source.value_id)
    if producer is None or aten.constant_pad_nd not in op_keys(producer) or not producer.reads:
        return None
    written = producer.writes[0]
    if (source.shape, source.strides) != (written.shape, written.strides):
        return None
    pads = list(producer.argument("pad", []))
    if producer.argument("value", 0) != fill or len(pads) > 2 * spatial or min(pads) < 0:
        return None
    left = [0] * spatial
    for index in range(0, len(pads), 2):
        left[spatial - 1 - index // 2] = pads[index]
    return producer.reads[0], left


def _conv_arguments(context: _Context, spatial: int) -> tuple[list[int], list[int], list[int], int]:
    """A convolution's stride, padding and dilation per spatial dim, and its groups."""
    return (
        _as_list(context.argument("stride"), spatial, 1),
        _as_list(context.argument("padding"), spatial, 0),
        _as_list(context.argument("dilation"), spatial, 1),
        context.argument("groups", 1) or 1,
    )


def _spread_inputs(
    spreads: Sequence[Spread], in_boxes: Sequence[Box], source: TensorRef, weight: TensorRef,
    geometry: tuple[list[int], list[int], list[int]], group_in: int,
) -> int:
    """Input elements that the outputs kept only as spreads need outside the windows of the
    output boxes (``in_boxes``): along a spatial dim, every input position a spread's
    positions reach and no box window holds is read, in a group's every channel, across at
    least the fewest in-bounds taps any of the spread's outputs has on each other spatial dim
    (a diagonal past the region's box limit: the rows beyond the kept boxes' windows)."""
    stride, padding, dilation = geometry
    spatial = len(source.shape) - 2

    def window(d: int, positions: IndexSet) -> tuple[IndexSet, int, IndexSet]:
        return _window(positions, source.shape[2 + d], weight.shape[2 + d], stride[d],
                       padding[d], dilation[d])

    most = 0
    for spread in spreads:
        if len(spread.box) != spatial + 2:
            continue
        fewest = [min((window(d, (range(o, o + 1),))[1] for r in spread.box[2 + d] for o in r),
                      default=0) for d in range(spatial)]
        for d in range(spatial):
            reached = {i for r in window(d, spread.box[2 + d])[0] for i in r}
            shown = {i for box in in_boxes for r in box[2 + d] for i in r}
            across = math.prod(fewest[e] for e in range(spatial) if e != d)
            most = max(most, group_in * len(reached - shown) * across)
    return most


def _in_bounds(first: int, step: int, size: int, length: int) -> range:
    """The i in [0, ``length``) with 0 ≤ first + i·step < size (``step`` nonzero)."""
    low, high = (-first, size - 1 - first) if step > 0 else (first - size + 1, first)
    return range(max(-(-low // abs(step)), 0), min(high // abs(step), length - 1) + 1)


@dataclasses.dataclass(frozen=True)
class _DiagonalWindows:
    """What a conv's outputs along diagonals read: the input along diagonals, the weight taps,
    and the (output, in-bounds tap) pairs times the images and output channels (each pair
    2·(Ci/groups) FLOPs)."""

    inputs: tuple[Diagonal, ...] = ()
    #: diagonals clipped to one point by the input's edges; the windows of a diagonal of
    #: images and channels
    input_points: tuple[Box, ...] = ()
    weight_boxes: tuple[Box, ...] = ()
    pairs: int = 0
    #: input elements the windows of a diagonal of images and channels hold (exact: their
    #: boxes may be more than a region keeps)
    input_count: int = 0


def _diagonal_windows(
    lines: Sequence[Diagonal], source: TensorRef, weight: TensorRef,
    geometry: tuple[list[int], list[int], list[int]],
    group_channels: Callable[[IndexSet], IndexSet], images: Callable[[IndexSet], int],
) -> _DiagonalWindows:
    """The windows of a conv's outputs kept along diagonals (:class:`Diagonal`): per tap
    combination of the diagonal's dims, output i reads input (origin + i·step)·stride +
    tap·dilation − padding on each, itself a diagonal where it lands inside the input; the
    other dims window as boxes do (:func:`_window`). Exact: diagonals of one step count their
    union exactly (:func:`diagonals_count`), so the input is the union of the receptive
    fields, no more (a 3×3 window along an n-output diagonal: 5n + 4 positions)."""
    stride, padding, dilation = geometry
    spatial = len(source.shape) - 2
    inputs: list[Diagonal] = []
    points: list[Box] = []
    weights: list[Box] = []
    pairs = 0
    count = 0
    for kept in lines:
        if len(kept.box) != spatial + 2 or 0 < min(kept.dims) < 2 or (
            min(kept.dims) == 0 and (kept.dims != (0, 1) or images(kept.box[0]) == 1)
        ):
            continue
        exact = {
            d: _window(kept.box[2 + d], source.shape[2 + d], weight.shape[2 + d], stride[d],
                       padding[d], dilation[d])
            for d in range(spatial) if 2 + d not in kept.dims
        }
        if kept.dims == (0, 1):  # image i with output channel i (y.diagonal(0, 0, 1))
            windows = [exact[d] for d in range(spatial)]
            pairs += kept.length * math.prod(w[1] for w in windows)
            weights.append((kept.box[1], (range(weight.shape[1]),), *(w[2] for w in windows)))
            # each image's window in the input channels of its channel's group: distinct
            # (image, group) pairs share no element
            reads = {
                (range(n, n + 1), group_channels((range(c, c + 1),)))
                for n, c in zip(kept.walk(0), kept.walk(1), strict=True)
            }
            points += [((n,), channels, *(w[0] for w in windows)) for n, channels in reads]
            count = max(count, sum(set_size(channels) for _, channels in reads)
                        * math.prod(set_size(w[0]) for w in windows))
            continue
        linked = [dim - 2 for dim in kept.dims]
        sets = [kept.box[0], group_channels(kept.box[1]), *(
            exact[d][0] if d in exact else () for d in range(spatial))]
        per_tap = images(kept.box[0]) * set_size(kept.box[1]) * math.prod(
            w[1] for w in exact.values())
        for taps in itertools.product(*(range(weight.shape[2 + d]) for d in linked)):
            firsts = [kept.origin[k] * stride[d] + tap * dilation[d] - padding[d]
                      for k, (d, tap) in enumerate(zip(linked, taps, strict=True))]
            steps = [s * stride[d] for s, d in zip(kept.step, linked, strict=True)]
            inside = range(0, kept.length)
            for d, first, step in zip(linked, firsts, steps, strict=True):
                inside = range_intersection(
                    inside, _in_bounds(first, step, source.shape[2 + d], kept.length))
            if not inside:
                continue
            pairs += per_tap * len(inside)
            starts = [f + inside.start * s for f, s in zip(firsts, steps, strict=True)]
            read = make_diagonal(sets, kept.dims, starts, steps, len(inside))
            (inputs if isinstance(read, Diagonal) else points).append(read)
            used = {d: (range(t, t + 1),) for d, t in zip(linked, taps, strict=True)}
            weights.append((kept.box[1], (range(weight.shape[1]),), *(
                used[d] if d in used else exact[d][2] for d in range(spatial))))
    return _DiagonalWindows(tuple(inputs), tuple(points), tuple(weights), pairs, count)


@demand_rule([aten.convolution, aten._convolution])
def convolution_demand(context: _Context) -> Demand:
    """out[n, co, p] needs the input window of p in co's group and co's filter taps that land on
    real input: FLOPs 2 · (Ci/groups) per (output, in-bounds tap) pair."""
    op = context.op
    if len(op.reads) < 2:
        return _proportional(context)
    if context.argument("transposed", False):
        return _transposed_convolution(context)
    source, weight, *bias = op.reads
    spatial = len(source.shape) - 2
    region = context.output
    if spatial < 1 or any(len(box) != spatial + 2 for box in region.boxes):
        return _proportional(context)
    stride, padding, dilation, groups = _conv_arguments(context, spatial)
    padded_source = source
    unpadded = _unpadded(context, source, spatial, 0)
    if unpadded is not None:
        source, left = unpadded
        padding = [p + extra for p, extra in zip(padding, left, strict=True)]
    out_channels, group_in = weight.shape[0], weight.shape[1]
    per_group_out = out_channels // groups
    in_boxes, weight_boxes, bias_boxes = [], [], []
    flops = 0
    sizes = 0
    # an input broadcast along the batch (x.expand(B, …)) gives B equal images: one conv
    broadcast = _broadcast_batch(source)

    def group_channels(out_set: IndexSet) -> IndexSet:
        """The input channels of the groups of output channels ``out_set``."""
        return normalize(
            range(g * group_in, (g + 1) * group_in)
            for g in sorted({c // per_group_out for r in out_set for c in r})
        )

    for box in region.boxes:
        windows = _spatial_windows(_window, box, source, weight, (stride, padding, dilation))
        channels = group_channels(box[1])
        in_boxes.append((box[0], channels, *(w[0] for w in windows)))
        weight_boxes.append((box[1], (range(group_in),), *(w[2] for w in windows)))
        bias_boxes.append((box[1],))
        images = min(set_size(box[0]), 1) if broadcast else set_size(box[0])
        flops += 2 * group_in * images * set_size(box[1]) * math.prod(w[1] for w in windows)
        sizes += box_size(box)
    share = region.count / sizes if sizes else 0.0
    # outputs demanded with no position (a fallback lost them): each costs at least the
    # cheapest output's taps, and one of them reads a window of that many positions per channel
    floor = 0
    if region.opaque and not sizes:
        floor = group_in * _cheapest_output_taps(
            op.writes[0].shape, source.shape, weight.shape[2:], (stride, padding, dilation)
        )
        flops = 2 * floor * region.opaque
        share = 1.0
    # outputs kept along diagonals (one past MAX_BOXES elements): their windows exactly
    along = _diagonal_windows(
        region.diagonals, source, weight, (stride, padding, dilation), group_channels,
        (lambda images: min(set_size(images), 1)) if broadcast else set_size,
    )
    if region.diagonals:
        along_flops = 2 * group_in * along.pairs
        # diagonals that hold every demanded output price them all; else they add a floor
        every = diagonals_count(region.diagonals) >= region.count
        flops = along_flops if every else max(int(flops * share), along_flops)
        share = 1.0
    tensor = min(int(flops * share), context.record.flops.tensor)
    flop_count = FlopCount(tensor=tensor, kind=MatmulKind.CONV)
    rest = (
        Region.of((*weight_boxes, *along.weight_boxes), floor),
        *(Region.of((*bias_boxes, *((kept.box[1],) for kept in region.diagonals)),
                    min(region.opaque, 1)) for _ in bias),
    )
    if region.spreads:  # outputs past the region's box limit, known dim by dim (a long diagonal)
        geometry = (stride, padding, dilation)
        beyond = _spread_inputs(region.spreads, in_boxes, source, weight, geometry, group_in)
        floor = max(floor, (Region.of(in_boxes).count if in_boxes else 0) + beyond)
    source_region = Region.of(
        (*in_boxes, *along.input_points), max(floor, along.input_count), (), along.inputs
    )
    if source is padded_source:
        structure = "broadcast batch" if broadcast else None
        return Demand((source_region, *rest), flop_count, structure=structure)
    extra = ((source, source_region),)
    return Demand((NOWHERE, *rest), flop_count, extra, structure="explicit padding")


def _transposed_window(
    out_set: IndexSet, in_size: int, kernel: int, stride: int, padding: int, dilation: int
) -> tuple[IndexSet, int, IndexSet]:
    """One spatial dim of a transposed conv: input i and tap k land on output
    i·stride − padding + k·dilation. Returns the input positions that reach demanded outputs,
    the (input, tap) pairs landing on them and the taps used."""
    return _tap_walk(
        out_set, kernel, padding, dilation,
        # the outputs a tap reaches: shift, shift + stride, … (one per input position)
        lambda shift: range(shift, shift + stride * in_size, stride),
        lambda hit, shift: range(
            (hit.start - shift) // stride,
            (hit.start - shift) // stride + len(hit) * (hit.step // stride),
            hit.step // stride,
        ),
    )


def _transposed_convolution(context: _Context) -> Demand:
    """out[n, co, p] gathers every (input position, tap) pair that lands on p, for the input
    channels of co's group: 2 · (Ci/groups) FLOPs per pair and output channel."""
    source, weight, *bias = context.op.reads
    spatial = len(source.shape) - 2
    region = context.output
    if spatial < 1 or any(len(box) != spatial + 2 for box in region.boxes):
        return _proportional(context)
    stride, padding, dilation, groups = _conv_arguments(context, spatial)
    in_channels, per_group_out = weight.shape[0], weight.shape[1]
    group_in = in_channels // groups
    in_boxes, weight_boxes, bias_boxes = [], [], []
    flops, sizes = 0, 0
    for box in region.boxes:
        windows = _spatial_windows(
            _transposed_window, box, source, weight, (stride, padding, dilation)
        )
        out_channels = [c for r in box[1] for c in r]
        groups_used = sorted({c // per_group_out for c in out_channels})
        channels = normalize(range(g * group_in, (g + 1) * group_in) for g in groups_used)
        in_boxes.append((box[0], channels, *(w[0] for w in windows)))
        weight_boxes.append(
            (
                channels,
                positions_to_set(c % per_group_out for c in out_channels),
                *(w[2] for w in windows),
            )
        )
        bias_boxes.append((box[1],))
        flops += (
            2 * group_in * set_size(box[0]) * len(out_channels) * math.prod(w[1] for w in windows)
        )
        sizes += box_size(box)
    share = region.count / sizes if sizes else 0.0
    floor = 0  # outputs with no position: the cheapest output's pairs (as for convolution)
    if region.opaque and not sizes:
        floor = group_in * _cheapest_output_taps(
            context.op.writes[0].shape, source.shape, weight.shape[2:],
            (stride, padding, dilation), _transposed_window,
        )
        flops, share = 2 * floor * region.opaque, 1.0
    inputs = (
        Region.of(in_boxes, floor),
        Region.of(weight_boxes, floor),
        *(Region.of(bias_boxes, min(region.opaque, 1)) for _ in bias),
    )
    tensor = min(int(flops * share), context.record.flops.tensor)
    return Demand(inputs, FlopCount(tensor=tensor, kind=MatmulKind.CONV))


_MAX_POOLS = (
    aten.max_pool1d,
    aten.max_pool2d,
    aten.max_pool3d,
    aten.max_pool2d_with_indices,
    aten.max_pool3d_with_indices,
)


@demand_rule([*_MAX_POOLS, aten.avg_pool1d, aten.avg_pool2d, aten.avg_pool3d])
def pooling_demand(context: _Context) -> Demand:
    """out[..., p] needs the input window of p; one compare or add per in-bounds tap."""
    source = context.op.reads[0]
    spatial = _spatial_dims(context.op.base)
    kernel = _as_list(context.argument("kernel_size"), spatial, 1)
    stride = _as_list(context.argument("stride"), spatial, 0)
    stride = [s or k for s, k in zip(stride, kernel, strict=True)]
    padding = _as_list(context.argument("padding"), spatial, 0)
    dilation = _as_list(context.argument("dilation"), spatial, 1)
    lead = len(source.shape) - spatial
    region = context.output
    if any(len(box) != len(source.shape) for box in region.boxes):
        return _proportional(context)
    padded_source = source
    maximum = _one_of(context.op, frozenset(_MAX_POOLS))
    unpadded = _unpadded(context, source, spatial, -math.inf) if maximum else None
    if unpadded is not None:
        source, left = unpadded
        padding = [p + extra for p, extra in zip(padding, left, strict=True)]
    boxes, taps, sizes = [], 0, 0
    for box in region.boxes:
        windows = [
            _window(
                box[lead + d], source.shape[lead + d], kernel[d], stride[d], padding[d], dilation[d]
            )
            for d in range(spatial)
        ]
        boxes.append((*box[:lead], *(w[0] for w in windows)))
        taps += math.prod(set_size(s) for s in box[:lead]) * math.prod(w[1] for w in windows)
        sizes += box_size(box)
    share = region.count / sizes if sizes else 0.0
    floor = 0  # outputs with no position: the cheapest output's taps each (as for convolution)
    if region.opaque and not sizes:
        floor = _cheapest_output_taps(
            context.op.writes[0].shape, source.shape, kernel, (stride, padding, dilation)
        )
        taps, share = floor * region.opaque, 1.0
    flops = FlopCount(vector=min(int(taps * share), context.record.flops.vector))
    source_region = Region.of(boxes, floor)
    if source is padded_source:
        return Demand((source_region,), flops)
    return Demand((NOWHERE,), flops, ((source, source_region),), structure="explicit padding")


def _clipped(index_set: IndexSet, origin: int, step: int, size: int) -> IndexSet:
    """Positions ``origin + i·step`` for i in ``index_set`` that lie in [0, size) (a window
    tap's input positions; the rest are padding)."""
    return set_intersection(mapped_set(index_set, origin, step), (range(size),))


def _grid_boxes(flat: IndexSet, width: int) -> list[tuple[IndexSet, IndexSet]]:
    """Flat positions y·width + x as (rows, columns) boxes: a run of step 1 is its partial first
    row, its whole middle rows and its partial last row; other runs row by row."""
    boxes: list[tuple[IndexSet, IndexSet]] = []
    for run in flat:
        if not run:
            continue
        first, last = divmod(run.start, width), divmod(run[-1], width)
        if run.step != 1:
            rows: dict[int, list[int]] = {}
            for position in run:
                rows.setdefault(position // width, []).append(position % width)
            boxes += [((range(y, y + 1),), positions_to_set(xs)) for y, xs in rows.items()]
        elif first[0] == last[0]:
            boxes.append(((range(first[0], first[0] + 1),), (range(first[1], last[1] + 1),)))
        else:
            boxes.append(((range(first[0], first[0] + 1),), (range(first[1], width),)))
            if last[0] > first[0] + 1:
                boxes.append(((range(first[0] + 1, last[0]),), (range(width),)))
            boxes.append(((range(last[0], last[0] + 1),), (range(last[1] + 1),)))
    return boxes


def _im2col_part(context: _Context) -> Demand:
    """Part of an ``F.unfold`` output: output (c·kh + ki)·kw + kj at column y·ow + x is input
    ``[c, y·sh − ph + ki·dh, x·sw − pw + kj·dw]`` (zero where that is padding): per tap (ki, kj)
    the demanded channels, and the strided rows and columns of the demanded output columns."""
    height, width = context.op.reads[0].shape[-2:]
    kernel_h, kernel_w = context.argument("kernel_size")
    dilation_h, dilation_w = context.argument("dilation")
    padding_h, padding_w = context.argument("padding")
    stride_h, stride_w = context.argument("stride")
    out_w = (width + 2 * padding_w - dilation_w * (kernel_w - 1) - 1) // stride_w + 1
    taps = kernel_h * kernel_w

    def boxes_of(box: Box) -> Iterable[Box]:
        *lead, channels, columns = box
        grid = _grid_boxes(columns, out_w)
        for tap in range(taps):
            ki, kj = divmod(tap, kernel_w)
            in_channels = _quotients(channels, taps, tap)
            for ys, xs in grid:
                yield (
                    *lead,
                    in_channels,
                    _clipped(ys, ki * dilation_h - padding_h, stride_h, height),
                    _clipped(xs, kj * dilation_w - padding_w, stride_w, width),
                )

    return _remapped(context, boxes_of)


@demand_rule([aten.im2col])
def im2col_demand(context: _Context) -> Demand:
    """``F.unfold``: the whole output needs the input positions some window covers (a stride
    longer than the window skips the rest); a part, the positions its taps read."""
    source = context.op.reads[0]
    if len(source.shape) < 3:
        return _proportional(context)
    if context.fraction < 1.0:
        return _im2col_part(context)
    kernel = _as_list(context.argument("kernel_size"), 2, 1)
    dilation = _as_list(context.argument("dilation"), 2, 1)
    padding = _as_list(context.argument("padding"), 2, 0)
    stride = _as_list(context.argument("stride"), 2, 1)
    lead = len(source.shape) - 2
    windows = []
    for d in range(2):
        size = source.shape[lead + d]
        out = (size + 2 * padding[d] - dilation[d] * (kernel[d] - 1) - 1) // stride[d] + 1
        windows.append(
            _window((range(max(out, 0)),), size, kernel[d], stride[d], padding[d], dilation[d])[0]
        )
    box = (*full_box(source.shape[:lead]), *windows)
    return Demand((Region.of([box]),), NO_FLOPS)


@demand_rule([aten.col2im])
def col2im_demand(context: _Context) -> Demand:
    """``F.fold``, the sum back of :func:`im2col_demand`'s taps: output ``[c, y, x]`` needs, per
    tap (ki, kj), input channel (c·kh + ki)·kw + kj at the column (y + ph − ki·dh)/sh ·ow
    + (x + pw − kj·dw)/sw where both divide and land inside the window grid."""
    height, width = context.argument("output_size")
    kernel_h, kernel_w = context.argument("kernel_size")
    dilation_h, dilation_w = context.argument("dilation")
    padding_h, padding_w = context.argument("padding")
    stride_h, stride_w = context.argument("stride")
    out_h = (height + 2 * padding_h - dilation_h * (kernel_h - 1) - 1) // stride_h + 1
    out_w = (width + 2 * padding_w - dilation_w * (kernel_w - 1) - 1) // stride_w + 1
    taps = kernel_h * kernel_w

    def window_positions(index_set: IndexSet, offset: int, stride: int, count: int) -> IndexSet:
        shifted = mapped_set(index_set, offset)
        return set_intersection(_quotients(shifted, stride, 0), (range(count),))

    def boxes_of(box: Box) -> Iterable[Box]:
        *lead, channels, ys, xs = box
        for tap in range(taps):
            ki, kj = divmod(tap, kernel_w)
            rows = window_positions(ys, padding_h - ki * dilation_h, stride_h, out_h)
            columns = window_positions(xs, padding_w - kj * dilation_w, stride_w, out_w)
            flat = normalize(
                r for y in itertools.chain(*rows) for r in mapped_set(columns, y * out_w)
            )
            yield (*lead, mapped_set(channels, tap, taps), flat)

    demand = _remapped(context, boxes_of)
    if demand.flops is not NO_FLOPS:  # no boxes to map: the proportional share, FLOPs included
        return demand
    # k column elements summed into one output take k − 1 adds (the kernel's k adds into a
    # zeroed image are one more each): the landings on demanded outputs less one per demanded
    # output, a floor where some outputs take none (a stride past the window leaves gaps); the
    # taps of a position read distinct channels: no overlap
    adds = max(0, demand.inputs[0].count - context.output.count)
    return dataclasses.replace(demand, flops=FlopCount(vector=adds))


def _scale_ratios(context: _Context, spatial: int) -> list[float | None]:
    """Source steps per output step that the op was given (``scale_factor`` → 1/scale), per
    spatial dim; None where torch derives it from the sizes (in/out)."""
    names = [name for name in context.op.argument_names if name.startswith("scales")]
    if len(names) == 1 and spatial > 1:  # upsample_*.vec: one list for all dims
        given = context.argument(names[0])
        given = list(given) if isinstance(given, (list, tuple)) else [given] * spatial
    else:
        given = [context.argument(name) for name in names] or [None] * spatial
    given = (given + [None] * spatial)[:spatial]
    return [1.0 / scale if scale else None for scale in given]


def _resampled(
    context: _Context,
    source_positions: Callable[[int, int, int, float], Sequence[int]],
    per_input: bool = False,
) -> Demand:
    """Resampling ops: per spatial dim, output o reads the source positions the mapping gives
    (``source_positions(o, in_size, out_size, ratio)``, ratio = source steps per output step).
    FLOPs scale with the share of outputs demanded or, for ops priced per input element
    (``per_input``), with the share of the input those outputs read if larger: every element
    read is accumulated at least once."""
    source = context.op.reads[0]
    out_shape = context.op.writes[0].shape
    region = context.output
    if len(out_shape) != len(source.shape) or any(len(b) != len(out_shape) for b in region.boxes):
        return _proportional(context)
    spatial = _spatial_dims(context.op.base)
    lead = len(out_shape) - spatial
    ratios = _scale_ratios(context, spatial)
    boxes = []
    for box in region.boxes:
        sets = list(box[:lead])
        for dim in range(lead, len(out_shape)):
            in_size, out_size = source.shape[dim], out_shape[dim]
            ratio = ratios[dim - lead] or in_size / out_size
            demanded = [o for r in box[dim] for o in r]
            if len(demanded) > 65536:
                return _proportional(context)
            sets.append(
                positions_to_set(
                    p
                    for o in demanded
                    for p in source_positions(o, in_size, out_size, ratio)
                    if 0 <= p < in_size
                )
            )
        boxes.append(tuple(sets))
    share = fraction_of(region, math.prod(out_shape))
    read = Region.of(boxes)
    if per_input:
        share = max(share, fraction_of(read, math.prod(source.shape)))
    inputs = (read,) + tuple(NOWHERE for _ in context.op.reads[1:])
    return Demand(inputs, context.record.flops.scaled(share))


@demand_rule([aten.upsample_nearest1d, aten.upsample_nearest2d, aten.upsample_nearest3d])
def nearest_demand(context: _Context) -> Demand:
    """Nearest: output o reads floor(o · ratio), ratio = in/out or 1/scale_factor."""
    return _resampled(context, lambda o, i, n, ratio: (min(math.floor(o * ratio), i - 1),))


@demand_rule(
    [aten._upsample_nearest_exact1d, aten._upsample_nearest_exact2d, aten._upsample_nearest_exact3d]
)
def nearest_exact_demand(context: _Context) -> Demand:
    """Nearest-exact: output o reads floor((o + ½) · ratio)."""
    return _resampled(context, lambda o, i, n, ratio: (min(math.floor((o + 0.5) * ratio), i - 1),))


def _linear_taps(extra_left: int, extra_right: int) -> Callable[..., Sequence[int]]:
    """Source taps around each output's centre; linear clamps a negative centre to 0 (torch's
    area_pixel_compute_source_index), cubic does not."""
    cubic = extra_left > 0

    def taps(context: _Context, o: int, i: int, n: int, ratio: float) -> Sequence[int]:
        if context.argument("align_corners", False):
            centre = o * (i - 1) / (n - 1) if n > 1 else 0.0
        else:
            centre = (o + 0.5) * ratio - 0.5
            centre = centre if cubic else max(centre, 0.0)
        base = math.floor(centre)
        return [min(max(base + k, 0), i - 1) for k in range(-extra_left, 2 + extra_right)]

    return taps


@demand_rule([aten.upsample_bilinear2d, aten.upsample_linear1d, aten.upsample_trilinear3d])
def linear_demand(context: _Context) -> Demand:
    """(Bi/tri)linear: output o reads the two source positions around its centre."""
    taps = _linear_taps(0, 0)
    return _resampled(context, lambda o, i, n, ratio: taps(context, o, i, n, ratio))


@demand_rule([aten.upsample_bicubic2d])
def cubic_demand(context: _Context) -> Demand:
    """Bicubic: output o reads the four source positions around its centre."""
    taps = _linear_taps(1, 1)
    return _resampled(context, lambda o, i, n, ratio: taps(context, o, i, n, ratio))


@demand_rule(
    [
        aten._adaptive_avg_pool2d,
        aten._adaptive_avg_pool3d,
        aten.adaptive_avg_pool1d,
        aten.adaptive_max_pool2d,
        aten.adaptive_max_pool3d,
        aten.adaptive_max_pool1d,
    ]
)
def adaptive_pool_demand(context: _Context) -> Demand:
    """Adaptive pooling: output o averages source [floor(o·in/out), ceil((o+1)·in/out)), one
    FLOP per element of the input (so per element the demanded outputs read)."""
    return _resampled(
        context, lambda o, i, n, ratio: range(o * i // n, -(-((o + 1) * i) // n)), per_input=True
    )
