"""Work done once: the same product computed twice is computed once (a common subexpression,
found by the call or by the normal form of the segment that computes it, up to a number), and a
product whose operand is broadcast along its rows is one row, broadcast."""

from __future__ import annotations

import itertools
import math
from dataclasses import replace

import torch

from ...costs import aten, lookup
from ...trace.refs import TensorRef, TracedOp
from ._core import Graph, Match, algebra_rule, is_contiguous
from .factors import network_key
from .network import FLOATS, STEPS, Walk, dense, leaf_values, transparent, without_deltas

#: a segment that computes an earlier segment's value times a number other than 1
SCALED_RULE = "common subexpression up to a scale"


def _repeatable(graph: Graph, index: int, op: TracedOp) -> bool:
    """Whether two calls of ``op`` on equal values give equal values that may be one: not
    random nor writing an argument (its record's ``call_key``, as FX's CSE pass decides), no
    uninitialised memory, its outputs written by nothing else and after the first read by
    nothing."""
    if op.is_view or not op.writes or not graph.record(index).call_key or "empty" in op.base:
        return False
    return all(len(graph.writers.get(w.storage_id, ())) == 1 for w in op.writes) and all(
        not graph.readers.get(w.value_id) and w.value_id not in graph.trace.output_value_ids
        for w in op.writes[1:]
    )


def _transposed(ref: TensorRef) -> TensorRef:
    return replace(ref, shape=ref.shape[::-1], strides=ref.strides[::-1])


def _values(reads: tuple[TensorRef, ...]) -> tuple:
    """The elements ``reads`` read: each value at its offset, strides and shape (a product of
    A[:, :k] and B[:k] reads A and B at the offsets and strides of one over A[:, :k'] and
    B[:k'], another value unless k = k')."""
    return tuple((r.value_id, r.offset, r.strides, r.shape) for r in reads)


def common_values(graph: Graph) -> list[Match]:
    """Every op that computes what an earlier op computed, as one value (value numbering in
    program order): the same call (op and arguments, :attr:`OpRecord.call_key`) on the same
    input values (an input already found equal to an earlier value counts as that value), or,
    for a product, (Bᵀ @ Aᵀ)ᵀ = A @ B: the later output is the earlier one read transposed. So
    a module called twice on one input is one module call, and ``x @ W − x @ W`` reads one
    value twice (for :mod:`.identities`)."""
    #: (op, the values it reads) → the earlier ops of that key; the call keys are compared
    #: only there (most ops have no earlier twin)
    seen: dict[tuple, list[int]] = {}
    #: value id → (its written ref, the earlier equal value's written ref, seen in its shape)
    same: dict[int, tuple[TensorRef, TensorRef]] = {}
    matches: list[Match] = []
    ops = graph.trace.ops
    for index, op in enumerate(ops):
        if op.is_view or not op.writes:
            continue
        reads = tuple(_onto(ref, same) for ref in op.reads) if same else op.reads
        if None in reads:
            continue
        twins = seen.setdefault((op.name, _values(reads)), [])
        earlier = _twin(graph, index, twins)
        if earlier is None and op.func is not None and op.func.overloadpacket is aten.mm:
            swapped = tuple(map(_transposed, reads[::-1]))
            # a plain product has no arguments but its operands: any earlier one is the call
            # (only an earlier one: Aᵀ @ A swapped is itself, symmetric, not computed before)
            found = _twin(graph, index, seen.get((op.name, _values(swapped)), []), keyed=False)
            earlier = None if found is None else _transposed(found)
        twins.append(index)
        ours = op.writes[0]
        if earlier is None or earlier.shape != ours.shape or (
            not _readers_map(graph, ours, earlier)
        ):
            continue
        same[ours.value_id] = (ours, earlier)
        matches.append(Match("common subexpression", index, (earlier,), None, index))
    return matches


def _twin(graph: Graph, index: int, earlier: list[int], keyed: bool = True) -> (
    TensorRef | None
):
    """The output of the first of ``earlier`` (ops reading the same values) that makes the
    same call as op ``index`` (:func:`_repeatable`, equal call keys where ``keyed``)."""
    if not earlier or not _repeatable(graph, index, graph.op(index)):
        return None
    key = graph.record(index).call_key
    for other in earlier:
        if (not keyed or graph.record(other).call_key == key) and _repeatable(
            graph, other, graph.op(other)
        ):
            return graph.op(other).writes[0]
    return None


def _onto(ref: TensorRef, same: dict[int, tuple[TensorRef, TensorRef]]) -> TensorRef | None:
    """``ref`` read from the earlier equal value (itself where there is none)."""
    found = same.get(ref.value_id)
    return ref if found is None else onto_equal(ref, *found)


