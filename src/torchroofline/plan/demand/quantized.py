"""Demand rules of scaled (quantized) matmuls: ``_scaled_mm``, ``_scaled_mm_v2`` and
``_scaled_addmm``.

out[i, j] needs row i of A, column j of B and the scales of both: 2·K FLOPs (K counted in
values, two per ``float4_e2m1fn_x2`` byte). A scale that broadcasts over the output (per tensor,
per row of A, per column of B) needs the rows or columns the output needs; a block scale (e4m3
per 16 values, e8m0 per 32) needs at least ⌈K / block⌉ scales per needed row or column, whose
positions in the swizzled layout are not modelled (counted, not placed). The grouped products
keep the default rule (all inputs for a whole output, a share of the FLOPs otherwise): which
group a row belongs to is in ``offs``, data the trace does not have.
"""

from __future__ import annotations

import math

import torch

from ...costs import FlopCount, MatmulKind, aten
from ...costs.quantized import left_operand_name, reduction_length
from ...trace.refs import TensorRef, TracedOp
from ...trace.regions import NOWHERE, Region
from ._core import Demand, _broadcast, _Context, _proportional, demand_rule

#: Values one block scale covers, by the scale's dtype: NVFP4's e4m3 scales cover 16 values,
#: the OCP MX formats' e8m0 scales 32 (OCP Microscaling Formats v1.0, §5; NVIDIA's NVFP4).
SCALE_BLOCK_VALUES = {"float8_e4m3fn": 16, "float8_e8m0fnu": 32}

#: The operand each scale argument scales: its rows (A) or columns (B) follow the output's.
_SCALED_AXIS = {"scale_a": 0, "scale_b": 1}


def _argument_names(op: TracedOp) -> list[str]:
    """The schema name of each tensor ``op`` reads, in the order of its reads (positional
    arguments, then keywords; a list argument names each of its tensors)."""
    names = [argument.name for argument in op.func._schema.arguments]
    passed = [*zip(names, op.args, strict=False), *op.kwargs.items()]
    roles = []
    for name, value in passed:
        values = value if isinstance(value, (list, tuple)) else [value]
        roles += [name for item in values if isinstance(item, torch.Tensor)]
    return roles


def _lines(region: Region, axis: int, other_size: int) -> Region:
    """The output rows (axis 0) or columns (axis 1) ``region`` touches, as a 1-D region."""
    return Region.of([(box[axis],) for box in region.boxes], -(-region.opaque // other_size))


def _scale_demand(
    ref: TensorRef, axis: int, region: Region, out_shape: tuple[int, ...], values: int
) -> Region:
    broadcast = _broadcast(region, out_shape, ref.shape)
    if broadcast is not None:
        return broadcast
    block = SCALE_BLOCK_VALUES.get(ref.dtype)
    if block is None:
        return NOWHERE  # a layout not modelled: charge nothing rather than too much
    lines = _lines(region, axis, out_shape[1 - axis]).count
    return Region(opaque=min(lines * -(-values // block), ref.elements))


@demand_rule([aten._scaled_mm, aten._scaled_mm_v2, aten._scaled_addmm])
def scaled_mm_demand(context: _Context) -> Demand:
    """out[i, j] of a scaled matmul needs row i of A, column j of B and their scales: a
    broadcast scale at the rows or columns the output needs, a block scale (e4m3 per 16 values,
    e8m0 per 32) ⌈K / block⌉ per needed line; 2·K FLOPs per demanded element (K in values)."""
    op = context.op
    region = context.output
    out_shape = op.writes[0].shape
    roles = _argument_names(op)
    whole = region.count >= math.prod(out_shape)
    if whole or len(roles) != len(op.reads) or any(len(box) != 2 for box in region.boxes):
        return _proportional(context)
    rows, columns = out_shape
    left = left_operand_name(op)
    packed = op.reads[roles.index(left)].shape[1]
    values = reduction_length(op.argument(left))
    every = (range(packed),)
    operand = {
        left: Region.of(
            [(box[0], every) for box in region.boxes], -(-region.opaque // columns) * packed
        ),
        "mat2": Region.of(
            [(every, box[1]) for box in region.boxes], -(-region.opaque // rows) * packed
        ),
    }
    inputs = []
    for role, ref in zip(roles, op.reads, strict=True):
        if role in operand:
            inputs.append(operand[role])
        elif role in _SCALED_AXIS:
            inputs.append(_scale_demand(ref, _SCALED_AXIS[role], region, out_shape, values))
        else:  # bias or accumulator (broadcast over the output), or the global scale_result
            inputs.append(_broadcast(region, out_shape, ref.shape) or NOWHERE)
    tensor = min(2 * values * region.count, context.record.flops.tensor)
    return Demand(tuple(inputs), FlopCount(tensor=tensor, kind=MatmulKind.MATMUL))
