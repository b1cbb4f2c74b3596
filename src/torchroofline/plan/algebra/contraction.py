"""The cheapest evaluation order of a tensor network (:mod:`.network`), and the rule that
replaces a segment's root by it.

Common factors are first taken out of the terms where that is cheaper (:mod:`.factors`, a
search weighed by this module's cost: A·B·C + A·D = A·(B·C + D)); each term is then contracted
on its own (a sum of terms a factor of it, contracted first): first every factor sums out the labels
only it carries (``W.sum(1)`` before ``x @ W``), then pairs of intermediates are contracted in
the order an exact dynamic program over subsets finds (the optimal path of opt_einsum's
``optimal``/``dp`` search, with an explicit roofline cost: tensor-core FLOPs for a pair that
contracts a label, CUDA-core FLOPs for one that only multiplies, and the bytes each step reads
and writes); the terms are then added. The rule fires where that costs less than the segment
as written
(:func:`contracted_network`); the rewritten program is then priced like any other.
"""

from __future__ import annotations

import functools
import itertools
import math
import string
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import torch

from ...costs import aten, lookup
from ...trace.refs import TensorRef
from . import chains, identities, linear
from ._core import Graph, Match, algebra_rule
from .factors import Weigh, atoms, factored_terms, reads, shared_key
from .network import (
    FLOATS,
    STEPS,
    Factor,
    Labels,
    Network,
    Sum,
    Term,
    Walk,
    leaf_values,
    read_at,
    transparent,
    without_deltas,
)

#: the name a rewrite takes: a segment ending in a sum, mean or pool moved the sum into the
#: maps before it; one ending in a product reassociated a chain of factors; one that reads a
#: factor fewer times took it out of terms, A·B·C + A·D = A·(B·C + D)
SUM_RULE = linear.RULE
PRODUCT_RULE = chains.RULE
FACTOR_RULE = "common factor taken out"
#: terms that add to nothing (a·b + a·c − a·(b + c)): the segment is 0, as x − x is
CANCEL_RULE = identities.SELF_DIFFERENCE
_SUMS = (aten.sum, aten.mean, aten.avg_pool1d, aten.avg_pool2d, aten.avg_pool3d,
         aten._adaptive_avg_pool2d, aten._adaptive_avg_pool3d, aten.adaptive_avg_pool1d)

#: the rates the order search weighs work with (H100 SXM: 494.7 TFLOP/s dense TF32 tensor
#: cores, 66.9 TFLOP/s FP32 CUDA cores, 3.35 TB/s HBM3; NVIDIA H100 datasheet). Only their
#: ratios choose an order; the bound is priced on the GPU at hand afterwards.
TENSOR_FLOPS_PER_S = 494.7e12
VECTOR_FLOPS_PER_S = 66.9e12
BYTES_PER_S = 3.35e12
#: a rewrite must save at least this share of the segment's time (a smaller gain moves no
#: bound and costs a trace of the replacement)
MIN_GAIN = 0.02


_LETTERS = string.ascii_letters


@dataclass(frozen=True)
class Cost:
    """Work of a schedule: FLOPs on each unit and bytes moved."""

    tensor_flops: int = 0
    vector_flops: int = 0
    bytes: int = 0

    def __add__(self, other: Cost) -> Cost:
        return Cost(self.tensor_flops + other.tensor_flops,
                    self.vector_flops + other.vector_flops, self.bytes + other.bytes)

    @property
    def compute_seconds(self) -> float:
        return self.tensor_flops / TENSOR_FLOPS_PER_S + self.vector_flops / VECTOR_FLOPS_PER_S

    @property
    def seconds(self) -> float:
        return self.compute_seconds + self.bytes / BYTES_PER_S


@dataclass(frozen=True)
class Order:
    """A term's schedule: the labels each factor keeps after summing its own out, and the
    pairwise contractions as a tree of factor positions (an int: a factor)."""

    kept: tuple[Labels, ...]
    tree: object
    cost: Cost


