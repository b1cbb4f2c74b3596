"""Stage 2, costs: a :class:`~torchroofline.trace.tracer.Trace` in, one :class:`OpRecord` per op
out — its category, FLOPs, which unit runs them, bytes.

One registry maps aten ops to a :class:`CostRule`, keyed as ``torch.utils.flop_counter`` keys its
formulas: by overload packet (``aten.add``: every overload and the ``out=`` spellings; the in-place
packet ``aten.add_`` shares the rule), or by single overload where overloads of one packet mean
different things (``aten.max.dim`` reduces, ``aten.max.other`` is element-wise). Registering a key
twice is an error. Adding an op is adding one entry next to its relatives. Matmul-class FLOPs
reuse ``torch.utils.flop_counter``'s registered formulas, and every formula can be called on
shapes alone (:func:`flops_on_shapes`).

FLOPs never depend on precision; a multiply-add is 2 FLOPs. Bytes do: floating-point tensors
take the target precision's element size, integer and bool tensors keep their own.
"""

from __future__ import annotations

from ..trace.aten_ops import aten

# each rule module enters its rules into the shared registry (_core) on import
from . import (  # noqa: F401
    attention,
    collectives,
    fft,
    layout,
    linalg,
    matmul,
    pointwise,
    quantized,
    reductions,
    selection,
    training,
    windows,
)
from ._core import (
    _RULES,
    FLOAT_ELEMENT_BYTES,
    INTERCEPTED_KEYS,
    NO_FLOPS,
    NO_RULE,
    SHAPE_ONLY_TEMPLATES,
    Category,
    Cost,
    CostRule,
    FlopCount,
    FlopFormula,
    MatmulKind,
    NoArithmetic,
    OpKey,
    OpRecord,
    add_rules,
    float_element_bytes,
    flops_on_shapes,
    lookup,
    op_keys,
    register,
    registered_ops,
    rule_for,
    tensor_bytes,
    total_cost,
)
from .attention import kept_pairs
from .coverage import RuleCoverage, bytes_only_ops, rule_coverage
from .layout import VIEW_COPIES
from .matmul import COMPLEX_PRODUCT_FACTOR, complex_factor
from .pointwise import POINTWISE_FLOPS_PER_ELEMENT
from .reductions import REDUCTION_FLOPS_PER_INPUT_ELEMENT
from .selection import (
    DESTINATION_ACCESS,
    INDEXED_POSITIONS,
    DestinationAccess,
    gathered_reads,
    in_place_accesses,
    indexed_positions,
)
from .walk import UNSUPPORTED_RULE, cost_trace

__all__ = [
    "COMPLEX_PRODUCT_FACTOR",
    "DESTINATION_ACCESS",
    "FLOAT_ELEMENT_BYTES",
    "INDEXED_POSITIONS",
    "INTERCEPTED_KEYS",
    "NO_FLOPS",
    "NO_RULE",
    "POINTWISE_FLOPS_PER_ELEMENT",
    "REDUCTION_FLOPS_PER_INPUT_ELEMENT",
    "SHAPE_ONLY_TEMPLATES",
    "UNSUPPORTED_RULE",
    "VIEW_COPIES",
    "_RULES",
    "Category",
    "Cost",
    "CostRule",
    "DestinationAccess",
    "FlopCount",
    "FlopFormula",
    "MatmulKind",
    "NoArithmetic",
    "OpKey",
    "OpRecord",
    "RuleCoverage",
    "add_rules",
    "aten",
    "bytes_only_ops",
    "complex_factor",
    "cost_trace",
    "float_element_bytes",
    "flops_on_shapes",
    "gathered_reads",
    "in_place_accesses",
    "indexed_positions",
    "kept_pairs",
    "lookup",
    "op_keys",
    "register",
    "registered_ops",
    "rule_coverage",
    "rule_for",
    "tensor_bytes",
    "total_cost",
]
