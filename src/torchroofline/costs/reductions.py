"""Rules of the reductions, losses and normalisations: FLOPs per input element."""

from __future__ import annotations

from dataclasses import replace

from ..trace.aten_ops import aten
from ..trace.refs import TensorRef, TracedOp
from ._core import (
    Category,
    FlopCount,
    OpKey,
    _input_numel,
    _numel,
    _per_input_element,
    register,
)

# --- Reductions: 1 FLOP per input element plus documented extras ------------------------------

REDUCTION_FLOPS_PER_INPUT_ELEMENT: dict[OpKey, int] = {
    aten.sum: 1, aten.prod: 1, aten.amax: 1, aten.amin: 1, aten.argmax: 1, aten.argmin: 1,
    # by overload: max.other/min.other are element-wise (the pointwise tag's rule covers them)
    aten.max.default: 1, aten.max.dim: 1, aten.min.default: 1, aten.min.dim: 1,
    aten.nansum: 2,  # isnan compare, accumulate (the select of 0 is no arithmetic)
    aten.count_nonzero: 2,  # compare, accumulate
    aten.aminmax: 2, aten._aminmax: 2,  # two compares
    aten.any: 1, aten.all: 1, aten.cumsum: 1, aten.cumprod: 1, aten.logcumsumexp: 3, aten.cummax: 1,
    aten.cummin: 1,
    aten._logcumsumexp: 3, aten._cummax_helper: 1, aten._cummin_helper: 1,
    aten.dist: 3,  # sub, abs (or square), accumulate
    aten._weight_norm_interface: 3,  # square and accumulate for ‖v‖, then scale v by g/‖v‖
    aten.multi_margin_loss: 4, aten.multilabel_margin_loss_forward: 4,  # sub, add, max, accumulate
    aten.native_norm: 2,
    aten.mean: 1,  # sum, then one divide per output (folded into the element count: negligible)
    aten.var: 3, aten.std: 3, aten.var_mean: 3, aten.std_mean: 3,  # sub mean, square, accumulate
    aten._softmax: 5, aten.softmax: 5, aten._safe_softmax: 5,  # max, sub, exp, sum, div
    aten._masked_softmax: 5,
    aten._log_softmax: 5, aten.log_softmax: 5,  # max, sub, exp, sum, sub (log once per row)
    aten.logsumexp: 4,  # max, sub, exp, sum
    aten.linalg_vector_norm: 2, aten.norm: 2,  # square (or abs), accumulate
    aten.native_layer_norm: 8,  # mean 1 + var 3 + normalise 2 + affine 2
    aten.native_group_norm: 8,
    # eval: scale and shift only (see batch_norm_flops)
    aten._native_batch_norm_legit_no_training: 4,
    # square, sum, rsqrt·mul, affine
    aten.instance_norm: 8, aten._fused_rms_norm: 5, aten.rms_norm: 5,
    aten.mse_loss: 3, aten.l1_loss: 3, aten.smooth_l1_loss: 4, aten.huber_loss: 4,
    aten.soft_margin_loss: 4,
    aten.binary_cross_entropy: 6, aten.binary_cross_entropy_with_logits: 8, aten.kl_div: 3,
    aten.cosine_similarity: 6,
    aten.triplet_margin_loss: 8, aten.margin_ranking_loss: 3, aten.hinge_embedding_loss: 3,
    aten.mode: 1, aten.median: 1, aten.nanmedian: 1, aten.sort: 1, aten.topk: 1, aten.kthvalue: 1,
    aten._adaptive_avg_pool2d: 1, aten._adaptive_avg_pool3d: 1, aten.adaptive_avg_pool1d: 1,
    aten.adaptive_avg_pool2d: 1, aten.adaptive_avg_pool3d: 1,
    aten.adaptive_max_pool2d: 1, aten.adaptive_max_pool3d: 1, aten.adaptive_max_pool1d: 1,
}

for _name, _flops in REDUCTION_FLOPS_PER_INPUT_ELEMENT.items():
    register([_name], Category.REDUCTION, fusible=True)(_per_input_element(_flops))


def _picked_by_target(op: TracedOp) -> tuple[TensorRef, ...]:
    """NLL loss loads one input element per target (``input[i, target[i]]``), not all N·C."""
    scores, target, *rest = op.reads
    return (replace(scores, elements=min(scores.elements, target.elements)), target, *rest)


@register(
    [aten.nll_loss_forward, aten.nll_loss, aten.nll_loss2d_forward],
    Category.REDUCTION,
    fusible=True,
    reads=_picked_by_target,
)
def nll_loss_flops(op: TracedOp) -> FlopCount:
    """One negate-and-accumulate per target element."""
    return FlopCount(vector=_numel(op.args[1]))


def _diagonal_reads(op: TracedOp) -> tuple[TensorRef, ...]:
    """``trace`` loads the diagonal of its matrix, min(m, n) elements."""
    (matrix,) = op.reads
    return (replace(matrix, elements=min(op.args[0].shape)),)


@register([aten.trace], Category.REDUCTION, fusible=True, reads=_diagonal_reads)
def trace_flops(op: TracedOp) -> FlopCount:
    """One add per diagonal element."""
    return FlopCount(vector=min(op.args[0].shape))


@register(
    [ aten.native_batch_norm, aten._native_batch_norm_legit,
     aten._native_batch_norm_legit_functional,
     aten.cudnn_batch_norm, aten.miopen_batch_norm],
    Category.REDUCTION,
    fusible=True,
)
def batch_norm_flops(op: TracedOp) -> FlopCount:
    """Training: batch statistics then normalise and affine, 8 per element (as layer norm);
    eval (``training=False``): normalise and affine with running statistics, 4 per element."""
    in_training = op.args[5] if len(op.args) > 5 else op.kwargs.get("training", True)
    return FlopCount(vector=(8 if in_training else 4) * _input_numel(op))