def _elements(labels: Sequence[int], sizes: dict[int, int]) -> int:
    return math.prod(sizes[label] for label in set(labels))


def pair_cost(a: Labels, b: Labels, out: Labels, sizes: dict[int, int], itemsize: int) -> Cost:
    """One pairwise contraction: a batched product where a label is contracted (2 FLOPs per
    point of the joint index space), an elementwise multiply otherwise (1 per point)."""
    joint = set(a) | set(b)
    points = _elements(joint, sizes)
    moved = itemsize * (_elements(a, sizes) + _elements(b, sizes) + _elements(out, sizes))
    if joint - set(out):
        return Cost(tensor_flops=2 * points, bytes=moved)
    return Cost(vector_flops=points, bytes=moved)


def best_order(factors: Sequence[Labels], output: Labels, sizes: dict[int, int],
               itemsize: int) -> Order:
    """The cheapest schedule of one term (see the module doc): an exact dynamic program over
    the subsets of its factors, 3ⁿ pairs for n factors. Searched once per network up to the
    names of its labels (a model's repeated blocks are one search)."""
    names: dict[int, int] = {}
    for label in itertools.chain(*factors, output):
        names.setdefault(label, len(names))
    back = dict(map(reversed, names.items()))
    order = _canonical_order(tuple(tuple(names[a] for a in f) for f in factors),
                             tuple(names[a] for a in output),
                             tuple(sizes[back[n]] for n in range(len(names))), itemsize)
    return Order(tuple(tuple(back[n] for n in kept) for kept in order.kept), order.tree,
                 order.cost)


@functools.lru_cache(maxsize=4096)
def _canonical_order(factors: tuple[Labels, ...], output: Labels, sizes: tuple[int, ...],
                     itemsize: int) -> Order:
    sizes = dict(enumerate(sizes))
    count = len(factors)
    if not count:
        return Order((), None, Cost())
    kept: list[Labels] = []
    cost = Cost()
    for i, labels in enumerate(factors):
        elsewhere = set(output).union(*(factors[j] for j in range(count) if j != i))
        own = tuple(dict.fromkeys(a for a in labels if a in elsewhere))
        kept.append(own)
        if len(own) != len(labels):  # sums its own labels out (or takes a diagonal)
            cost += Cost(vector_flops=_elements(labels, sizes),
                         bytes=itemsize * (_elements(labels, sizes) + _elements(own, sizes)))
    # label sets as bit masks, their element counts memoised: the search's inner loop is
    # arithmetic on ints
    bits = {a: 1 << n for n, a in enumerate(sorted(set(output).union(*kept)))}
    masks = [sum(bits[a] for a in set(labels)) for labels in kept]
    wanted = sum(bits[a] for a in set(output))
    counts: dict[int, int] = {0: 1}
    for label, bit in bits.items():  # each mask's count from the mask without its top bit
        counts.update({mask | bit: n * sizes[label] for mask, n in list(counts.items())})
    elements = counts.__getitem__

    full = (1 << count) - 1
    needed = {}
    for subset in range(1, full + 1):
        inside = outside = 0
        for i in range(count):
            if subset >> i & 1:
                inside |= masks[i]
            else:
                outside |= masks[i]
        needed[subset] = inside & (outside | wanted)
    tensor_s, vector_s, byte_s = 2 / TENSOR_FLOPS_PER_S, 1 / VECTOR_FLOPS_PER_S, (
        itemsize / BYTES_PER_S)
    best: dict[int, tuple[float, object]] = {1 << i: (0.0, i) for i in range(count)}
    for subset in sorted(range(1, full + 1), key=lambda s: bin(s).count("1")):
        if subset in best:
            continue
        low, out = subset & -subset, needed[subset]
        choice = (math.inf, None)
        part = (subset - 1) & subset
        while part:
            if part & low:
                rest = subset ^ part
                a, b = needed[part], needed[rest]
                joint = a | b
                step = (elements(a) + elements(b) + elements(out)) * byte_s + elements(joint) * (
                    tensor_s if joint & ~out else vector_s)
                total = best[part][0] + best[rest][0] + step
                if total < choice[0]:
                    choice = (total, (best[part][1], best[rest][1]))
            part = (part - 1) & subset
        best[subset] = choice
    tree = best[full][1]
    return Order(tuple(kept), tree, cost + _replayed(tree, kept, output, sizes, itemsize)[2])


