"""Rules of the windowed ops: convolutions, pooling, resampling (interpolation, grid sampling)
and folding."""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

from torch.utils.flop_counter import conv_flop_count

from ..trace.aten_ops import aten
from ..trace.refs import TracedOp
from ._core import (
    Category,
    FlopCount,
    FlopFormula,
    MatmulKind,
    OpKey,
    _first_tensor,
    _numel,
    register,
)
from .matmul import _flop_counter_formula


@register(
    [
        aten.max_pool1d, aten.max_pool2d, aten.max_pool3d, aten.max_pool2d_with_indices,
        aten.max_pool3d_with_indices, aten.avg_pool1d, aten.avg_pool2d, aten.avg_pool3d,
    ],
    Category.REDUCTION,
    fusible=True,
)
def pooling_flops(op: TracedOp) -> FlopCount:
    """Windowed pooling: one compare/add per window element per output element."""
    window = op.args[1] if len(op.args) > 1 else op.kwargs.get("kernel_size", 1)
    window_elements = math.prod(window) if isinstance(window, (list, tuple)) else int(window)
    spatial_dims = op.args[0].dim() - 2
    if isinstance(window, (list, tuple)) and len(window) == 1:
        window_elements = window[0] ** spatial_dims
    return FlopCount(vector=_numel(op.output) * window_elements)


register(
    [aten.convolution, aten._convolution, aten.cudnn_convolution, aten.convolution_overrideable],
    Category.COMPUTE,
    fusible=False,
)(_flop_counter_formula(MatmulKind.CONV))


@register(
    [aten._slow_conv2d_forward, aten.slow_conv3d_forward, aten._conv_depthwise2d,
     aten.conv_depthwise3d, aten.slow_conv_dilated2d, aten.slow_conv_dilated3d],
    Category.COMPUTE,
    fusible=False,
)
def backend_conv_flops(op: TracedOp) -> FlopCount:
    """The backends' own convolutions, ``(input, weight, kernel_size, bias, stride, padding[,
    dilation])``: flop_counter's convolution count (``conv_flop_count``) on their shapes. Its
    formula registered for ``_slow_conv2d_forward`` reads ``aten.convolution``'s arguments
    (``transposed`` seventh), which this op does not take. A depthwise weight (C, 1, k…) counts
    one input channel per output channel."""
    flops = conv_flop_count(op.args[0].shape, op.args[1].shape, _first_tensor(op.output).shape)
    return FlopCount(tensor=flops, kind=MatmulKind.CONV)


@register([aten.slow_conv_transpose2d, aten.slow_conv_transpose3d], Category.COMPUTE,
          fusible=False)
def backend_transposed_conv_flops(op: TracedOp) -> FlopCount:
    """A transposed convolution scatters each input element through the whole (Ci, Co, k…)
    weight: ``conv_flop_count``'s transposed count."""
    flops = conv_flop_count(op.args[0].shape, op.args[1].shape, _first_tensor(op.output).shape,
                            transposed=True)
    return FlopCount(tensor=flops, kind=MatmulKind.CONV)


#: Taps per spatial axis of each interpolating resample: (bi/tri)linear 2, bicubic 4,
#: Lanczos-3 6. The antialiased (``_aa``) variants widen their support when they shrink an axis,
#: so these are the fewest they use.
RESAMPLE_TAPS: dict[OpKey, int] = {
    aten.upsample_linear1d: 2, aten.upsample_bilinear2d: 2, aten.upsample_trilinear3d: 2,
    aten._upsample_bilinear2d_aa: 2, aten.upsample_bicubic2d: 4, aten._upsample_bicubic2d_aa: 4,
    aten._upsample_lanczos2d_aa: 6,
}


def resample_flops(taps: int) -> FlopFormula:
    """Each output element is a weighted sum of ``taps`` source elements per resampled axis, a
    multiply-add per tap (as a convolution counts 2 FLOPs per tap). Separable, it is one 1-D
    pass per axis, each over the elements the passes before it produced; charged is the
    cheapest of all pass orders and of the direct sum over every tap at once (taps^d per
    output element). An axis kept at its size passes its source through unchanged (weights
    0 and 1), so it costs nothing."""

    def formula(op: TracedOp) -> FlopCount:
        source, out = op.args[0].shape, _first_tensor(op.output).shape
        planes = math.prod(out[:2])
        axes = [(size, out_size) for size, out_size in zip(source[2:], out[2:], strict=True)
                if size != out_size]
        direct = taps ** len(axes) * math.prod(out[2:]) if axes else 0
        passes = [_separable_passes(order, source[2:], out[2:], axes) for order in
                  itertools.permutations(range(len(axes)))]
        per_plane = min([direct, *(taps * elements for elements in passes)])
        return FlopCount(vector=2 * planes * per_plane)

    return formula


def _separable_passes(order: tuple[int, ...], source: Sequence[int], out: Sequence[int],
                      axes: list[tuple[int, int]]) -> int:
    """Elements one plane's 1-D passes write, resampling ``axes`` (their (source, output)
    sizes) in ``order``; each pass writes the output size along the axes done so far and the
    source size along the rest."""
    sizes = list(source)
    resampled = [d for d, (size, out_size) in enumerate(zip(source, out, strict=True))
                 if size != out_size]
    written = 0
    for index in order:
        dim = resampled[index]
        sizes[dim] = axes[index][1]
        written += math.prod(sizes)
    return written


for _name, _taps in RESAMPLE_TAPS.items():
    register([_name], Category.DATA_MOVEMENT, fusible=True)(resample_flops(_taps))


#: ``grid_sampler``'s ``interpolation_mode``: taps per spatial axis (0 bilinear, 1 nearest,
#: 2 bicubic).
GRID_SAMPLER_TAPS = {0: 2, 1: 0, 2: 4}


@register([aten.grid_sampler_2d, aten.grid_sampler_3d], Category.DATA_MOVEMENT, fusible=True)
def grid_sampler_flops(op: TracedOp) -> FlopCount:
    """Each output element is a weighted sum of the taps around an arbitrary grid point (no
    separable passes): a multiply-add per tap, taps^d of them (nearest: a pick, none). The
    weights' own arithmetic, once per grid point for all channels, is not counted."""
    taps = GRID_SAMPLER_TAPS[op.argument("interpolation_mode")]
    spatial = op.args[0].dim() - 2
    return FlopCount(vector=2 * taps**spatial * _numel(op.output) if taps else 0)


@register([aten.col2im], Category.DATA_MOVEMENT, fusible=True)
def col2im_flops(op: TracedOp) -> FlopCount:
    """``col2im`` (``F.fold``) sums the patch columns into the image: one add per column
    element that lands inside it (those on the padding are dropped). Along each axis, block b's
    tap t lands at b·stride − padding + t·dilation."""
    image, kernel, dilation, padding, stride = (op.argument(name) for name in (
        "output_size", "kernel_size", "dilation", "padding", "stride"))
    blocks, landed = 1, 1
    for size, k, d, p, s in zip(image, kernel, dilation, padding, stride, strict=True):
        count = (size + 2 * p - d * (k - 1) - 1) // s + 1
        blocks *= count
        landed *= sum(1 for b in range(count) for t in range(k) if 0 <= b * s - p + t * d < size)
    planes = op.args[0].numel() // (math.prod(kernel) * blocks)
    return FlopCount(vector=planes * landed)
