"""Costs of scaled (quantized) matmuls: ``_scaled_mm`` and its grouped and ``_v2`` spellings.

Their operands are fp8 (e4m3/e5m2) or packed fp4 (``float4_e2m1fn_x2``: two e2m1 values per
byte) with scales beside them: one fp32 per tensor or per row (FP8), one e4m3 per 16 values
(NVFP4, plus an fp32 global scale) or one e8m0 per 32 values (MXFP8, MXFP4). Every tensor is read
as the bytes it is, like any other op's (:func:`costs.tensor_bytes`); the precision that runs the
products is the narrowest the op reads (:func:`precision.op_precision`). What is particular is
the FLOP count: the reduction length of a packed operand is its width times the values per
element, which ``torch.utils.flop_counter`` (shapes only) does not know.

Conversions to and from fp8 (``x.to(torch.float8_e4m3fn)``, ``_to_copy``) are the pointwise
copies :mod:`costs` already prices; fp4 has no conversion op (code packs two 4-bit codes into a
``uint8`` with integer ops, then reinterprets it with ``view(torch.float4_e2m1fn_x2)``, a view).
"""

from __future__ import annotations

import math

import torch

from ..trace.aten_ops import aten
from ..trace.refs import TracedOp
from ._core import Category, FlopCount, MatmulKind, register

#: Values one element of a packed dtype holds; every other dtype holds one.
VALUES_PER_ELEMENT = {torch.float4_e2m1fn_x2: 2}


def reduction_length(left: torch.Tensor) -> int:
    """The values a product sums per output element: the left operand's last dim, unpacked."""
    return left.shape[-1] * VALUES_PER_ELEMENT.get(left.dtype, 1)


def left_operand_name(op: TracedOp) -> str:
    """The schema name of a scaled product's left operand: ``mat1`` where ``self`` is the
    accumulator (``_scaled_addmm``, torch ≥ 2.15: C·β + α·A @ B), else ``self``."""
    return "mat1" if "mat1" in op.argument_names else "self"


@register([aten._scaled_mm, aten._scaled_mm_v2, aten._scaled_addmm, aten._int_mm],
          Category.COMPUTE, fusible=False)
def scaled_mm_flops(op: TracedOp) -> FlopCount:
    """(M, K) @ (K, N) with K counted in values: 2·M·N·K FLOPs (``_int_mm``: int8 operands, an
    int32 product, no scales: the same count in integer ops). The scaling epilogue (one or two
    multiplies per output), the bias and the accumulator are not counted, as ``flop_counter``
    counts ``addmm``."""
    left = op.argument(left_operand_name(op))
    return FlopCount(tensor=2 * op.output.numel() * reduction_length(left), kind=MatmulKind.MATMUL)


@register([aten._scaled_grouped_mm, aten._scaled_grouped_mm_v2], Category.COMPUTE, fusible=False)
def scaled_grouped_mm_flops(op: TracedOp) -> FlopCount:
    """Grouped products: each output element sums K values of its group (2·K FLOPs), except that
    2D×2D splits K itself among the groups, so the G (M, N) outputs sum K values together."""
    left, right = op.argument("self"), op.argument("mat2")
    values = math.prod(op.output.shape)
    if left.dim() == 2 and right.dim() == 2:
        values //= op.output.shape[0]
    return FlopCount(tensor=2 * values * reduction_length(left), kind=MatmulKind.MATMUL)