def _replayed(tree: object, kept: Sequence[Labels], output: Labels, sizes: dict[int, int],
              itemsize: int) -> tuple[set[int], list[int], Cost]:
    """The labels ``tree``'s result keeps, its factors and the cost of its contractions."""
    if isinstance(tree, int):
        return set(kept[tree]), [tree], Cost()
    (a, left, x), (b, right, y) = (_replayed(part, kept, output, sizes, itemsize)
                                   for part in tree)  # type: ignore[union-attr]
    inside = left + right
    needed = set(output).union(*(kept[n] for n in range(len(kept)) if n not in inside))
    out = (a | b) & needed
    step = pair_cost(tuple(a), tuple(b), tuple(out), sizes, itemsize)
    return out, inside, x + y + step


@dataclass(frozen=True)
class _Plan:
    """A network ready to run: per term its coefficient, factors (input positions, the factor
    or the plan of a sum, labels) and order; the output's labels and shape."""

    terms: tuple[tuple[float, tuple[tuple[tuple[int, ...], Factor | _Plan, Labels], ...], Order],
                 ...]
    output: Labels
    sizes: dict[int, int]
    shape: tuple[int, ...]
    dtype: torch.dtype
    #: the labels a convolution of the segment contracted (:attr:`.network.Network.convolved`)
    convolved: frozenset[int] = frozenset()


def _letters(labels: Sequence[int], names: dict[int, str]) -> str:
    return "".join(names[a] for a in labels)


def _prepared(tensors: Sequence[torch.Tensor], positions: tuple[int, ...],
              factor: Factor | _Plan, labels: Labels, kept: Labels, plan: _Plan,
              names: dict[int, str], done: dict[int, torch.Tensor]) -> torch.Tensor:
    """One factor as its atoms (broadcast dims taken once; a sum computed first, once where
    it is read twice: ``done``, by plan), its own labels summed out."""
    if isinstance(factor, _Plan):
        if id(factor) not in done:
            done[id(factor)] = _run(factor, tensors, done)
        value = done[id(factor)]
    else:
        value = tensors[positions[0]] if factor.make is None else factor.make(
            *(tensors[p] for p in positions))
        for dim, group in reversed(list(enumerate(factor.dims))):
            if not group and value.shape[dim] != 1:
                value = value.narrow(dim, 0, 1)
    value = value.reshape([plan.sizes[a] for a in labels])
    if labels != kept:
        value = torch.einsum(f"{_letters(labels, names)}->{_letters(kept, names)}", value)
    return value


def _scales(coeffs: Sequence[float]) -> list[float | None]:
    """Per term, the number its smallest factor is multiplied by (None: none, the term is
    added, or subtracted for −1): a coefficient other than ±1, and the first −1 where every
    term has −1 (there is nothing to subtract it from)."""
    negated = all(c == -1 for c in coeffs)
    return [None if c == 1 or (c == -1 and not (negated and n == 0)) else c
            for n, c in enumerate(coeffs)]


