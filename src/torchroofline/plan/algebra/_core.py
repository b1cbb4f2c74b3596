"""What an algebraic rule is: the :class:`Match` it returns, the :class:`Graph` it reads, and
the registry :data:`ALGEBRA_RULES` keyed by the aten op whose output a rule recomputes."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import torch

from ...costs import OpKey, OpRecord, aten, cost_trace, lookup
from ...trace.refs import TensorRef, Trace, TracedOp


@dataclass(frozen=True)
class Match:
    """A cheaper program for the value op ``root`` writes: ``build`` (plain torch code, run on
    meta tensors shaped as ``inputs``) computes it from ``inputs``, which the program holds at
    ``root``. ``build=None``: the value *is* ``inputs[0]`` (a common subexpression). The ops that
    fed only ``root`` go with it. ``anchor`` is the op the shortcut is named by (the linear map
    a sum moved through), ``rule`` the identity's name."""

    rule: str
    root: int
    inputs: tuple[TensorRef, ...]
    build: Callable[..., torch.Tensor] | None
    anchor: int


@dataclass
class Graph:
    """The traced program as rules look at it: who writes and who reads each value."""

    trace: Trace
    #: value id → index of the op that wrote it (views write nothing)
    producers: dict[int, int] = field(default_factory=dict)
    #: value id → indices of the non-view ops that read it
    readers: dict[int, list[int]] = field(default_factory=dict)
    #: storage id → indices of the ops that write it
    writers: dict[int, list[int]] = field(default_factory=dict)
    #: a call's (name, reads, arguments) → the first op that made it (:mod:`.shared`)
    first_call: dict[tuple, int] = field(default_factory=dict)
    #: value id → its storage's elements, for the values known from shapes and constants
    #: (:func:`..demand.known_values`)
    known: Mapping[int, torch.Tensor] = field(default_factory=dict)
    #: the costed ops (:func:`...costs.cost_trace`), costed on first use where not given
    records: Sequence[OpRecord] | None = None
    #: the ops an earlier round of rewrites inserted (already in their cheapest order)
    inserted: frozenset[int] = frozenset()

    @classmethod
    def of(cls, trace: Trace, known: Mapping[int, torch.Tensor] | None = None,
           records: Sequence[OpRecord] | None = None,
           inserted: frozenset[int] = frozenset()) -> Graph:
        graph = cls(trace, known=known or {}, records=records, inserted=inserted)
        for index, op in enumerate(trace.ops):
            if op.is_view:
                continue
            for ref in op.reads:
                graph.readers.setdefault(ref.value_id, []).append(index)
            for ref in op.writes:
                graph.producers[ref.value_id] = index
                graph.writers.setdefault(ref.storage_id, []).append(index)
        return graph

    def op(self, index: int) -> TracedOp:
        return self.trace.ops[index]

    def record(self, index: int) -> OpRecord:
        """Op ``index``'s costs as written."""
        if self.records is None:
            self.records = cost_trace(self.trace)
        return self.records[index]

    def producer(self, ref: TensorRef) -> tuple[int, TracedOp] | None:
        """The op that wrote the value ``ref`` reads, if an op did (not an input)."""
        index = self.producers.get(ref.value_id)
        return None if index is None else (index, self.trace.ops[index])

    def value(self, ref: TensorRef) -> torch.Tensor | None:
        """The value ``ref`` reads, as it reads it, if it is known from shapes and constants."""
        storage = self.known.get(ref.value_id)
        return None if storage is None else storage.as_strided(ref.shape, ref.strides, ref.offset)

    def read_only_by(self, ref: TensorRef, index: int) -> bool:
        """Whether the value ``ref`` reads is read by op ``index`` alone (once) and is no output:
        nothing else needs it, so a rule may compute what ``index`` makes of it another way."""
        return (
            self.readers.get(ref.value_id) == [index]
            and ref.value_id not in self.trace.output_value_ids
            and len(self.writers.get(ref.storage_id, ())) == 1
        )

    def written_between(self, refs: Sequence[TensorRef], first: int, last: int) -> bool:
        """Whether an op after ``first`` and before ``last`` writes a storage one of ``refs``
        reads (an in-place change between the reads a rule would move); the op that makes the
        value a ref reads is none (``relu(e)`` made between two products that read it)."""
        return any(
            first < index < last and index != self.producers.get(ref.value_id)
            for ref in refs
            for index in self.writers.get(ref.storage_id, ())
            if self.trace.ops[index].writes
        )

    def feeders(self, root: int, kept: Sequence[TensorRef]) -> set[int]:
        """``root`` and the ops whose every output only ops of this set read (nor the model
        returns), except the producers of ``kept``: what a replacement of ``root`` makes dead."""
        removed = {root}
        protected = {ref.value_id for ref in kept}
        frontier = [root]
        while frontier:
            op = self.trace.ops[frontier.pop()]
            for ref in op.reads:
                index = self.producers.get(ref.value_id)
                if index is None or index in removed or ref.value_id in protected:
                    continue
                writes = self.trace.ops[index].writes
                if all(
                    w.value_id not in self.trace.output_value_ids
                    and w.value_id not in protected
                    and set(self.readers.get(w.value_id, ())) <= removed
                    for w in writes
                ):
                    removed.add(index)
                    frontier.append(index)
        return removed