def _readers_map(graph: Graph, ours: TensorRef, earlier: TensorRef) -> bool:
    """Whether every read of ``ours`` (the program's views of it) reads ``earlier`` too."""
    refs = [r for i in graph.readers.get(ours.value_id, ()) for r in graph.op(i).reads
            if r.value_id == ours.value_id]
    refs += [r for r in graph.trace.output_refs if r.value_id == ours.value_id]
    return all(onto_equal(r, ours, earlier) is not None for r in refs)


def onto_equal(ref: TensorRef, written: TensorRef, earlier: TensorRef) -> TensorRef | None:
    """``ref`` (a view of the value ``written``, laid out without gaps in some order of its
    dims: contiguous, or a pointwise op's output in its input's transposed layout; in
    ``earlier``'s shape) as the same view of the equal value ``earlier`` (laid out by its own
    strides, a transpose perhaps): each dim's step is one step along one dim of the written
    value, mapped onto ``earlier``'s."""
    shape = earlier.shape
    if written.shape != shape or not dense(written):
        return None
    # the written value's dims from the outermost (a size-1 dim: no step, digit 0)
    outer = sorted((d for d in range(len(shape)) if shape[d] > 1),
                   key=lambda d: -written.strides[d])

    def digits(position: int) -> list[int] | None:
        if not 0 <= position < math.prod(shape):
            return None
        out = [0] * len(shape)
        for d in outer:
            out[d], position = divmod(position, written.strides[d])
        return out

    origin = digits(ref.offset - written.offset)
    if origin is None:
        return None
    strides = []
    for size, stride in zip(ref.shape, ref.strides, strict=True):
        if size == 1 or stride == 0:
            strides.append(0 if stride == 0 else stride)
            continue
        step = digits(stride)
        moved = [(d, k) for d, k in enumerate(step or ()) if k]
        if len(moved) != 1 or origin[moved[0][0]] + moved[0][1] * (size - 1) >= shape[moved[0][0]]:
            return None
        d, k = moved[0]
        strides.append(k * earlier.strides[d])
    offset = earlier.offset + sum(i * s for i, s in zip(origin, earlier.strides, strict=True))
    return replace(ref, value_id=earlier.value_id, storage_id=earlier.storage_id, offset=offset,
                   strides=tuple(strides), storage_elements=earlier.storage_elements)


#: most atoms (a value's dims, split where a view of it splits one) whose orders are tried
#: onto an earlier value's ((Bᵀ·Aᵀ)ᵀ is A·B read transposed; a 1×1 convolution is a product
#: over a permuted image): n! keys each
MOST_PERMUTED_ATOMS = 4


def equal_networks(graph: Graph) -> list[Match]:
    """Every segment with a product (:mod:`.network`) that computes an earlier segment's value
    times a number, its elements perhaps permuted, computed from it: value numbering over the
    normal form, not the calls, so ``softmax(a @ b * c)`` and ``softmax((a * c) @ b)`` compute
    one product (a diagonal scale is one factor on either side of it; ``einsum``, a chain
    reassociated, a product read transposed and a 1×1 convolution as a product over the
    channels are one network). A segment is keyed (:func:`.factors.network_key`) only where
    another ends in a value of as many elements from the same values (most segments: none,
    and no walk)."""
    groups: dict[tuple, list[int]] = {}
    for index, op in enumerate(graph.trace.ops):
        if op.is_view or len(op.writes) != 1 or lookup(STEPS, op) is None:
            continue
        out = op.writes[0]
        if out.dtype not in FLOATS or len(graph.writers.get(out.storage_id, ())) != 1 or (
            transparent(graph, out, op) or not _read(graph, out)
        ):
            continue
        leaves = frozenset().union(*(leaf_values(graph, ref) for ref in op.reads))
        groups.setdefault((math.prod(out.shape), out.dtype, leaves), []).append(index)
    matches: list[Match] = []
    for members in groups.values():
        if len(members) < 2:
            continue
        seen: dict[object, tuple[TensorRef, float]] = {}
        for index in members:
            match = _numbered(graph, index, seen)
            matches.extend(() if match is None else (match,))
    return sorted(matches, key=lambda match: match.root)


def _read(graph: Graph, out: TensorRef) -> bool:
    return bool(graph.readers.get(out.value_id)) or out.value_id in graph.trace.output_value_ids