def _run(plan: _Plan, tensors: Sequence[torch.Tensor],
         done: dict[int, torch.Tensor] | None = None) -> torch.Tensor:
    done = {} if done is None else done
    names = {a: _LETTERS[i] for i, a in enumerate(plan.sizes)}
    parts = []
    scales = _scales([coeff for coeff, *_ in plan.terms])
    for (coeff, factors, order), scale in zip(plan.terms, scales, strict=True):
        values = [(_prepared(tensors, *factor, kept, plan, names, done), kept)
                  for factor, kept in zip(factors, order.kept, strict=True)]
        if values and scale is not None:  # the coefficient on the smallest factor
            small = min(range(len(values)), key=lambda i: values[i][0].numel())
            values[small] = (values[small][0] * scale, values[small][1])
        value, labels = _contract(values, order.tree, plan, names) if values else (
            torch.full((), coeff, dtype=plan.dtype, device=tensors[0].device if tensors
                       else None), ())
        ordered = tuple(a for a in plan.output if a in labels)
        if ordered != labels:
            value = torch.einsum(f"{_letters(labels, names)}->{_letters(ordered, names)}", value)
        subtracted = bool(values) and coeff == -1 and scale is None
        parts.append((value.reshape([plan.sizes[a] if a in labels else 1 for a in plan.output]),
                      subtracted))
    if not parts:
        return torch.zeros(plan.shape, dtype=plan.dtype)
    # the small terms added first, from one that is not subtracted
    parts.sort(key=lambda part: part[0].numel())
    start = next(n for n, part in enumerate(parts) if not part[1])
    total = parts[start][0]
    for n, (value, subtracted) in enumerate(parts):
        if n != start:
            total = total - value if subtracted else total + value
    full = total.expand([plan.sizes[a] for a in plan.output]).reshape(plan.shape)
    # a replacement that is an input (terms that cancel to one of them) is a copy of it
    aliased = any(torch._C._is_alias_of(full, t) for t in tensors)
    return full.clone(memory_format=torch.contiguous_format) if aliased else full.contiguous()


def _contract(values: list[tuple[torch.Tensor, Labels]], tree: object, plan: _Plan,
              names: dict[int, str]) -> tuple[torch.Tensor, Labels]:
    """The factors of ``tree`` contracted pairwise, each step keeping the labels the rest or
    the output need."""
    value, labels, _ = _walked(values, tree, plan, names)
    return value, labels


def _walked(values: list[tuple[torch.Tensor, Labels]], node: object, plan: _Plan,
            names: dict[int, str]) -> tuple[torch.Tensor, Labels, list[int]]:
    """:func:`_contract` of the subtree ``node``, and the positions of the values it read (a
    function of the module: a closure that calls itself is a reference cycle, garbage only the
    cyclic collector frees)."""
    if isinstance(node, int):
        return (*values[node], [node])
    left, right = (_walked(values, part, plan, names) for part in node)  # type: ignore[union-attr]
    inside = left[2] + right[2]
    elsewhere = set(plan.output) | {a for i, (_, ls) in enumerate(values) if i not in inside
                                    for a in ls}
    joint = tuple(dict.fromkeys(left[1] + right[1]))
    out = tuple(a for a in joint if a in elsewhere)
    convolved = _convolved(left[:2], right[:2], out, plan.convolved, names)
    if convolved is not None:
        return convolved, out, inside
    equation = f"{_letters(left[1], names)},{_letters(right[1], names)}->{_letters(out, names)}"
    return torch.einsum(equation, left[0], right[0]), out, inside


def _convolved(left: tuple[torch.Tensor, Labels], right: tuple[torch.Tensor, Labels],
               out: Labels, channels: frozenset[int], names: dict[int, str]) -> (
    torch.Tensor | None
):
    """A pair that contracts one label a convolution of the segment contracted, and shares no
    other, as that convolution: a 1×1 one over the rest of the image's labels (the weight's
    other labels its output channels). A product the program ran as a convolution keeps the
    permission it ran under (fp32 convolutions on TF32 tensor cores by PyTorch's default, where
    an fp32 ``bmm`` is IEEE): a DenseNet transition's 1×1 convolution, pooled first, is still
    one. None for any other pair (an ``einsum``)."""
    shared = set(left[1]) & set(right[1])
    if len(shared) != 1 or not shared <= channels or shared & set(out):
        return None
    (channel,) = shared
    # the image is the operand with the most elements (the weight's rows are its channels)
    (image, seen), (weight, taps) = sorted((left, right), key=lambda pair: -pair[0].numel())
    rest, kernels = [a for a in seen if a != channel], [a for a in taps if a != channel]
    count = image.shape[seen.index(channel)]
    x = torch.einsum(f"{_letters(seen, names)}->{_letters([channel, *rest], names)}", image)
    w = torch.einsum(f"{_letters(taps, names)}->{_letters([*kernels, channel], names)}", weight)
    y = torch.conv1d(x.reshape(1, count, -1), w.reshape(-1, count, 1))
    y = y.reshape([*w.shape[:-1], *x.shape[1:]])
    return torch.einsum(f"{_letters([*kernels, *rest], names)}->{_letters(out, names)}", y)