Rule = Callable[[Graph, int], "Match | None"]

#: aten op → the rules that may recompute its output another way, in the order tried
ALGEBRA_RULES: dict[OpKey, tuple[Rule, ...]] = {}


def algebra_rule(ops: Sequence[OpKey], first: bool = False) -> Callable[[Rule], Rule]:
    """Decorator: try ``rule`` on every op of ``ops`` (several rules may share an op), before
    the rules registered so far where ``first`` (a general rule ahead of special cases)."""

    def decorate(rule: Rule) -> Rule:
        for op in ops:
            held = ALGEBRA_RULES.get(op, ())
            ALGEBRA_RULES[op] = (rule, *held) if first else (*held, rule)
        return rule

    return decorate


Registered = TypeVar("Registered", bound=Callable[..., Any])


def registers_into(
    table: dict[OpKey, Registered],
) -> Callable[[Sequence[OpKey]], Callable[[Registered], Registered]]:
    """A decorator factory for a table of one rule per aten op: ``@register([aten.a, aten.b])``
    files the rule under each op (the tensor network's steps, the sums' terminals, the linear
    maps a sum commutes with)."""

    def register(ops: Sequence[OpKey]) -> Callable[[Registered], Registered]:
        def decorate(rule: Registered) -> Registered:
            for op in ops:
                table[op] = rule
            return rule

        return decorate

    return register


def rules_for(op: TracedOp) -> tuple[Rule, ...]:
    return () if op.is_view else lookup(ALGEBRA_RULES, op) or ()


def reduced_dims(op: TracedOp) -> tuple[int, ...]:
    """The dims a sum or mean folds, normalised (all of them when ``dim`` is None or empty)."""
    rank = len(op.reads[0].shape)
    dims = op.argument("dim")
    if dims is None or dims == []:
        return tuple(range(rank))
    dims = [dims] if isinstance(dims, int) else dims
    return tuple(sorted(d % rank for d in dims)) if rank else ()


def folded(shape: Sequence[int], dims: Sequence[int]) -> int:
    """Elements one output of a reduction over ``dims`` folds."""
    return math.prod(shape[d] for d in dims)


def is_contiguous(ref: TensorRef) -> bool:
    expected = 1
    for size, stride in zip(reversed(ref.shape), reversed(ref.strides), strict=True):
        if size != 1 and stride != expected:
            return False
        expected *= size
    return True


def meta_like(ref: TensorRef) -> torch.Tensor:
    """A meta tensor with ``ref``'s shape, strides and dtype (no data)."""
    return torch.empty_strided(ref.shape, ref.strides, dtype=getattr(torch, ref.dtype),
                               device="meta")


def scalar_argument(op: TracedOp, position: int) -> Any:
    """Argument ``position`` of ``op`` if it is a Python number (None otherwise)."""
    value = op.args[position] if position < len(op.args) else None
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None


SUMS = (aten.sum, aten.mean)
