"""Costing a trace: each op's rule applied, its accesses corrected for what an in-place op
loads and stores."""

from __future__ import annotations

import functools

import torch
from torch._ops import OpOverload

from ..trace.refs import Trace, TracedOp
from ._core import (
    NO_RULE,
    Category,
    CostRule,
    OpRecord,
    _arguments_key,
    _numel,
    rule_for,
)
from .selection import in_place_accesses

#: Ops with no rule: conservative default — input and output bytes, no FLOPs, own kernel.
UNSUPPORTED_RULE = CostRule(Category.DATA_MOVEMENT, NO_RULE, fusible=False)


def cost_trace(trace: Trace) -> tuple[OpRecord, ...]:
    """Cost every traced op; ops with no rule get :data:`UNSUPPORTED_RULE` (``has_rule=False``)."""
    return tuple(_cost_op(index, op) for index, op in enumerate(trace.ops))


def _cost_op(index: int, op: TracedOp) -> OpRecord:
    rule = rule_for(op)
    has_rule = rule is not None
    rule = rule or UNSUPPORTED_RULE
    category = Category.ZERO_COPY if op.is_view else rule.category
    reads = rule.reads(op) if rule.reads and op.reads else op.reads
    reads, writes = in_place_accesses(op, reads)
    return OpRecord(
        index=index,
        name=op.name,
        category=category,
        fusible=rule.fusible,
        flops=rule.flops(op),
        reads=reads,
        writes=writes,
        module_path=op.module_path,
        has_rule=has_rule or op.is_view,
        call_key=_call_key(op),
        reduced_dims=_reduced_dims(op) if category is Category.REDUCTION else None,
    )


def _call_key(op: TracedOp) -> tuple:
    """See :attr:`OpRecord.call_key`: FX's CSE pass skips seeded-random and mutating ops."""
    if op.func is None or _cse_skips(op.func):
        return ()
    return (op.name, _arguments_key(op))


@functools.cache
def _cse_skips(func: OpOverload) -> bool:
    return func._schema.is_mutable or torch.Tag.nondeterministic_seeded in func.tags


def _reduced_dims(op: TracedOp) -> tuple[int, ...] | None:
    """The ``dim`` argument (none given: every dim), a layer norm's trailing
    ``normalized_shape`` dims, every dim but the channels of a batch norm in training (none in
    eval: it only scales and shifts), every dim of a full reduction; None otherwise."""
    if op.func is None or not op.reads:
        return None
    rank = len(op.reads[0].shape)
    names = set(op.argument_names)
    if "running_mean" in names:
        training = "training" in names and op.argument("training")
        return tuple(d for d in range(rank) if d != 1) if training else ()
    if "normalized_shape" in names:
        return tuple(range(rank - len(op.argument("normalized_shape")), rank))
    if "dim" not in names:
        return tuple(range(rank)) if _numel(op.output) == 1 else None
    dim = op.argument("dim")
    dims = [dim] if isinstance(dim, int) else list(dim or range(rank))
    return tuple(sorted({d % rank for d in dims})) if rank else ()