_COPIES = (aten.clone, aten.alias)
#: an add of terms is a root only where a common factor is taken out (the terms of an add
#: are otherwise contracted as the products before it would be)
_ADDS = (aten.add, aten.sub)
_ROOTS = [*_SUMS, aten.mm, aten.addmm, aten.bmm, aten.baddbmm, aten.mv, *_ADDS]


def _may_gain(graph: Graph, root: int) -> bool:
    """Whether the search can find anything: an operand the program computed with a segment
    op, or a constant (most products read a nonlinearity's output or a parameter: no)."""
    op = graph.op(root)
    for ref in op.reads:
        while True:  # through copies (a ``contiguous`` before a product)
            if ref.value_id in graph.known:
                return True
            found = graph.producer(ref)
            if found is None or found[1].func is None:
                break
            producer = found[1]
            written = next(w for w in producer.writes if w.value_id == ref.value_id)
            # the whole value (a chunk of a product is no linear map of its operands' whole)
            if ref.elements < written.elements or not (
                lookup(STEPS, producer) is not None or not producer.reads
            ):
                break
            if producer.func.overloadpacket not in _COPIES:
                return True
            ref = producer.reads[0]
    return False


def _summands(graph: Graph, ref: TensorRef) -> list[TensorRef]:
    """The operands of the chain of adds ``ref`` reads, through the adds a walk goes through."""
    producer = graph.producer(ref)
    if producer is None or producer[1].func is None or (
        producer[1].func.overloadpacket not in _ADDS
    ) or not transparent(graph, ref, producer[1]):
        return [ref]
    return [r for read in producer[1].reads for r in _summands(graph, read)]


def _shares_a_value(graph: Graph, root: int) -> bool:
    """Whether two terms of the sum the add ``root`` ends (its operands, or theirs where an
    operand is an add of its own) start from a common value, without which no factor is
    common to two terms (most adds: a residual connection, a bias)."""
    reads = graph.op(root).reads
    if len(reads) != 2:
        return False
    seen: set[int] = set()
    for ref in (r for read in reads for r in _summands(graph, read)):
        sources = leaf_values(graph, ref)
        if sources & seen:
            return True
        seen |= sources
    return False


def _term_of_a_sum(graph: Graph, root: int) -> bool:
    """Whether the add ``root`` is a term of the one add that reads it, whose walk goes through
    it and makes a network (at most :data:`.network.MAX_TERMS` terms): that add takes the
    whole sum. Rewritten here, in the same round, the first terms would be grouped alone
    (2AB − 2AE = A(2B − 2E)) and the later terms could no longer join them in a cheaper
    factoring of all of them (AB + … + GB − 2GE of rank 2 was charged 3 products)."""
    out = graph.op(root).writes[0]
    readers = graph.readers.get(out.value_id, ())
    if len(readers) != 1 or graph.op(readers[0]).func.overloadpacket not in _ADDS or not (
        transparent(graph, out, graph.op(root))
    ):
        return False
    reader = graph.op(readers[0])
    walk = Walk(graph)
    groups = walk.net.fresh(reader.writes[0].shape)
    return lookup(STEPS, reader)(walk, reader, readers[0], groups) is not None


