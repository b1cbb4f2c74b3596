"""Rules of the matrix products: GEMMs (flop_counter's formulas), matrix-vector and dot products,
contractions, distances and recurrent networks."""

from __future__ import annotations

import functools
import math

import torch
from torch._ops import OpOverload, OpOverloadPacket
from torch.utils.flop_counter import flop_registry

from ..trace.aten_ops import aten
from ..trace.refs import TracedOp
from ._core import (
    INTERCEPTED_KEYS,
    Category,
    FlopCount,
    FlopFormula,
    MatmulKind,
    _arguments_key,
    _numel,
    register,
)

# --- Compute: matmul-class library kernels, FLOPs from torch.utils.flop_counter --------------


#: (overload, argument layouts) → FLOPs from :data:`flop_registry`; emptied when full. The
#: formulas see shapes only, and a deep model repeats a few matmul shapes thousands of times,
#: each costing a pytree walk of its arguments
_FLOP_COUNTS: dict[tuple, int] = {}
_FLOP_COUNTS_LIMIT = 4096


def _flop_counter_formula(kind: MatmulKind) -> FlopFormula:
    def formula(op: TracedOp) -> FlopCount:
        key = (op.func, _arguments_key(op))
        count = _FLOP_COUNTS.get(key)
        if count is None:
            if len(_FLOP_COUNTS) >= _FLOP_COUNTS_LIMIT:
                _FLOP_COUNTS.clear()
            formula = flop_registry[_functional_packet(op.func)]
            count = _FLOP_COUNTS[key] = complex_factor(op) * int(
                formula(*op.args, **op.kwargs, out_val=op.output)
            )
        return FlopCount(tensor=count, kind=kind)

    return formula


@functools.cache
def _functional_packet(func: OpOverload) -> OpOverloadPacket:
    """The packet flop_counter keys ``func``'s formula by: the functional one of an in-place
    overload (``addmm_`` → ``addmm``), whose FLOPs it shares."""
    packet = func.overloadpacket
    return getattr(torch.ops.aten, packet.__name__.removesuffix("_")) if packet not in \
        flop_registry else packet


#: Real products per complex product in a matrix product of complex operands, at least: Gauss's
#: 3M method forms A·B from three real products, Ar·Br, Ai·Bi and (Ar + Ai)·(Br + Bi) (real part:
#: the first less the second; imaginary part: the third less both), where the direct method takes
#: four. Its extra additions are one per operand or output element, not counted (as the bias of
#: addmm is not). flop_counter's formulas count real products.
COMPLEX_PRODUCT_FACTOR = 3


def complex_factor(op: TracedOp) -> int:
    """:data:`COMPLEX_PRODUCT_FACTOR` for a product of complex operands, else 1."""
    return COMPLEX_PRODUCT_FACTOR if any(t.is_complex() for t in op.argument_tensors) else 1


# (scaled, quantized matmuls: costs/quantized.py)
register([aten.mm, aten.addmm, aten.bmm, aten.baddbmm], Category.COMPUTE, fusible=False)(
    _flop_counter_formula(MatmulKind.MATMUL)
)


@register([aten.mv, aten.addmv, aten.dot, aten.vdot], Category.COMPUTE, fusible=False)
def vector_product_flops(op: TracedOp) -> FlopCount:
    """Matrix-vector and dot products: 2 FLOPs per multiply-add, one per element of the largest
    operand (:func:`complex_factor` times that for complex operands)."""
    largest = max(a.numel() for a in op.args if isinstance(a, torch.Tensor))
    return FlopCount(tensor=2 * largest * complex_factor(op), kind=MatmulKind.MATMUL)


# torch.outer and torch.ger decompose into mul before the trace sees them (pointwise)
@register([aten.addr], Category.COMPUTE, fusible=False)
def outer_product_flops(op: TracedOp) -> FlopCount:
    """``addr(M, u, v) = β·M + α·u ⊗ v``: one multiply per output element."""
    return FlopCount(tensor=_numel(op.output), kind=MatmulKind.MATMUL)


