"""Inductor's FX passes on the traced ops (``post_grad``): common-subexpression elimination,
no-op removal and dead-code elimination, on the graph lowering then rewrites (:class:`_Graph`)."""


from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from ...costs import Category, OpRecord
from ...trace.refs import TensorRef

if TYPE_CHECKING:  # a ConcatKernel's slices, made by lowering
    from .lowering import Concat


@dataclass
class _Graph:
    """The op list as the scheduler will see it, with the bookkeeping of its rewrites."""

    ops: list[OpRecord]
    kept: set[int]
    #: value id → the slices that stand for it (a ``ConcatKernel`` output)
    renamed: dict[int, Concat] = field(default_factory=dict)
    #: CSE (twin, duplicate) pairs: a duplicate runs in the kernel that computes its twin
    duplicates: list[tuple[OpRecord, OpRecord]] = field(default_factory=list)
    #: values a ``ConcatKernel`` needs stored (their producers write into its slices)
    must_realize: set[int] = field(default_factory=set)
    last_id: int = 0

    def fresh_id(self) -> int:
        """An id no traced value or storage has (traced ids are positive)."""
        self.last_id -= 1
        return self.last_id

    def rename(self, refs: Iterable[TensorRef]) -> tuple[TensorRef, ...]:
        return tuple(
            new for ref in refs
            for new in (self.renamed[ref.value_id].read(ref) if ref.value_id in self.renamed
                        else (ref,))
        )

    def readers(self) -> dict[int, list[OpRecord]]:
        """Value id → the non-view ops that read it."""
        readers: dict[int, list[OpRecord]] = {}
        for op in self.ops:
            if op.category is not Category.ZERO_COPY:
                for value in {ref.value_id for ref in op.reads}:
                    readers.setdefault(value, []).append(op)
        return readers


def _renamed_ref(ref: TensorRef, twin: TensorRef) -> TensorRef:
    return replace(ref, value_id=twin.value_id, storage_id=twin.storage_id)


def common_subexpressions(
    ops: Sequence[OpRecord], kept_values: frozenset[int]
) -> tuple[list[OpRecord], list[tuple[OpRecord, OpRecord]]]:
    """FX CSE (``torch.fx.passes.dialect.common.cse_pass``, run by AOTAutograd): a call equal
    to an earlier one (same op, arguments and input values; not random, not in place) is the
    earlier one. Returns the ops without duplicates (later reads renamed to the twin's outputs)
    and the (twin, duplicate) pairs. A duplicate the model returns stays:
    Inductor would return one buffer twice, but the bound charges every returned tensor."""
    renamed: dict[int, TensorRef] = {}
    seen: dict[_HashedKey, OpRecord] = {}
    kept_ops: list[OpRecord] = []
    pairs: list[tuple[OpRecord, OpRecord]] = []
    # FX CSE runs on a functional graph: a value whose storage is written again is not pure
    writers = Counter(ref.storage_id for op in ops for ref in op.writes)
    for op in ops:
        if any(ref.value_id in renamed for ref in op.reads):
            op = replace(op, reads=tuple(
                _renamed_ref(ref, renamed[ref.value_id]) if ref.value_id in renamed else ref
                for ref in op.reads
            ))
        key = None if any(writers[ref.storage_id] > 1 for ref in op.writes) else _cse_key(
            op, kept_values
        )
        twin = seen.get(key) if key is not None else None
        if twin is not None and len(twin.writes) == len(op.writes):
            renamed.update({ref.value_id: new for ref, new in zip(op.writes, twin.writes,
                                                                   strict=True)})
            pairs.append((twin, op))
            continue
        if key is not None:
            seen[key] = op
        kept_ops.append(op)
    return kept_ops, pairs


def _cse_key(op: OpRecord, kept_values: frozenset[int]) -> _HashedKey | None:
    if not op.call_key or not op.writes or op.category is Category.ZERO_COPY:
        return None
    if any(ref.value_id in kept_values for ref in op.writes):
        return None
    try:
        return _HashedKey((op.call_key, tuple(ref.value_id for ref in op.reads)))
    except TypeError:  # an argument torch gives no hash: never merged
        return None


class _HashedKey:
    """A CSE key with its hash taken once: it nests the call's arguments, which the table of
    calls seen would otherwise hash again at every lookup."""

    __slots__ = ("key", "_hash")

    def __init__(self, key: tuple) -> None:
        self.key = key
        self._hash = hash(key)

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _HashedKey) and self.key == other.key


def _call_arguments(op: OpRecord) -> tuple:
    """The call's positional arguments as :attr:`OpRecord.call_key` keeps them (tensors as
    their layouts); ``()`` when it keeps none."""
    return op.call_key[1][0] if len(op.call_key) == 2 and op.call_key[1] else ()


def _scalar_argument_is(position: int, value: int) -> Callable[[OpRecord], bool]:
    def check(op: OpRecord) -> bool:
        arguments = _call_arguments(op)
        argument = arguments[position] if len(arguments) > position else None
        return type(argument) is int and argument == value
    return check