def _numbered(graph: Graph, index: int,
              seen: dict[object, tuple[TensorRef, float]]) -> Match | None:
    """Op ``index``'s value computed from an earlier one of ``seen`` (key → the earlier value,
    its number) where its segment has a product and one order of its atoms
    is keyed so; else its key added to ``seen``."""
    op = graph.op(index)
    ours = op.writes[0]
    walk = Walk(graph)
    groups = walk.net.fresh(ours.shape)
    terms = lookup(STEPS, op)(walk, op, index, groups)
    atoms = walk.net.atoms([a for g in groups for a in g])
    if not terms or len(set(atoms)) != len(atoms):
        return None
    terms = without_deltas(walk.net, terms, atoms)
    if terms is None:
        return None
    sizes = tuple(walk.net.sizes[a] for a in atoms)
    orders = itertools.permutations(range(len(atoms))) if len(
        atoms) <= MOST_PERMUTED_ATOMS else (tuple(range(len(atoms))),)
    product = any(graph.record(i).flops.tensor for i in {index, *walk.net.ops})
    for order in orders:
        found = network_key(walk.net, terms, tuple(atoms[n] for n in order))
        if found is None:
            return None
        key, number = found
        if order == tuple(range(len(atoms))) and key not in seen:
            seen[key] = (ours, number)
        earlier = seen.get(key)
        if earlier is not None and earlier[0] is not ours and product:
            return _computed_from(graph, index, earlier[0], number / earlier[1],
                                  tuple(sizes[n] for n in order), order)
    return None


def _computed_from(graph: Graph, index: int, earlier: TensorRef, ratio: float,
                   atoms: tuple[int, ...], order: tuple[int, ...]) -> Match | None:
    """Op ``index``'s value as ``ratio`` times ``earlier``, whose elements are ours in
    ``order`` (ours, its atoms permuted by ``order``, of sizes ``atoms``, is the earlier value
    in row-major order): the earlier value itself, read through each view, where nothing is
    permuted and the ratio is 1."""
    ours = graph.op(index).writes[0]
    if ratio == 1 and order == tuple(sorted(order)) and (
        ours.shape == earlier.shape or is_contiguous(earlier)
    ):
        # the same elements in the same order: the earlier value read in our shape
        if ours.shape != earlier.shape:
            earlier = replace(earlier, shape=ours.shape, strides=tuple(
                math.prod(ours.shape[d + 1:]) for d in range(len(ours.shape))))
        if not is_contiguous(ours) or not _readers_map(graph, ours, earlier):
            return None
        return Match("common subexpression", index, (earlier,), None, index)
    back = tuple(order.index(n) for n in range(len(order)))
    shape = ours.shape

    def build(e: torch.Tensor) -> torch.Tensor:
        value = e.reshape(atoms).permute(back) if back != tuple(range(len(back))) else e
        value = (value if ratio == 1 else value * ratio).reshape(shape)
        return value.clone(memory_format=torch.contiguous_format)

    return Match("common subexpression" if ratio == 1 else SCALED_RULE, index, (earlier,), build,
                 index)


@algebra_rule([aten.mm, aten.addmm])
def broadcast_lines(graph: Graph, root: int) -> Match | None:
    """x.expand(M, K) @ W has M equal rows: (x @ W) once, broadcast (a bias added to every row
    the same: (b + x @ W) once too); A @ w.expand(K, N) (every column of the right operand
    one, stride 0 along its columns) has N equal columns: (A @ w) once, the same way."""
    op = graph.op(root)
    *bias, left, right = op.reads
    rows, columns = left.shape[0], right.shape[-1]
    # the output dim the operand repeats along: its rows (the left's) or columns (the right's)
    dim = next((d for d, operand in ((0, left), (1, right)) if operand.shape[d] > 1
                and len(operand.strides) == 2 and operand.strides[d] == 0), None)
    if dim is None:
        return None
    if bias:  # aligned to the output's trailing dims, it must be the same along ``dim`` too
        along = dim - 2 + len(bias[0].shape)
        if along >= 0 and bias[0].shape[along] != 1 and bias[0].strides[along] != 0:
            return None
    beta, alpha = op.argument("beta", 1), op.argument("alpha", 1)
    line = (slice(None, 1), slice(None)) if dim == 0 else (slice(None), slice(None, 1))

    def build(x: torch.Tensor, w: torch.Tensor, *b: torch.Tensor) -> torch.Tensor:
        x, w = (x[line], w) if dim == 0 else (x, w[line])
        y = torch.addmm(b[0].expand(rows, columns)[line], x, w, beta=beta, alpha=alpha) if b else (
            x @ w
        )
        return y.expand(rows, columns).contiguous()

    return Match("broadcast operand computed once", root, (left, right, *bias), build, root)