@register([aten.addbmm], Category.COMPUTE, fusible=False)
def addbmm_flops(op: TracedOp) -> FlopCount:
    """``addbmm(c, A, B) = β·c + α·Σ_b A[b] @ B[b]`` with A (b, n, m), B (b, m, p): the batch sum
    is one GEMM over the concatenated inner dimension, b·n·m·p multiply-adds = 2·b·n·m·p FLOPs
    (the bias add is not counted, as flop_counter's addmm does not)."""
    batch, rows, inner = op.args[1].shape
    products = batch * rows * inner * op.args[2].shape[-1] * complex_factor(op)
    return FlopCount(tensor=2 * products, kind=MatmulKind.MATMUL)


@register([aten._trilinear], Category.COMPUTE, fusible=False)
def trilinear_flops(op: TracedOp) -> FlopCount:
    """``_trilinear(i1, i2, i3, expand1, expand2, expand3, sumdim)`` (``nn.Bilinear``): the sum over
    ``sumdim`` of the product of three tensors, each unsqueezed at its ``expand`` dims. The
    cheapest standard evaluation contracts two of them first, then the third (as einsum path
    optimisers do); charged is the cheapest of the three orders. A pairwise step costs 2 FLOPs
    per element of the joint index space where it sums a dimension away, 1 where it only
    multiplies. For ``nn.Bilinear`` (x1 (N, a), W (o, a, b), x2 (N, b)) the cheapest order is the
    outer product x1 ⊗ x2 (N·a·b) then the weight contraction (2·N·o·a·b)."""
    tensors = op.args[:3]
    expands = op.args[3:6]
    summed = set(op.args[6])
    rank = tensors[0].dim() + len(expands[0])
    dims, size = [], {}
    for tensor, expand in zip(tensors, expands, strict=True):
        present = [d for d in range(rank) if d not in expand]
        size.update(zip(present, tensor.shape, strict=True))
        dims.append(set(present))
    kept = set(range(rank)) - summed

    def step(left: set[int], right: set[int], later: set[int]) -> tuple[int, set[int]]:
        joint = left | right
        result = {d for d in joint if d in later or d in kept}
        per_element = 2 if joint - result else 1
        return per_element * math.prod(size[d] for d in joint), result

    costs = []
    for first, second, third in ((0, 1, 2), (0, 2, 1), (1, 2, 0)):
        pair_flops, pair = step(dims[first], dims[second], dims[third])
        last_flops, _ = step(pair, dims[third], set())
        costs.append(pair_flops + last_flops)
    return FlopCount(tensor=min(costs), kind=MatmulKind.MATMUL)


def _distance_flops(pairs: int, coordinates: int, p: float) -> FlopCount:
    """Distances between ``pairs`` pairs of points with ``coordinates`` each. p = 2 has a
    matrix-product form, ‖x‖² + ‖y‖² − 2·x·y (torch.cdist's ``use_mm_for_euclid_dist``): 2 FLOPs
    per coordinate of each pair on the matmul unit, then two adds and a square root per pair.
    Other p: a difference, an absolute value (or power) and an accumulate per coordinate."""
    if p == 2:
        return FlopCount(tensor=2 * pairs * coordinates, vector=3 * pairs, kind=MatmulKind.MATMUL)
    return FlopCount(vector=3 * pairs * coordinates)


@register([aten._cdist_forward, aten._euclidean_dist], Category.COMPUTE, fusible=False)
def cdist_flops(op: TracedOp) -> FlopCount:
    """``cdist(x1 (…, P, M), x2 (…, R, M))``: all P·R pairs per batch (``_euclidean_dist`` is
    its p = 2 matrix-product path)."""
    p = op.argument("p")  # _euclidean_dist takes none
    return _distance_flops(_numel(op.output), op.args[0].shape[-1], 2.0 if p is None else p)


