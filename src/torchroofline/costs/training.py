"""Cost rules of the ops a training step adds (:mod:`torchroofline.training`): autograd's
backward kernels and the optimizers' multi-tensor (``_foreach_*``) and fused kernels.

Pointwise backward ops PyTorch tags pointwise (``gelu_backward``, ``threshold_backward``,
``sigmoid_backward``, ...) already take the tagged-pointwise rule of :mod:`costs`. FLOPs of
matmul-class backward kernels reuse ``torch.utils.flop_counter``'s registered formulas.
"""

from __future__ import annotations

import dataclasses
import math

import torch
from torch.utils.flop_counter import sdpa_backward_flop_count

from ..trace.aten_ops import aten
from ..trace.refs import TracedOp
from . import (
    NO_FLOPS,
    Category,
    FlopCount,
    MatmulKind,
    _as_4d,
    _causal_kept,
    _flop_counter_formula,
    _numel,
    register,
    rnn_flops,
)

register([aten.convolution_backward], Category.COMPUTE, fusible=False)(
    _flop_counter_formula(MatmulKind.CONV)
)


@register([aten._scaled_dot_product_flash_attention_backward,
           aten._scaled_dot_product_efficient_attention_backward],
          Category.COMPUTE, fusible=False)
def attention_backward_flops(op: TracedOp) -> FlopCount:
    """dV = Pᵀ·dO, dP = dO·Vᵀ, dQ = dS·K, dK = dSᵀ·Q and the recomputed S = Q·Kᵀ: 2.5× the
    forward's two matmuls (flop_counter's ``sdpa_backward_flop_count``); with ``is_causal``
    only the unmasked score blocks."""
    grad_output, query, key, value = (_as_4d(t.shape) for t in op.args[:4])
    flops = sdpa_backward_flop_count(grad_output, query, key, value)
    if op.argument("is_causal"):
        query_len, key_len = query[2], key[2]
        flops = flops * _causal_kept(query_len, key_len) // (query_len * key_len)
    return FlopCount(tensor=int(flops), kind=MatmulKind.ATTENTION)


@register([aten._cudnn_rnn_backward], Category.COMPUTE, fusible=False)
def rnn_backward_flops(op: TracedOp) -> FlopCount:
    """cuDNN's RNN backward: per layer and direction the data-gradient GEMMs (as many as the
    forward's) and the weight-gradient GEMMs (as many again), the gate derivatives (counted as
    the forward's gate math) and a launch per step for each pass; the recorded arguments are
    the forward call's (:func:`rnn_flops`), the cell in ``kwargs["cell"]``."""
    forward = rnn_flops(dataclasses.replace(op, base=op.kwargs["cell"]))
    return dataclasses.replace(forward, tensor=2 * forward.tensor, launches=2 * forward.launches)


#: Vector FLOPs per input element of the normalisation backward kernels: dx̂ = dy·γ (1), the
#: two row reductions Σdx̂ and Σdx̂·x̂ (3), dx = (dx̂ − mean(dx̂) − x̂·mean(dx̂·x̂))·rstd (5),
#: and dγ = Σdy·x̂, dβ = Σdy (3).
NORM_BACKWARD_FLOPS_PER_ELEMENT = 12


@register([aten.native_layer_norm_backward, aten.native_batch_norm_backward,
           aten.native_group_norm_backward, aten.cudnn_batch_norm_backward],
          Category.REDUCTION, fusible=True)
def norm_backward_flops(op: TracedOp) -> FlopCount:
    return FlopCount(vector=NORM_BACKWARD_FLOPS_PER_ELEMENT * op.args[0].numel())


@register([aten._softmax_backward_data, aten._log_softmax_backward_data],
          Category.REDUCTION, fusible=True)
def softmax_backward_flops(op: TracedOp) -> FlopCount:
    """dx = y·(dy − Σdy·y): a multiply, a row sum, a subtract and a multiply per element
    (log-softmax: dy − exp(y)·Σdy, the same count)."""
    return FlopCount(vector=4 * op.args[0].numel())


@register([aten.embedding_dense_backward], Category.DATA_MOVEMENT, fusible=False)
def embedding_backward_flops(op: TracedOp) -> FlopCount:
    """Each gradient row is added into the weight row its index picks: one add per element."""
    return FlopCount(vector=op.args[0].numel())