def _written_seconds(graph: Graph, root: int, ops: set[int]) -> float:
    """The compute seconds of the segment's ops as written (``root`` and ``ops``, those its
    walk went through), each op whose value other segments read too at the share of its
    readers in this one: a rewrite that contracts through a value two segments read saves it
    only where the other contracts through it too (two blocks of rows, each a product with
    one value bᵀ·aᵀ, each contracted through it: the product computed twice; two sums of one
    product take half of it each, and both are rewritten)."""
    seconds = 0.0
    segment = {root, *ops}
    for index in segment:
        record = graph.record(index)
        readers = {r for w in record.writes for r in graph.readers.get(w.value_id, ())}
        share = len(readers & segment) / len(readers) if readers and index != root else 1
        seconds += share * Cost(record.flops.tensor, record.flops.vector).compute_seconds
    return seconds


def _planned(net: Network, terms: Sequence[Term], output: Labels, out: TensorRef,
             inputs: dict[TensorRef, int], done: dict[object, _Plan]) -> tuple[_Plan, Cost] | None:
    """``terms`` over ``output`` ready to run and their cost (a sum's terms planned the same
    way, over its labels); ``inputs`` collects the values read, each numbered once, and
    ``done`` the sums planned (:func:`.factors.shared_key`): one read again is computed once
    and charged once."""
    planned = []
    cost = Cost()
    itemsize = out.itemsize
    elements = _elements(output, net.sizes)
    for term, scale in zip(terms, _scales([term.coeff for term in terms]), strict=True):
        factors = []
        for factor in term.factors:
            if isinstance(factor, Sum):
                key = shared_key(net, factor)
                if key not in done:
                    inner = _planned(net, factor.terms, factor.labels, out, inputs, done)
                    if inner is None:
                        return None
                    done[key] = inner[0]
                    cost += inner[1]
                factors.append(((), done[key], factor.labels))
                continue
            if any(ref.dtype != out.dtype for ref in factor.refs):
                return None
            positions = tuple(inputs.setdefault(ref, len(inputs)) for ref in factor.refs)
            factors.append((positions, factor, atoms(net, factor)))
        order = best_order([labels for *_, labels in factors], output, net.sizes, itemsize)
        # a term after the first is added to (or subtracted from) the output; a coefficient
        # multiplies the smallest factor (:func:`_run`)
        added = elements if planned else 0
        scaled = min((_elements(kept, net.sizes) for kept in order.kept), default=0) if (
            scale is not None) else 0
        planned.append((term.coeff, tuple(factors), order))
        cost += order.cost + Cost(vector_flops=added + scaled,
                                  bytes=itemsize * (3 * added + 2 * scaled))
    if len(net.sizes) > len(_LETTERS):
        return None
    shape = tuple(net.sizes[a] for a in output)
    return _Plan(tuple(planned), output, dict(net.sizes), shape, getattr(torch, out.dtype),
                 frozenset(net.atoms(sorted(net.convolved)))), cost


def _plan(net: Network, terms: Sequence[Term], out: TensorRef, output: Labels) -> tuple[
    _Plan, tuple[TensorRef, ...], Cost
] | None:
    """``terms`` ready to run as the root's value ``out``, their inputs and their cost."""
    inputs: dict[TensorRef, int] = {}
    found = _planned(net, terms, output, out, inputs, {})
    if found is None:
        return None
    plan, cost = found
    return replace(plan, shape=tuple(out.shape[d] for d in _layout(out))), tuple(inputs), cost


def _weigh(net: Network, out: TensorRef) -> Weigh:
    """The cost the search over groupings weighs a set of terms by: their plan's (compute
    first: the bound charges FLOPs, the bytes only choose among equal compute)."""
    def weigh(terms: Sequence[Term], output: Labels) -> tuple[float, float] | None:
        found = _planned(net, terms, output, out, {}, {})
        return None if found is None else (found[1].compute_seconds, found[1].seconds)

    return weigh