@register([aten._pdist_forward], Category.COMPUTE, fusible=False)
def pdist_flops(op: TracedOp) -> FlopCount:
    """``pdist(x (N, M))``: the N·(N − 1)/2 pairs of distinct rows, one output each."""
    p = op.argument("p")
    return _distance_flops(_numel(op.output), op.args[0].shape[-1], 2.0 if p is None else p)


#: Pointwise FLOPs per hidden unit per step of each recurrent cell, after the two GEMMs:
#: adds combining input and recurrent projections (one per gate) plus the cell math.
RNN_CELL_FLOPS = {
    "lstm": 4 + 3 * 3 + 2 + 3 + 1,  # 3 sigmoids, 2 tanh, c = f·c + i·g, h = o·tanh(c)
    "gru": 3 + 2 * 3 + 3 + 4,  # 2 sigmoids, n = tanh(xn + r·hn), h = (1 − z)·n + z·h
    "rnn_tanh": 1 + 1,
    "rnn_relu": 1 + 1,
}


#: Gates per hidden unit of each recurrent cell: the rows of its input weight are gates × hidden.
RNN_GATES = {"lstm": 4, "gru": 3, "rnn_tanh": 1, "rnn_relu": 1}


@register([INTERCEPTED_KEYS[cell] for cell in RNN_CELL_FLOPS], Category.COMPUTE, fusible=False)
def rnn_flops(op: TracedOp) -> FlopCount:
    """A cuDNN RNN: per layer and direction one input GEMM over all steps, one recurrent GEMM
    and the gate math per step. Launches: one input GEMM plus one step kernel per time step.
    ``op.args`` are the ``torch._VF`` call's: input, state, flat weights, has_biases,
    num_layers, dropout, train, bidirectional, batch_first."""
    input_, _state, weights, _biases, num_layers, _dropout, _train, bidirectional, batch_first = (
        op.args
    )
    layers_and_directions = num_layers * (2 if bidirectional else 1)
    per_layer = len(weights) // layers_and_directions  # w_ih, w_hh[, b_ih, b_hh][, w_hr]
    time_dim = 1 if batch_first and input_.dim() == 3 else 0
    steps = input_.shape[time_dim]
    batch = input_.numel() // (steps * input_.shape[-1])
    tensor = 0
    for index in range(0, len(weights), per_layer):
        w_ih, w_hh = weights[index : index + 2]
        tensor += 2 * steps * batch * (w_ih.numel() + w_hh.numel())
        if per_layer in (3, 5):  # LSTM projection weight w_hr: (proj, hidden)
            tensor += 2 * steps * batch * weights[index + per_layer - 1].numel()
    hidden = weights[0].shape[0] // RNN_GATES[op.base]
    vector = layers_and_directions * steps * batch * hidden * RNN_CELL_FLOPS[op.base]
    return FlopCount(
        tensor=tensor,
        vector=vector,
        kind=MatmulKind.RNN,
        launches=layers_and_directions * (1 + steps),
    )


def _fused_cell_flops(cell: str) -> FlopFormula:
    """A fused recurrent cell (``nn.LSTMCell``/``nn.GRUCell`` on CUDA: the two GEMMs are separate
    ``mm`` ops, then one kernel does the gate math): :data:`RNN_CELL_FLOPS` per hidden unit of
    the ``cx``/``hx`` argument, plus an add per gate pre-activation for each bias passed."""

    def formula(op: TracedOp) -> FlopCount:
        input_gates, _, state, *biases = op.args
        bias_adds = sum(b is not None for b in biases) * input_gates.numel()
        return FlopCount(vector=state.numel() * RNN_CELL_FLOPS[cell] + bias_adds)

    return formula


register([aten._thnn_fused_lstm_cell], Category.POINTWISE, fusible=False)(_fused_cell_flops("lstm"))
register([aten._thnn_fused_gru_cell], Category.POINTWISE, fusible=False)(_fused_cell_flops("gru"))