# --- Optimizers: multi-tensor apply and fused kernels --------------------------------------

#: Tensors one multi-tensor-apply launch takes, by how many lists the kernel walks (depth), and
#: its most blocks of 65,536-element chunks (aten/src/ATen/native/cuda/MultiTensorApply.cuh:
#: ``depth_to_max_tensors``, ``depth_to_max_blocks``, ``kChunkSize``).
MAX_TENSORS_PER_LAUNCH = {1: 110, 2: 64, 3: 48, 4: 36, 5: 30}
MAX_BLOCKS_PER_LAUNCH = {1: 320, 2: 320, 3: 320, 4: 36, 5: 30}
CHUNK_ELEMENTS = 65536


def multi_tensor_launches(tensor_lists: list[list[torch.Tensor]]) -> int:
    """Launches of one multi-tensor-apply call: a new launch when the tensors or the chunk
    blocks of the current one are full."""
    depth = min(max(len(tensor_lists), 1), 5)
    tensors = len(tensor_lists[0]) if tensor_lists else 0
    chunks = sum(math.ceil(t.numel() / CHUNK_ELEMENTS) for t in tensor_lists[0]) if tensors else 0
    return max(1, math.ceil(tensors / MAX_TENSORS_PER_LAUNCH[depth]),
               math.ceil(chunks / MAX_BLOCKS_PER_LAUNCH[depth]))


def _tensor_lists(op: TracedOp) -> list[list[torch.Tensor]]:
    return [list(arg) for arg in op.args
            if isinstance(arg, (list, tuple)) and arg and isinstance(arg[0], torch.Tensor)]


def _foreach(flops_per_element: int):  # noqa: ANN202
    def formula(op: TracedOp) -> FlopCount:
        lists = _tensor_lists(op)
        elements = sum(t.numel() for t in lists[0]) if lists else _numel(op.output)
        return FlopCount(vector=flops_per_element * elements,
                         launches=multi_tensor_launches(lists))

    return formula


#: Vector FLOPs per element of each ``_foreach_*`` op (its in-place twin shares it).
FOREACH_FLOPS_PER_ELEMENT = {
    aten._foreach_add: 1, aten._foreach_sub: 1, aten._foreach_mul: 1, aten._foreach_div: 1,
    aten._foreach_neg: 1, aten._foreach_sqrt: 1, aten._foreach_rsqrt: 1, aten._foreach_abs: 1,
    aten._foreach_exp: 1, aten._foreach_sign: 1, aten._foreach_reciprocal: 1,
    aten._foreach_clamp_min: 1, aten._foreach_clamp_max: 1, aten._foreach_maximum: 1,
    aten._foreach_minimum: 1, aten._foreach_zero: 0, aten._foreach_copy: 0,
    aten._foreach_pow: 1,
    aten._foreach_lerp: 3,  # a + w·(b − a)
    aten._foreach_addcmul: 3, aten._foreach_addcdiv: 3,  # a + s·b·c, a + s·b/c
}
for _packet, _flops in FOREACH_FLOPS_PER_ELEMENT.items():
    register([_packet], Category.POINTWISE, fusible=False)(_foreach(_flops))

register([aten._foreach_norm], Category.REDUCTION, fusible=False)(_foreach(2))

#: Vector FLOPs per parameter element of the fused optimizer kernels: Adam(W) decays the
#: weight (2), updates m (3) and v (4), bias-corrects and takes √v + ε (3) and steps (2);
#: SGD with momentum updates the buffer (2) and steps (2).
FUSED_OPTIMIZER_FLOPS_PER_ELEMENT = {aten._fused_adamw: 14, aten._fused_adam: 14,
                                      aten._fused_sgd: 4, aten._fused_adagrad: 8}
for _packet, _flops in FUSED_OPTIMIZER_FLOPS_PER_ELEMENT.items():
    register([_packet], Category.POINTWISE, fusible=False)(_foreach(_flops))


@register([aten.slice_backward, aten.select_backward, aten.diagonal_backward,
           aten.unfold_backward, aten.as_strided_backward],
          Category.DATA_MOVEMENT, fusible=True)
def view_backward_flops(op: TracedOp) -> FlopCount:
    """The gradient of a view: zeros of the base's shape with the view's gradient stored into
    them (no arithmetic; Inductor writes it as one pointwise kernel)."""
    return NO_FLOPS
