"""The routed work every input needs (issue 37): the floor of a mixture of experts' bound for
any input values.

For any values, a size chosen by data may be zero (:func:`.sized._sized_by_data`): the tokens
``torch.where(chosen == e)`` routes to expert ``e`` may be none, so the bound charged the
router only. But ``chosen = topk(logits, k).indices`` holds ``k`` *distinct* experts per
token, whatever the logits. Where the program selects ``chosen == e`` once per expert and the
selections cover every expert (a loop over ``range(E)``, or over the experts hit: a list
of them read on the host, their traced rows adding up to every pair), they partition the
``T·k`` routed (token, expert) pairs: ``n_e ≤ T`` pairs for expert ``e``, ``Σ_e n_e = T·k``.
An expert that keeps its first ``C`` (a prefix ``token[:C]``: its capacity) processes
``min(n_e, C)`` of them, and

    Σ_e min(n_e, C) ≥ k · min(T, C)

for every routing (docs/algebra.md, "Routed work for any values"), with equality when every
token picks the same ``k`` experts: the floor is the tightest that holds for all routings.
Every routing with ``C ≥ 1`` also runs ``k`` experts or more on one row or more each.

The bound for any values keeps that floor (:class:`.walk.Floor`): the work on each
selection's rows is read from the walk at the traced sizes (as for given sizes), per row of
the expert cheapest per row, and charged for ``k · min(T, C)`` rows; the fixed-size inputs
(the weights) of the ``k`` experts that read fewest are charged as for one row or more. The
experts are taken to run one program alike: an expert the traced routing gave no row is
taken to cost per row what the cheapest one that ran does.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence

import torch

from ...costs import Category, FlopCount, OpRecord, aten
from ...trace.refs import Trace, TracedOp
from ._core import _one_of, _op_set
from .sized import _sized_by_data, _sizes_outputs_by_data
from .walk import HOST_READS, Floor, Necessary, necessary_work

_TOPK = _op_set([aten.topk])
_EQUALS = _op_set([aten.eq])
_ANY = _op_set([aten.any])
_NONZERO = _op_set([aten.nonzero])
_SLICE = _op_set([aten.slice])


@dataclasses.dataclass(frozen=True)
class Selection:
    """One expert's share of a routing: the ``nonzero`` of ``chosen == expert`` (its pairs, or
    with ``.any(-1)`` its tokens: one per pair, the experts of a token being distinct)."""

    expert: int
    rows: int  #: the rows the traced routing gave it
    #: (trace index, rows it takes: all or the first C) of each op computing on its rows
    ops: tuple[tuple[int, int], ...]


@dataclasses.dataclass(frozen=True)
class Routing:
    """``topk`` indices split by expert: ``tokens`` lines of ``top_k`` distinct experts of
    ``experts``, each expert keeping its first ``capacity`` rows (None: all)."""

    tokens: int
    top_k: int
    experts: int
    capacity: int | None
    selections: tuple[Selection, ...]

    @property
    def floor_rows(self) -> int:
        """Rows every routing keeps: ``k · min(T, C)`` (module docstring)."""
        capacity = self.tokens if self.capacity is None else self.capacity
        return self.top_k * max(0, min(self.tokens, capacity))

    def floor_of(self, rows: int) -> int:
        """Rows every routing gives an op that took ``rows`` of a selection: ``T·k`` where
        they were more than the capacity (all the pairs), else :attr:`floor_rows`."""
        uncut = self.capacity is not None and rows > self.capacity
        return self.tokens * self.top_k if uncut else self.floor_rows


def _routing_indices(ops: Sequence[TracedOp]) -> dict[int, tuple[int, int, int]]:
    """value id of each ``topk(…, dim=-1).indices`` → (tokens, k, experts)."""
    found = {}
    for op in ops:
        if not _one_of(op, _TOPK) or len(op.writes) < 2:
            continue
        shape = op.reads[0].shape
        if not shape or op.argument("dim", -1) % len(shape) != len(shape) - 1:
            continue
        top_k = op.argument("k")
        found[op.writes[1].value_id] = (math.prod(shape[:-1]), top_k, shape[-1])
    return found


def _expert_of(op: TracedOp, indices: Mapping[int, tuple[int, int, int]]) -> tuple[int, int]:
    """(routing value, expert) of ``chosen == expert`` over all of a routing's indices, else
    (0, -1)."""
    if not _one_of(op, _EQUALS) or len(op.reads) != 1 or op.reads[0].value_id not in indices:
        return 0, -1
    tokens, top_k, experts = indices[op.reads[0].value_id]
    other = op.argument("other")
    whole = math.prod(op.reads[0].shape) == tokens * top_k
    if not whole or isinstance(other, bool) or not isinstance(other, int):
        return 0, -1
    return (op.reads[0].value_id, other) if 0 <= other < experts else (0, -1)


def _capacity(ops: Sequence[TracedOp], start: int, root: int) -> int | None:
    """The fewest rows a prefix cut from ``root`` (the selection's value) keeps (``token[:C]``:
    its capacity), or None where none is cut."""
    cuts = []
    for op in ops[start:]:
        if op.is_view and _one_of(op, _SLICE) and op.reads and op.reads[0].value_id == root:
            end, dim = op.argument("end"), op.argument("dim", 0)
            prefix = not op.argument("start") and op.argument("step", 1) == 1
            if prefix and dim == 0 and end is not None:
                cuts.append(max(end, 0))
    return min(cuts, default=None)


def routings(ops: Sequence[TracedOp], real_sizes: bool = True) -> list[Routing]:
    """The routings of ``ops`` split into one selection per expert, all experts covered;
    ``real_sizes``: the data-sized ops ran on real values (not stand-ins, whose sizes are no
    routing's), so selections adding up to every pair cover the experts hit."""
    indices = _routing_indices(ops)
    if not indices:
        return []
    masks: dict[int, tuple[int, int]] = {}  #: mask value → (routing value, expert)
    roots: dict[int, tuple[int, int, int]] = {}  #: selection value → (routing, expert, op)
    for index, op in enumerate(ops):
        routing, expert = _expert_of(op, indices)
        if expert >= 0:
            masks[op.writes[0].value_id] = (routing, expert)
        elif _one_of(op, _ANY) and op.reads[0].value_id in masks and _over_picks(op, indices,
                                                                              masks):
            masks[op.writes[0].value_id] = masks[op.reads[0].value_id]
        elif _one_of(op, _NONZERO) and op.reads[0].value_id in masks:
            roots[op.writes[0].value_id] = (*masks[op.reads[0].value_id], index)
    sized = _sized_by_data(ops)
    found = []
    for routing, (tokens, top_k, experts) in indices.items():
        mine = {v: (e, i) for v, (r, e, i) in roots.items() if r == routing}
        pairs = tokens * top_k if real_sizes else -1
        if not _partition(ops, mine, experts, pairs, _hit_lists(ops, routing)):
            continue
        cuts = [_capacity(ops, i, v) for v, (_, i) in mine.items()]
        capacity = min((c for c in cuts if c is not None), default=None)
        rows = {v: ops[i].writes[0].shape[0] for v, (_, i) in mine.items()}
        kept_rows = {
            v: {n, n if capacity is None else min(n, capacity)} for v, n in rows.items()
        }
        members = _members(ops, {v: i for v, (_, i) in mine.items()}, kept_rows, sized)
        selections = tuple(
            Selection(expert, rows[v], members[v]) for v, (expert, _) in mine.items()
        )
        found.append(Routing(tokens, top_k, experts, capacity, selections))
    return found


def _hit_lists(ops: Sequence[TracedOp], routing: int) -> set[int]:
    """The lengths of the values computed from the ``routing`` indices that the host reads
    element by element (``chosen.unique()``, ``bincount(chosen).nonzero()`` and ``.item()``):
    the experts hit, which a loop then runs over."""
    derived = {routing}
    lengths: set[int] = set()
    for op in ops:
        if not any(ref.value_id in derived for ref in op.reads):
            continue
        if _one_of(op, HOST_READS):
            lengths.update(written[0] for ref in op.reads
                           if (written := _written_shape(ops, ref.value_id)))
        derived.update(w.value_id for w in op.writes)
    return lengths


def _written_shape(ops: Sequence[TracedOp], value_id: int) -> tuple[int, ...]:
    return next((w.shape for op in ops for w in op.writes if w.value_id == value_id), ())


def _partition(
    ops: Sequence[TracedOp], selections: Mapping[int, tuple[int, int]], experts: int, pairs: int,
    hit_lists: set[int],
) -> bool:
    """Whether ``selections`` (value → (expert, op index)) split every routed pair: one per
    expert, covering all ``experts`` (a loop over ``range(E)``) or, in the traced routing,
    all ``pairs`` (a loop over the experts hit, which every routing covers alike: one
    selection per element of a list of them the host reads, ``hit_lists``; -1: the traced
    sizes are no routing's)."""
    chosen = [expert for expert, _ in selections.values()]
    if len(set(chosen)) != len(chosen):
        return False
    rows = sum(ops[index].writes[0].shape[0] for _, index in selections.values())
    return set(chosen) == set(range(experts)) or (rows == pairs and len(chosen) in hit_lists)


def _over_picks(
    op: TracedOp, indices: Mapping[int, tuple[int, int, int]],
    masks: Mapping[int, tuple[int, int]],
) -> bool:
    """Whether ``op`` (an ``any``) reduces a routing mask over each token's k picks only: its
    last dim, of size k, the mask in the top-k's (tokens…, k) layout."""
    read = op.reads[0]
    dims = op.argument("dim")
    dims = dims if isinstance(dims, (list, tuple)) else [dims]
    rank = len(read.shape)
    top_k = indices[masks[read.value_id][0]][1]
    return (
        rank >= 2 and read.shape[-1] == top_k and read.strides[-1] == 1
        and [d % rank for d in dims if d is not None] == [rank - 1]
    )


def _members(
    ops: Sequence[TracedOp], roots: Mapping[int, int], kept_rows: Mapping[int, set[int]],
    sized: Mapping[int, frozenset[int]],
) -> dict[int, tuple[tuple[int, int], ...]]:
    """selection value → (trace index, rows) of the ops that compute on its rows: those
    reading values sized by it alone, each at all its rows or its first C (``kept_rows``;
    ``token[0]`` is no row count), through ops of fixed output size (a new data-sized op
    ends it)."""
    owner = {v: v for v in roots}  #: value → the selection value it is sized by
    members: dict[int, list[tuple[int, int]]] = {v: [] for v in roots}
    for index, op in enumerate(ops):
        if op.is_view or index in roots.values():
            continue
        reads = [ref for ref in op.reads if ref.value_id in owner]
        owners = {owner[ref.value_id] for ref in reads}
        if len(owners) != 1 or _sizes_outputs_by_data(op):
            continue
        [root] = owners
        if not all(ref.shape and ref.shape[0] in kept_rows[root] for ref in reads):
            continue
        members[root].append((index, min(ref.shape[0] for ref in reads)))
        for write in op.writes:
            if write.value_id in sized:
                owner[write.value_id] = root
    return {v: tuple(taken) for v, taken in members.items()}


def _scaled(flops: FlopCount, numerator: int, denominator: int) -> FlopCount:
    return FlopCount(flops.tensor * numerator // denominator,
                     flops.vector * numerator // denominator, flops.kind, flops.launches)


#: Kernels whose FLOPs grow as the rows they take (a product's rows, an elementwise op's):
#: per row at the traced count, per row at any (a sort of the rows would not be).
_ROW_LINEAR = frozenset({Category.COMPUTE, Category.POINTWISE})


def _floor_flops(traced: Necessary, routing: Routing, selection: Selection) -> dict[int, FlopCount]:
    """The FLOPs every routing spends on the ops of ``selection``, from their ``traced``
    FLOPs per row taken (row-linear ops only: a sort of the rows is charged nothing)."""
    return {
        index: _scaled(traced.ops[index].flops, routing.floor_of(rows), rows)
        for index, rows in selection.ops
        if rows and traced.ops[index].category in _ROW_LINEAR
    }


def _weight_elements(trace: Trace, selection: Selection) -> int:
    """Elements of the graph inputs the selection's ops read (each view once)."""
    views = {
        (ref.value_id, ref.offset, ref.shape)
        for index, _ in selection.ops for ref in trace.ops[index].reads
        if ref.value_id in trace.input_value_ids
    }
    return sum(math.prod(shape) for _, _, shape in views)


def routing_floor(trace: Trace, found: Sequence[Routing], traced: Necessary) -> Floor | None:
    """The :class:`.walk.Floor` of the routings ``found``: ``traced`` is the necessary work
    at the traced sizes, whose FLOPs per row of each selection are read; the selection whose
    floor is least is charged."""
    flops: dict[int, FlopCount] = {}
    reads: set[int] = set()
    for routing in found:
        ran = [s for s in routing.selections if s.rows and s.ops]
        if not routing.floor_rows or not ran:
            continue
        floors = [_floor_flops(traced, routing, s) for s in ran]
        flops.update(min(floors, key=lambda f: sum(c.tensor + c.vector for c in f.values())))
        lightest = sorted(ran, key=lambda s: _weight_elements(trace, s))[: routing.top_k]
        reads.update(index for selection in lightest for index, _ in selection.ops)
    return Floor(flops, frozenset(reads)) if flops or reads else None


def _on_stand_ins(note: str) -> bool:
    """Whether a trace note says data-sized ops ran on stand-in values (trace/tracer.py)."""
    return note.startswith("bound for every size the data could give")


def floored(
    trace: Trace, records: Sequence[OpRecord], known: dict[int, torch.Tensor],
    any_input: Necessary, shortcuts: bool = True,
) -> Necessary:
    """``any_input`` (the necessary work for any values) with the routed work every input
    needs, where the program routes tokens by ``topk`` (module docstring); itself otherwise."""
    found = routings(trace.ops, real_sizes=not any(map(_on_stand_ins, trace.notes)))
    if not found:
        return any_input
    traced = necessary_work(trace, records, known=known, sizes_given=True, shortcuts=shortcuts)
    floor = routing_floor(trace, found, traced)
    if floor is None:
        return any_input
    return necessary_work(trace, records, known=known, shortcuts=shortcuts, floor=floor)