@algebra_rule(_ROOTS, first=True)
def contracted_network(graph: Graph, root: int) -> Match | None:
    """The segment ending at ``root`` (:mod:`.network`) evaluated in its cheapest order, where
    that saves work on the segment's ops as written."""
    op = graph.op(root)
    out = op.writes[0] if op.writes else None
    if out is None or out.dtype not in FLOATS or root in graph.inserted or not _may_gain(
        graph, root
    ):
        return None
    adds = op.func.overloadpacket in _ADDS
    if adds and (not _shares_a_value(graph, root) or _term_of_a_sum(graph, root)):
        return None
    walk = Walk(graph)
    groups = walk.net.fresh(out.shape)
    terms = lookup(STEPS, op)(walk, op, root, groups)
    if terms is None:
        return None
    layout = _layout(out)
    output = walk.net.atoms([a for d in layout for a in groups[d]])
    terms = without_deltas(walk.net, terms, output)
    if terms is None or len(set(output)) != len(output):
        return None
    terms = read_at(graph, terms, root)
    factored = factored_terms(walk.net, terms, output, _weigh(walk.net, out))
    # as written, and with the common factors taken out (their sums' adds charged), the
    # cheaper; terms that all cancel are 0 (the segment's value: nothing is computed)
    # (a shared sub-product named leaves as many terms, each reading it: at a term of a sum
    # it is left to the add, where the other terms may read it too: a⁴ of a⁴ + a³ + a²)
    grouped = factored and factored != list(terms) and (
        len(factored) < len(terms) or adds or not _term_of_a_sum(graph, root))
    # named for a factor read fewer times; terms only added at their own size (two biases
    # broadcast alike) are the order's
    candidates = {PRODUCT_RULE: None if adds else _plan(walk.net, terms, out, output)}
    if grouped or terms and not factored:
        candidates[_named_for(terms, factored)] = _plan(walk.net, factored, out, output)
    found = [(rule, p) for rule, p in candidates.items() if p is not None]
    if not found:
        return None
    name, (plan, inputs, cost) = min(
        found, key=lambda item: (item[1][2].compute_seconds, item[1][2].seconds))
    segment = {root, *walk.net.ops}
    # the bound charges FLOPs and compulsory bytes, which an order does not change: the
    # intermediates' bytes only choose among orders of equal compute (a sum of a convolution
    # through views, pools or a batch norm is :mod:`.convs`'s, which walks them itself)
    written = _written_seconds(graph, root, walk.net.ops)
    if cost.compute_seconds >= (1 - MIN_GAIN) * written:
        return None
    first = min(segment)
    if graph.written_between(inputs, first, root):
        return None
    summed = op.func.overloadpacket in _SUMS
    # a sum is named by the map it moved through, a product by itself
    anchor = max(segment, key=lambda i: graph.record(i).total_flops) if summed else root
    return Match(SUM_RULE if summed else name, root, inputs, _builder(plan, layout), anchor)


def _named_for(terms: Sequence[Term], factored: Sequence[Term]) -> str:
    """The rule that took ``terms`` to ``factored``: terms that cancelled, the others left as
    written (all of them: 0; (I − W)·X + W·X: X), are x − x = 0; a factor read fewer times
    is a common factor taken out; else the order's."""
    if len(factored) < len(terms) and all(term in terms for term in factored):
        return CANCEL_RULE
    return FACTOR_RULE if reads(factored) < reads(terms) else PRODUCT_RULE


def _layout(out: TensorRef) -> tuple[int, ...]:
    """The dims of ``out`` from the outermost in its storage (an add of a transposed operand
    writes its output transposed): the order the replacement computes them in."""
    order = tuple(sorted(range(len(out.shape)), key=lambda d: (-out.strides[d], d)))
    # a plain layout, or a permutation of one (size-1 dims anywhere)
    expected = 1
    for d in reversed(order):
        if out.shape[d] > 1 and out.strides[d] != expected:
            return tuple(range(len(out.shape)))
        expected *= out.shape[d]
    return order


def _builder(plan: _Plan, layout: tuple[int, ...]) -> Callable[..., torch.Tensor]:
    back = tuple(layout.index(d) for d in range(len(layout)))

    def build(*tensors: torch.Tensor) -> torch.Tensor:
        value = _run(plan, tensors)
        return value if back == tuple(range(len(back))) else value.permute(back)

    return build
