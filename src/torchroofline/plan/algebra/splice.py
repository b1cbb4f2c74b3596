"""Splicing a :class:`~._core.Match` into the traced program: its replacement is traced as the
model was (on meta tensors, no data), its values renamed into the program's, and the ops it
makes dead removed. The result is a program like any traced one, which the demand walk and the
pricing take as they take the program as written."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import torch
from torch import nn

from ...costs import MatmulKind, OpRecord, cost_trace
from ...errors import TorchrooflineError
from ...trace.refs import TensorRef, Trace, TracedOp
from ...trace.tracer import trace_model
from ._core import Graph, Match, meta_like
from .shared import onto_equal


@dataclass(frozen=True)
class Rewrite:
    """One shortcut applied: the identity's name, the module and op it is named by, the ops of
    the traced program it replaces (indices into ``Trace.ops``) and the ops that replace them
    (indices into the rewritten program's ops)."""

    rule: str
    module: str
    op: str
    removed: tuple[int, ...]
    inserted: tuple[int, ...]


@dataclass(frozen=True)
class Rewritten:
    """The cheapest program found: its trace, its costed ops and the rewrites that made it."""

    trace: Trace
    ops: tuple[OpRecord, ...]
    rewrites: tuple[Rewrite, ...]
    #: per op of ``trace``, the index of the op of the program before the rewrites it is
    #: (None: an op a rewrite inserted)
    sources: tuple[int | None, ...] = ()


class _Replacement(nn.Module):
    def __init__(self, build: Callable[..., torch.Tensor]) -> None:
        super().__init__()
        self.build = build

    def forward(self, *inputs: torch.Tensor) -> torch.Tensor:
        return self.build(*inputs)


@dataclass
class _Names:
    """Fresh value and storage ids for the values a replacement makes (storages negative: the
    trace's own ids are addresses)."""

    values: itertools.count
    storages: itertools.count

    @classmethod
    def after(cls, trace: Trace) -> _Names:
        refs = [r for op in trace.ops for r in (*op.reads, *op.writes)]
        last = max((r.value_id for r in refs), default=0)
        # below the storages an earlier round of rewrites made (negative too)
        lowest = min((r.storage_id for r in refs), default=0)
        return cls(itertools.count(last + 1), itertools.count(1 - min(lowest, 0)))


def _recorded(match: Match, graph: Graph, names: _Names) -> tuple[TracedOp, ...] | None:
    """The replacement's ops with its values renamed: an input as the program holds it, the
    result as the value ``root`` wrote, the rest fresh. None where the replacement's result
    does not fill ``root``'s output as it is laid out (the rule then does not apply)."""
    root = graph.op(match.root)
    target = root.writes[0]
    try:
        sub = trace_model(_Replacement(match.build), tuple(meta_like(r) for r in match.inputs))
    except TorchrooflineError:  # a replacement torch cannot trace here: the rule does not apply
        return None
    if len(sub.output_refs) != 1:
        return None
    result = sub.output_refs[0]
    if result.shape != target.shape or result.strides != target.strides or (
        result.storage_elements != target.storage_elements
    ):
        return None
    values: dict[int, int] = {}  # sub value → program value
    storages: dict[int, tuple[int, int, int]] = {}  # sub storage → (storage, offset, size)
    resident = {ref.value_id: ref for _, ref in sub.resident}
    for sub_value, ref in zip(sub.argument_value_ids, match.inputs, strict=True):
        if sub_value in resident:
            storages[resident[sub_value].storage_id] = (
                ref.storage_id, ref.offset, ref.storage_elements
            )
            values[sub_value] = ref.value_id
    if result.storage_id in storages:  # the result is an input: no replacement
        return None
    storages[result.storage_id] = (target.storage_id, target.offset, target.storage_elements)
    values[result.value_id] = target.value_id

    def renamed(ref: TensorRef) -> TensorRef:
        if ref.storage_id not in storages:
            storages[ref.storage_id] = (-next(names.storages), 0, ref.storage_elements)
        if ref.value_id not in values:
            values[ref.value_id] = next(names.values)
        storage, offset, size = storages[ref.storage_id]
        return replace(ref, value_id=values[ref.value_id], storage_id=storage,
                       offset=ref.offset + offset, storage_elements=size)

    return tuple(
        replace(op, reads=tuple(map(renamed, op.reads)), writes=tuple(map(renamed, op.writes)),
                module_path=graph.op(match.anchor).module_path)
        for op in sub.ops
    )


def _aliased(match: Match, graph: Graph) -> Callable[[TensorRef], TensorRef]:
    """Reads of ``root``'s output renamed to the equal value ``inputs[0]`` (a common
    subexpression computed once; :func:`.shared.onto_equal` maps each view)."""
    target = graph.op(match.root).writes[0]
    same = match.inputs[0]

    def renamed(ref: TensorRef) -> TensorRef:
        if ref.value_id != target.value_id:
            return ref
        return onto_equal(ref, target, same) or ref

    return renamed


def spliced(trace: Trace, records: Sequence[OpRecord], matches: Sequence[Match],
            graph: Graph) -> Rewritten:
    """``trace`` with every match that overlaps no earlier one applied (see module doc)."""
    names = _Names.after(trace)
    removed: set[int] = set()
    inserted: dict[int, tuple[TracedOp, ...]] = {}
    applied: list[tuple[Match, tuple[int, ...]]] = []
    renames: list[Callable[[TensorRef], TensorRef]] = []
    needed: set[int] = set()  # values the applied replacements read
    for match in matches:
        gone = graph.feeders(match.root, match.inputs)
        made = {w.value_id for i in gone for w in trace.ops[i].writes}
        if gone & removed or made & needed or any(
            graph.producers.get(ref.value_id) in removed for ref in match.inputs
        ):
            continue
        if match.build is None:
            renames.append(_aliased(match, graph))
            ops: tuple[TracedOp, ...] = ()
        else:
            recorded = _recorded(match, graph, names)
            if recorded is None:
                continue
            ops = recorded
        removed |= gone
        needed |= {ref.value_id for ref in match.inputs}
        inserted[match.root] = ops
        applied.append((match, tuple(sorted(gone))))
    if not applied:
        return Rewritten(trace, tuple(records), (), tuple(range(len(trace.ops))))
    new_ops: list[TracedOp] = []
    sources: list[int | None] = []
    positions: dict[int, tuple[int, ...]] = {}
    kept_records: list[OpRecord | None] = []
    dead = {w.value_id for i in removed for w in trace.ops[i].writes}
    for index, op in enumerate(trace.ops):
        if index in inserted:
            start = len(new_ops)
            new_ops.extend(inserted[index])
            sources.extend([None] * len(inserted[index]))
            kept_records.extend([None] * len(inserted[index]))
            positions[index] = tuple(range(start, len(new_ops)))
        if index in removed or (op.is_view and all(r.value_id in dead for r in op.reads)):
            continue
        renamed = _renamed_op(op, renames)
        new_ops.append(renamed)
        sources.append(index)
        kept_records.append(records[index] if renamed is op else None)
    output_refs = tuple(_renamed(ref, renames) for ref in trace.output_refs)
    rewritten = replace(trace, ops=tuple(new_ops), output_refs=output_refs)
    fresh = [op for op, record in zip(new_ops, kept_records, strict=True) if record is None]
    costed = iter(cost_trace(replace(trace, ops=tuple(fresh))))
    new_records = tuple(
        _as_either(replace(record or next(costed), index=index), source is None)
        if (record is None or record.index != index) else record
        for index, (record, source) in enumerate(zip(kept_records, sources, strict=True))
    )
    rewrites = tuple(
        Rewrite(match.rule, graph.op(match.anchor).module_path, graph.op(match.anchor).name,
                gone, positions[match.root])
        for match, gone in applied
    )
    return Rewritten(rewritten, new_records, rewrites, tuple(sources))


def _as_either(record: OpRecord, inserted: bool) -> OpRecord:
    """A convolution a replacement makes (a product a convolution of the program contracted,
    pooled first: :func:`.contraction._convolved`) may run as the convolution, under its
    precision (TF32 by PyTorch's default), or as the product it is, in IEEE fp32 on the CUDA
    cores: either computes it, and the pricing takes the better placement in the program."""
    if not inserted or record.flops.kind is not MatmulKind.CONV:
        return record
    return replace(record, flops=replace(record.flops, alternative=MatmulKind.MATMUL))


def _renamed(ref: TensorRef, renames: Sequence[Callable[[TensorRef], TensorRef]]) -> TensorRef:
    for rename in renames:
        ref = rename(ref)
    return ref


def _renamed_op(op: TracedOp, renames: Sequence[Callable[[TensorRef], TensorRef]]) -> TracedOp:
    if not renames:
        return op
    reads = tuple(_renamed(ref, renames) for ref in op.reads)
    return op if reads == op.reads else replace(op, reads=reads)
