"""What a demand rule is: the :class:`Demand` it returns, the :class:`_Context` it reads,
the registry :data:`DEMAND_RULES`, and the helpers every family of rules shares."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from ...costs import (
    SHAPE_ONLY_TEMPLATES,
    Category,
    FlopCount,
    OpKey,
    OpRecord,
    add_rules,
    aten,
    op_keys,
)
from ...trace.intercept import RNN_CALLS
from ...trace.refs import TensorRef, TracedOp
from ...trace.regions import (
    NOWHERE,
    Region,
    Spread,
    fraction_of,
    full_box,
)


@dataclass(frozen=True)
class Demand:
    """What one op needs: a region per read (aligned with ``TracedOp.reads``, in each read's view
    coordinates), the necessary FLOPs, extra demand on other values (a structured operand's
    source), the name of the structure rule applied, if any, and the values whose producers'
    work that rule priced in this op's FLOPs (``absorbed``: x @ W read only by its column sum)."""

    inputs: tuple[Region, ...]
    flops: FlopCount
    extra: tuple[tuple[TensorRef, Region], ...] = ()
    structure: str | None = None
    absorbed: tuple[int, ...] = ()


#: The structure rules that take an algebraic shortcut, as the algebra's rewrites name the
#: same identities (:mod:`..algebra`): a kernel of the program as written does the work they
#: skip, so the walk without them is the program as written (``shortcuts=False``) and the
#: bound names them (:func:`torchroofline.price.shortcuts.shortcuts`). A reduced product moves
#: a column sum into the product it reads; a symmetric product computes one triangle, a
#: product of alike lines one line; the others make a value a constant whatever the input holds.
SHORTCUT_STRUCTURES: dict[str, str] = {
    "equal lines": "a product of alike rows (columns) is one row (column), copied",
    "reduced product": "sum through the linear map",
    "self difference": "x − x = 0",
    "size-1 normalisation": "softmax over a size-1 dim is 1",
    "symmetric product": "(AᵀA)ᵀ = AᵀA: one triangle of the products",
}


@dataclass(frozen=True)
class _Context:
    """What a rule may look at: the traced op, its costed record and the demanded outputs."""

    op: TracedOp
    record: OpRecord
    outputs: tuple[Region, ...]
    producers: dict[int, TracedOp] = field(repr=False)
    #: the part of ``outputs`` that later ops read or the model returns, as opposed to the end
    #: state of an input or buffer wanting it: what the op leaves unchanged there is already in
    #: memory, so only this part needs the old contents
    read: tuple[Region, ...] = ()
    #: values that depend only on shapes and constants, evaluated (:func:`known_values`)
    known: dict[int, torch.Tensor] = field(default_factory=dict, repr=False)
    #: value id → how many ops read it (the model keeping it counts as one)
    readers: dict[int, int] = field(default_factory=dict, repr=False)
    #: whether a rule may take an algebraic shortcut (:data:`SHORTCUT_STRUCTURES`): off for
    #: the program as written
    shortcuts: bool = True
    #: complex value id → the one part of its elements every read keeps (0 the real part, 1
    #: the imaginary: ``fft(x).imag``), where all keep one and the same
    parts: dict[int, int] = field(default_factory=dict, repr=False)

    @property
    def fraction(self) -> float:
        """Largest demanded share of any output (outputs of one op are computed together)."""
        return max(
            (
                fraction_of(r, math.prod(w.shape))
                for r, w in zip(self.outputs, self.op.writes, strict=False)
            ),
            default=0.0,
        )

    @property
    def output(self) -> Region:
        """Demand on the first output united with that of same-shaped others."""
        shape = self.op.writes[0].shape
        region = NOWHERE
        for demanded, ref in zip(self.outputs, self.op.writes, strict=True):
            if ref.shape == shape:
                region = region.union(demanded)
        return region

    def loaded(self, position: int) -> int:
        """Elements of read ``position`` the moved cost rule says the op loads (0 for a
        destination it overwrites, an ``out=`` buffer, a template it takes only the shape of)."""
        if position == 0 and not SHAPE_ONLY_TEMPLATES.isdisjoint(op_keys(self.op)):
            return 0
        moved = self.record.reads
        if len(moved) == len(self.op.reads):
            return moved[position].elements
        value_id = self.op.reads[position].value_id
        return max((r.elements for r in moved if r.value_id == value_id), default=0)

    def argument(self, name: str, default: Any = None) -> Any:
        return self.op.argument(name, default)


Rule = Callable[[_Context], Demand]