def _every_argument_is(position: int, value: int) -> Callable[[OpRecord], bool]:
    def check(op: OpRecord) -> bool:
        arguments = _call_arguments(op)
        return len(arguments) > position and all(v == value for v in arguments[position])
    return check


def _integer_input(op: OpRecord) -> bool:
    return not op.reads[0].is_float


@dataclass(frozen=True)
class NoOp:
    """An op that returns one of its inputs unchanged under a condition: ``source`` is that
    input's position among the op's reads."""

    source: int
    when: Callable[[OpRecord], bool] = lambda op: True


#: ``post_grad.remove_noop_ops``' registry (``register_noop_decomp``): ops that return an input
#: unchanged — always when the result has the input's size, strides and dtype (``same_meta``),
#: or under the condition given.
NOOPS = {
    "aten.clone.default": NoOp(0),
    "aten.alias.default": NoOp(0),
    "aten.copy.default": NoOp(1),
    # decomposed into prims.convert_element_type: a no-op to the same dtype
    "aten._to_copy.default": NoOp(0),
    "prims.convert_element_type.default": NoOp(0),
    "aten.slice_scatter.default": NoOp(1),
    "aten.cat.default": NoOp(0, lambda op: len(op.reads) == 1),
    "aten.pow.Tensor_Scalar": NoOp(0, _scalar_argument_is(1, 1)),
    "aten.repeat.default": NoOp(0, _every_argument_is(1, 1)),
    "aten.constant_pad_nd.default": NoOp(0, _every_argument_is(1, 0)),
    **{f"aten.{name}.default": NoOp(0, _integer_input)
       for name in ("ceil", "floor", "round", "trunc")},
}


def remove_noop_ops(ops: Sequence[OpRecord], kept: set[int]) -> list[OpRecord]:
    """``post_grad.remove_noop_ops``: an op of :data:`NOOPS` whose result has its source's
    metadata is its source — unless that would make a returned tensor alias a graph input or
    another returned tensor ("don't introduce new aliasing between inputs and outputs"). Later
    reads (and ``kept``, updated in place) name the source instead. FX sees a functional graph:
    a value whose storage is written again is not a copy of anything."""
    producers = {ref.value_id for op in ops for ref in op.writes}
    writers = Counter(ref.storage_id for op in ops for ref in op.writes)
    inputs = {ref.storage_id for op in ops for ref in op.reads if ref.value_id not in producers}
    outputs = {ref.storage_id for op in ops for ref in op.writes if ref.value_id in kept}
    renamed: dict[int, TensorRef] = {}
    remaining: list[OpRecord] = []
    for op in ops:
        if any(ref.value_id in renamed for ref in op.reads):
            op = replace(op, reads=tuple(renamed.get(ref.value_id, ref) for ref in op.reads))
        rule = NOOPS.get(op.name)
        if rule is None or len(op.writes) != 1 or len(op.reads) <= rule.source:
            remaining.append(op)
            continue
        (out,), src = op.writes, op.reads[rule.source]
        same_meta = (out.shape, out.strides, out.dtype) == (src.shape, src.strides, src.dtype)
        rewritten = writers[out.storage_id] > 1 or writers[src.storage_id] > (
            src.value_id in producers)
        aliases = out.storage_id in outputs and src.storage_id in inputs | outputs
        if not same_meta or rewritten or aliases or not rule.when(op):
            remaining.append(op)
            continue
        renamed[out.value_id] = src
        if out.value_id in kept:
            kept.discard(out.value_id)
            kept.add(src.value_id)
            outputs.add(src.storage_id)
    return remaining


def eliminate_dead_code(ops: Sequence[OpRecord], kept_values: set[int]) -> list[OpRecord]:
    """FX dead-code elimination: a pure call (see :attr:`OpRecord.call_key`) whose outputs
    nothing reads and the model does not keep is not compiled. So is a mutation no one can
    see: Inductor compiles the functionalized graph, where ``y[:, :k] = b`` on a fresh clone is
    a ``slice_scatter`` whose result nothing uses — a write into storage made in the graph
    that holds no kept value and that no later compiled op reads."""
    produced = {ref.value_id for op in ops for ref in op.writes}
    visible = {ref.storage_id for op in ops for ref in (*op.reads, *op.writes)
               if ref.value_id in kept_values or ref.value_id not in produced}
    live = set(kept_values)
    alive: list[OpRecord] = []
    for op in reversed(ops):
        if not any(ref.value_id in live for ref in op.writes) and (op.call_key or op.writes and (
            not any(ref.storage_id in visible for ref in op.writes)
        )):
            continue
        live |= {ref.value_id for ref in op.reads}
        visible |= {ref.storage_id for ref in op.reads}
        alive.append(op)
    return alive[::-1]


def _short_op_name(op: OpRecord) -> str:
    return op.name.split(".")[1] if op.name.count(".") >= 1 else op.name