#: Keyed as the cost registry is (:func:`costs.add_rules`): aten packets or single overloads.
DEMAND_RULES: dict[OpKey, Rule] = {}


#: Rules of ops outside aten by qualified packet name (``"c10d.allreduce_"``), as
#: :data:`costs.LIBRARY_RULES` keys them: a build may lack them, and the names stay listed.
LIBRARY_DEMAND: dict[str, Rule] = {}


def demand_rule(ops: Sequence[OpKey]) -> Callable[[Rule], Rule]:
    """Decorator: register a demand rule for ``ops`` (no key twice)."""

    def decorate(rule: Rule) -> Rule:
        add_rules(DEMAND_RULES, ops, rule, "demand")
        return rule

    return decorate


def _op_set(ops: Sequence[OpKey]) -> frozenset[OpKey]:
    """``ops`` keyed as the registries key them (each with its in-place twin)."""
    table: dict[OpKey, bool] = {}
    add_rules(table, ops, True, "op-set")
    return frozenset(table)


def _one_of(op: TracedOp, keys: Collection[OpKey]) -> bool:
    """Whether ``op`` is one of ``keys`` (by its overload or its packet)."""
    return any(key in keys for key in op_keys(op))


#: Recurrences: an output at an unknown position may need every step, so all of the inputs
#: (:mod:`.recurrent` maps demanded boxes to steps).
RECURRENT = _op_set([getattr(aten, name) for name in RNN_CALLS])


def _proportional(context: _Context) -> Demand:
    """Ops with no rule of their own. A fully demanded output (or any output of a recurrence)
    needs every element the op loads and all its FLOPs. A partly demanded one: a row-wise
    reduction or normalisation (category reduction) needs the same share of each input, as a
    count with no position; for other ops (pads, folds…) which inputs a part needs is unknown,
    so none are charged — only the same share of the FLOPs."""
    share = 1.0 if _one_of(context.op, RECURRENT) else context.fraction
    row_wise = context.record.category is Category.REDUCTION
    inputs = []
    for position, ref in enumerate(context.op.reads):
        loaded = context.loaded(position)
        if share >= 1.0 and loaded >= ref.elements:
            inputs.append(Region.of([full_box(ref.shape)]))
        elif share >= 1.0 or row_wise:
            inputs.append(Region(opaque=int(loaded * share)))
        else:
            inputs.append(NOWHERE)
    return Demand(tuple(inputs), context.record.flops.scaled(share))


@functools.lru_cache(maxsize=4096)  # a program's repeated layers demand the same regions
def _broadcast(
    region: Region, out_shape: tuple[int, ...], in_shape: tuple[int, ...]
) -> Region | None:
    """A demanded output region seen from a broadcast input (None: shapes do not broadcast)."""
    if in_shape == out_shape:  # (as it is: its diagonals kept)
        return region
    lead = len(out_shape) - len(in_shape)
    if lead < 0:
        return None
    for size, out_size in zip(in_shape, out_shape[lead:], strict=True):
        if size not in (1, out_size):
            return None
    boxes = [
        tuple((range(1),) if size == 1 else box[lead + dim] for dim, size in enumerate(in_shape))
        for box in region.boxes
    ]
    # a spread's hit dims stay hit, but one broadcast to size 1 is every element's: exact
    spreads = [
        Spread(*zip(*(((range(1),), False) if size == 1 else (box[lead + dim], hit[lead + dim])
                      for dim, size in enumerate(in_shape)), strict=True))
        for box, hit in region.spreads
    ] if in_shape else []
    out_elements = math.prod(out_shape)
    return Region.of(boxes, region.opaque * math.prod(in_shape) // max(out_elements, 1), spreads)


def _biases(context: _Context, region: Region) -> tuple[Region, ...]:
    """The added input of addmm/baddbmm, broadcast; none when ``beta`` is 0 (torch ignores it)."""
    *bias, _, _ = context.op.reads
    if context.argument("beta", 1) == 0:
        return tuple(NOWHERE for _ in bias)
    out_shape = context.op.writes[0].shape
    return tuple(_broadcast(region, out_shape, ref.shape) or NOWHERE for ref in bias)


def _broadcast_batch(ref: TensorRef) -> bool:
    return len(ref.strides) == len(ref.shape) and ref.shape[0] > 1 and ref.strides[0] == 0


def _data_chosen(count: int) -> int:
    """Source elements chosen by index values: the data is unknown at analysis time and repeated
    indices may all pick one element, so the bound charges one (a loose but safe minimum)."""
    return 1 if count > 0 else 0
