"""Linear segments as tensor networks: the value a sum, a pool or a product computes from the
linear (multilinear) ops before it, written as one sum of einsum terms over the values the
segment starts from.

Every op of such a segment is an index map over the reals: a product contracts an index
(Σₖ A[i, k]·B[k, j]), a broadcasting multiply multiplies factors, an add adds terms, a scale
scales them, a sum or a mean sums an index out, a non-overlapping average pool splits an index
into (window, tap) and sums the taps, an eval-mode batch norm multiplies by a per-channel factor
and adds a per-channel term. Views, reshapes, permutes, transposes, ``expand`` and
``contiguous`` copies move no value: they rename indices (:func:`_onto_written`, by the strides
of the two views of one storage). Constants the program makes are structured factors known from
the op that made them, at any size: ``ones``/``full`` (no factor, a coefficient), ``zeros``
(no term), ``eye`` (a δ of its term, whose two indices are made one in that term alone:
:func:`without_deltas`). So every spelling of the same algebra (a mean or a
sum, a transpose before it, a ``contiguous`` copy, a view of a 3-D ``Linear``, ``einsum``) is
the same network, and :mod:`.contraction` chooses its cheapest evaluation order.

The walk goes through a value only where the program keeps it for nothing else: no output, one
writer (no in-place change), and every reader an op of a segment (:data:`STEPS`), so that a
product read by two sums is contracted once per sum and computed by neither. Anything else (a
nonlinearity, a parameter, an input) is a leaf: a factor as the program reads it.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

import torch

from ...costs import OpKey, aten, lookup
from ...trace.refs import TensorRef, TracedOp
from ._core import Graph, reduced_dims, registers_into, scalar_argument

Labels = tuple[int, ...]
#: per dim of a tensor, the labels (atoms) it spans in row-major order; () for a size-1 dim
#: or a broadcast (stride-0) one
Groups = tuple[Labels, ...]

#: most terms a network may have (a product of sums multiplies their counts)
MAX_TERMS = 8
#: most factors a term may have (the order search is exponential in it)
MAX_FACTORS = 8
FLOATS = ("float32", "float16", "bfloat16", "float64")


@dataclass(frozen=True)
class Factor:
    """One factor of a term: ``refs`` as the program reads them (``make(*refs)`` where set: a
    per-channel scale computed from several), with ``dims`` naming each of its dims' labels."""

    refs: tuple[TensorRef, ...]
    dims: Groups
    make: Callable[..., torch.Tensor] | None = None


@dataclass(frozen=True)
class Term:
    """coeff · Π factors, summed over the labels no output dim names."""

    coeff: float
    factors: tuple[Factor | Sum | Delta, ...]


@dataclass(frozen=True)
class Sum:
    """A factor that is a sum of terms (made by taking a common factor out of them:
    :mod:`.factors`), over ``labels``, those it shares with the rest of its term or the output;
    every other label of one of its terms is summed inside that term."""

    terms: tuple[Term, ...]
    labels: Labels


Terms = list[Term]


@dataclass(frozen=True)
class Delta:
    """δ over the labels of two dims (an ``eye``'s rows and columns), a factor of the walk's
    terms only: :func:`without_deltas` sums it out of its own term."""

    dims: Groups


@dataclass
class Network:
    """The labels of one network under construction: their sizes and the splits the views made
    (a label seen as several atoms)."""

    sizes: dict[int, int] = field(default_factory=dict)
    parts: dict[int, Labels] = field(default_factory=dict)
    #: the ops whose values the network computes (their work is what it may save)
    ops: set[int] = field(default_factory=set)
    #: the labels a convolution contracts (its input channels): a contraction of one of them
    #: is emitted as a convolution, under the convolution's precision
    convolved: set[int] = field(default_factory=set)
    #: labels (or a factor's dims) → their atoms, as :meth:`atoms` found them until the next
    #: :meth:`split` (the search asks for the same few millions of times)
    _found_atoms: dict[object, Labels] = field(default_factory=dict, repr=False, compare=False)

    def new(self, size: int) -> int:
        label = len(self.sizes)
        self.sizes[label] = size
        return label

    def fresh(self, shape: Sequence[int]) -> Groups:
        return tuple((self.new(n),) if n > 1 else () for n in shape)

    def atoms(self, labels: Sequence[int]) -> Labels:
        key = tuple(labels)
        found = self._found_atoms.get(key)
        if found is None:
            found = self._found_atoms[key] = tuple(itertools.chain.from_iterable(
                self.atoms(self.parts[label]) if label in self.parts else (label,)
                for label in key))
        return found

    def dims_atoms(self, dims: Groups) -> Labels:
        """The atoms of a factor's dims, in order (each dim's :meth:`atoms`)."""
        found = self._found_atoms.get(dims)
        if found is None:
            found = self._found_atoms[dims] = tuple(itertools.chain.from_iterable(
                self.atoms(group) for group in dims))
        return found

    def split(self, label: int, sizes: Sequence[int]) -> Labels:
        """``label`` (an atom) seen as atoms of ``sizes``, row-major."""
        self._found_atoms.clear()
        self.parts[label] = tuple(self.new(n) for n in sizes)
        return self.parts[label]


def dense(ref: TensorRef) -> bool:
    """Whether ``ref`` covers its elements once without gaps, in some order of its dims (a
    contiguous tensor, or one a pointwise op wrote in its input's permuted layout)."""
    expected = 1
    for stride, size in sorted((s, n) for s, n in zip(ref.strides, ref.shape, strict=True)
                               if n > 1):
        if stride != expected:
            return False
        expected *= size
    return True


def _onto_written(net: Network, read: TensorRef, groups: Groups, written: TensorRef) -> (
    Groups | None
):
    """The labels of ``written``'s dims, given those of ``read`` (a view of the same value):
    each read dim's atoms placed at their storage strides, split where a written dim begins
    inside one, then gathered per written dim. None unless the read covers every element once
    (a permutation, reshape or broadcast of the whole value, at the same offset)."""
    if read.offset != written.offset or not dense(written):
        return None
    placed: list[tuple[int, int]] = []  # (storage stride, atom)
    for size, stride, group in zip(read.shape, read.strides, groups, strict=True):
        if size == 1 or stride == 0:
            continue
        for atom in reversed(net.atoms(group)):
            placed.append((stride, atom))
            stride *= net.sizes[atom]
    placed.sort()
    expected = 1
    for stride, atom in placed:
        if stride != expected:
            return None
        expected *= net.sizes[atom]
    elements = math.prod(written.shape)
    if expected != elements:
        return None
    bounds = set()
    for size, stride in zip(written.shape, written.strides, strict=True):
        bounds |= {stride, stride * size}
    cut: list[tuple[int, int]] = []
    for stride, atom in placed:
        inner = sorted(b for b in bounds if stride < b < stride * net.sizes[atom])
        if not inner:
            cut.append((stride, atom))
            continue
        edges = [stride, *inner, stride * net.sizes[atom]]
        if any(high % low for low, high in itertools.pairwise(edges)):
            return None
        sizes = [high // low for low, high in itertools.pairwise(edges)][::-1]
        pieces = net.split(atom, sizes)
        cut.extend(zip(edges[-2::-1], pieces, strict=True))
    return tuple(
        tuple(atom for s, atom in sorted(cut, reverse=True) if stride <= s < stride * size)
        if size > 1 else ()
        for size, stride in zip(written.shape, written.strides, strict=True)
    )


def _aligned(ref: TensorRef, groups: Groups, shape: Sequence[int]) -> Groups | None:
    """The labels of ``ref``'s dims broadcast to an output of ``shape`` labelled ``groups``
    (aligned on the right; a size-1 dim is broadcast)."""
    lead = len(shape) - len(ref.shape)
    if lead < 0:
        return None
    out = []
    for d, size in enumerate(ref.shape):
        if size == shape[lead + d]:
            out.append(groups[lead + d])
        elif size == 1:
            out.append(())
        else:
            return None
    return tuple(out)


def _product(first: Terms | None, second: Terms | None) -> Terms | None:
    if first is None or second is None or len(first) * len(second) > MAX_TERMS:
        return None
    terms = [Term(a.coeff * b.coeff, a.factors + b.factors) for a in first for b in second]
    return None if any(len(t.factors) > MAX_FACTORS for t in terms) else terms


def _scaled(terms: Terms | None, c: float) -> Terms | None:
    if terms is None:
        return None
    return [Term(t.coeff * c, t.factors) for t in terms] if c else []


def _sum(*parts: Terms | None) -> Terms | None:
    if any(p is None for p in parts):
        return None
    terms = [t for p in parts for t in p]
    return terms if len(terms) <= MAX_TERMS else None


def _summed_over(net: Network, terms: Terms | None, labels: Labels) -> Terms | None:
    """``terms`` summed over ``labels``: a term without a factor along a label is constant
    along it, so its sum is |label| times it."""
    if terms is None:
        return None
    out = []
    for term in terms:
        present = {a for f in term.factors for g in f.dims for a in net.atoms(g)}
        missing = [a for a in net.atoms(labels) if a not in present]
        out.append(Term(term.coeff * math.prod(net.sizes[a] for a in missing), term.factors))
    return out


StepRule = Callable[["Walk", TracedOp, int, Groups], "Terms | None"]

#: aten op → its rule: (the walk, the op, its index, the labels of its output's dims) → its
#: output as terms over the values before it; None where it is no linear map of them
STEPS: dict[OpKey, StepRule] = {}


step = registers_into(STEPS)


#: ops that make a value from shapes alone (no reads): a constant factor, at any size
CONSTANTS = {aten.ones: 1.0, aten.ones_like: 1.0, aten.new_ones: 1.0, aten.zeros: 0.0,
             aten.zeros_like: 0.0, aten.new_zeros: 0.0}
FILLS = (aten.full, aten.full_like, aten.new_full)


@dataclass
class Walk:
    """One walk back from a root: the graph and the network it builds."""

    graph: Graph
    net: Network = field(default_factory=Network)

    def terms(self, ref: TensorRef, groups: Groups, reader: int) -> Terms | None:
        """The value ``ref`` reads (dims labelled ``groups``) as terms: through its producer's
        step where the value is the segment's alone, else one factor, a leaf."""
        if ref.dtype not in FLOATS:
            return None
        known = constant_of(self.graph, ref)
        found = self.graph.producer(ref)
        if known is not None:
            if found is not None and not found[1].reads:  # made here: its write is saved
                self.net.ops.add(found[0])
            return [Term(known, ())] if known else []
        # a broadcast (stride-0) dim holds one value: the factor does not vary along it
        own = tuple(() if s == 0 else g for s, g in zip(ref.strides, groups, strict=True))
        leaf = [Term(1.0, (Factor((ref,), own),))]
        if found is None:
            return leaf
        index, op = found
        written = next(w for w in op.writes if w.value_id == ref.value_id)
        mapped = _onto_written(self.net, ref, groups, written)
        if mapped is None:
            return leaf
        # a leaf read whole is read as written (a sum of it is then the plain sum of the op's
        # output that the op's own rules take)
        leaf = [Term(1.0, (Factor((written,), mapped),))]
        rule = lookup(STEPS, op)
        if rule is None or not self._transparent(ref, op):
            return leaf
        terms = rule(self, op, index, mapped)
        if terms is None:
            return leaf
        self.net.ops.add(index)
        return terms

    def _transparent(self, ref: TensorRef, op: TracedOp) -> bool:
        return transparent(self.graph, ref, op)


def transparent(graph: Graph, ref: TensorRef, op: TracedOp) -> bool:
    """Whether a walk may go through the value ``ref`` reads, which ``op`` wrote: the op made it
    from no reads (a constant), or no output keeps it, nothing writes it again, and every
    reader is a segment op (which computes its own share without it)."""
    if not op.reads:
        return True
    readers = graph.readers.get(ref.value_id, ())
    return (
        bool(readers)
        and ref.value_id not in graph.trace.output_value_ids
        and len(graph.writers.get(ref.storage_id, ())) == 1
        and all(lookup(STEPS, graph.op(r)) is not None for r in readers)
        and len(op.writes) >= 1 and op.writes[0].value_id == ref.value_id
    )


#: most ops the look-up for a shared value walks back from each operand of an add
MAX_SHARED_WALK = 64


def leaf_values(graph: Graph, ref: TensorRef) -> set[int]:
    """The values the walk from ``ref`` can reach as leaves: back through the segment ops it may
    go through (:func:`transparent`), up to :data:`MAX_SHARED_WALK` of them (then
    what is left counts as reached)."""
    found: set[int] = set()
    stack, passed = [ref], set()
    while stack and len(passed) < MAX_SHARED_WALK:
        ref = stack.pop()
        producer = graph.producer(ref)
        if producer is None or lookup(STEPS, producer[1]) is None or not transparent(
            graph, ref, producer[1]
        ):
            found.add(ref.value_id)
        elif producer[0] not in passed:
            passed.add(producer[0])
            stack.extend(producer[1].reads)
    return found | {r.value_id for r in stack}



def constant_of(graph: Graph, ref: TensorRef) -> float | None:
    """The one value every element of ``ref`` holds where a ``ones``/``zeros``/``full`` made it
    or it is known from shapes and constants with all elements equal; None otherwise."""
    found = graph.producer(ref)
    if found is not None and found[1].func is not None:
        packet = found[1].func.overloadpacket
        if packet in CONSTANTS:
            return CONSTANTS[packet]
        if packet in FILLS:
            value = found[1].argument("fill_value")
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                return float(value)
    value = graph.value(ref)
    if value is None or not value.numel() or not value.is_floating_point():
        return None
    first = value.reshape(-1)[0]
    return float(first) if bool((value == first).all()) else None


@step([aten.mm, aten.bmm, aten.mv])
def _matmul(walk: Walk, op: TracedOp, index: int, out: Groups) -> Terms | None:
    """(A @ B)[…, i, j] = Σₖ A[…, i, k]·B[…, k, j] (``mv``: no j)."""
    left, right = op.reads[-2:]
    k = (walk.net.new(left.shape[-1]),) if left.shape[-1] > 1 else ()
    if len(right.shape) == 1:  # mv
        terms = _product(walk.terms(left, (out[0], k), index), walk.terms(right, (k,), index))
    else:
        *batch, i, j = out
        terms = _product(walk.terms(left, (*batch, i, k), index),
                         walk.terms(right, (*batch, k, j), index))
    return _summed_over(walk.net, terms, k)


@step([aten.convolution])
def _one_tap_convolution(walk: Walk, op: TracedOp, index: int, out: Groups) -> Terms | None:
    """A convolution of one tap (a 1×1 filter, stride 1, no padding, one group, not
    transposed) is a product over the channels: out[b, o, …] = Σ_c x[b, c, …]·w[o, c, 1…] +
    bias[o] (``conv2d(x, w[:, :, None, None])`` is ``einsum('bchw,oc->bohw', x, w)``)."""
    source, weight, *bias = op.reads
    if op.argument("transposed") or op.argument("groups") != 1 or any(
        n != 1 for n in weight.shape[2:]
    ) or any(n != 1 for n in op.argument("stride")) or any(op.argument("padding")):
        return None
    batch, outputs, *spatial = out
    channels = (walk.net.new(source.shape[1]),) if source.shape[1] > 1 else ()
    walk.net.convolved.update(channels)
    terms = _summed_over(walk.net, _product(
        walk.terms(source, (batch, channels, *spatial), index),
        walk.terms(weight, (outputs, channels, *(() for _ in spatial)), index)), channels)
    if not bias:
        return terms
    return _sum(terms, walk.terms(bias[0], (outputs,), index))


@step([aten.addmm, aten.baddbmm])
def _affine_matmul(walk: Walk, op: TracedOp, index: int, out: Groups) -> Terms | None:
    """β·b + α·(A @ B): the bias an affine term, broadcast as it is read."""
    bias = op.reads[0]
    aligned = _aligned(bias, out, op.writes[0].shape)
    if aligned is None:
        return None
    beta, alpha = op.argument("beta", 1), op.argument("alpha", 1)
    return _sum(_scaled(walk.terms(bias, aligned, index), beta),
                _scaled(_matmul(walk, op, index, out), alpha))


def _binary_operands(op: TracedOp, out: Groups) -> tuple[float | None, list] | None:
    """A binary pointwise op's number operand (None for a tensor) and each tensor operand's
    dim groups aligned to the output's; None where an operand does not align or the op has
    not one tensor and a number, or two tensors."""
    number = scalar_argument(op, 1)
    groups = [_aligned(r, out, op.writes[0].shape) for r in op.reads]
    if None in groups or len(op.reads) != (1 if number is not None else 2):
        return None
    return number, groups


@step([aten.mul, aten.div])
def _multiply(walk: Walk, op: TracedOp, index: int, out: Groups) -> Terms | None:
    """a·b broadcast (a multilinear product: the terms of each multiplied out); a / c with c a
    number or a tensor (a factor 1/c, exact for nonzero c)."""
    divide = op.func.overloadpacket is aten.div
    if divide and op.argument("rounding_mode") is not None:
        return None
    operands = _binary_operands(op, out)
    if operands is None:
        return None
    number, groups = operands
    if number is not None:
        if divide and not number:
            return None
        return _scaled(walk.terms(op.reads[0], groups[0], index), 1 / number if divide else number)
    first = walk.terms(op.reads[0], groups[0], index)
    if not divide:
        return _product(first, walk.terms(op.reads[1], groups[1], index))
    divisor = op.reads[1]
    if divisor.dtype not in FLOATS:
        return None
    return _product(first, [Term(1.0, (Factor((divisor,), groups[1], torch.reciprocal),))])


@step([aten.add, aten.sub])
def _add(walk: Walk, op: TracedOp, index: int, out: Groups) -> Terms | None:
    """a ± α·b: the terms of both (a number: a constant term)."""
    sign = -1 if op.func.overloadpacket is aten.sub else 1
    alpha = op.argument("alpha", 1)
    operands = _binary_operands(op, out)
    if operands is None:
        return None
    number, groups = operands
    if number is not None:
        return _sum(walk.terms(op.reads[0], groups[0], index), [Term(sign * alpha * number, ())])
    return _sum(walk.terms(op.reads[0], groups[0], index),
                _scaled(walk.terms(op.reads[1], groups[1], index), sign * alpha))


@step([aten.neg])
def _negate(walk: Walk, op: TracedOp, index: int, out: Groups) -> Terms | None:
    return _scaled(walk.terms(op.reads[0], out, index), -1)


@step([aten.clone, aten.alias])
def _copy(walk: Walk, op: TracedOp, index: int, out: Groups) -> Terms | None:
    """A copy (``contiguous``) is its input, read as the copy's dims."""
    return walk.terms(op.reads[0], out, index)



@step([aten.sum, aten.mean])
def _reduce(walk: Walk, op: TracedOp, index: int, out: Groups) -> Terms | None:
    """Σ (a mean: ÷ the count) over the folded dims: each a fresh label no output names."""
    source = op.reads[0]
    if op.argument("dtype") is not None or source.dtype != op.writes[0].dtype:
        return None
    dims = reduced_dims(op)
    keep = bool(op.argument("keepdim", False))
    kept = iter(out)
    groups = []
    for d, size in enumerate(source.shape):
        if d in dims:
            groups.append((walk.net.new(size),) if size > 1 else ())
            if keep:
                next(kept)
        else:
            groups.append(next(kept))
    count = math.prod(source.shape[d] for d in dims)
    mean = op.func.overloadpacket is aten.mean
    summed = tuple(a for d in dims for a in groups[d])
    return _scaled(_summed_over(walk.net, walk.terms(source, tuple(groups), index), summed),
                   1 / count if mean else 1)


def _windows(walk: Walk, source: TensorRef, out: Groups, kernel: Sequence[int],
             divisor: int | None) -> tuple[Groups, Labels, float] | None:
    """An average pool whose windows tile its input (stride = kernel, no padding): each pooled
    dim n = out·k is (window, tap), the taps summed; the coefficient 1/Π k (or 1/divisor)."""
    spatial = len(kernel)
    lead = len(source.shape) - spatial
    groups = list(out[:lead])
    taps: list[int] = []
    for d, k in enumerate(kernel):
        size = source.shape[lead + d]
        windows = out[lead + d]
        if size % k:
            return None
        if k == 1:
            groups.append(windows)
            continue
        tap = (walk.net.new(k),)
        taps.extend(tap)
        if size == k:
            groups.append(tap)
            continue
        groups.append((*windows, *tap))
    return tuple(groups), tuple(taps), 1 / (divisor or math.prod(kernel))


_POOL_RANKS = {aten.avg_pool1d: 1, aten.avg_pool2d: 2, aten.avg_pool3d: 3}


@step(list(_POOL_RANKS))
def _pool(walk: Walk, op: TracedOp, index: int, out: Groups) -> Terms | None:
    kernel = list(op.argument("kernel_size"))
    spatial = _POOL_RANKS[op.func.overloadpacket]
    kernel = kernel * spatial if len(kernel) == 1 else kernel
    stride = list(op.argument("stride") or kernel)
    stride = stride * len(kernel) if len(stride) == 1 else stride
    padding = op.argument("padding", 0)
    padding = [padding] if isinstance(padding, int) else list(padding)
    if stride != kernel or any(padding) or op.argument("ceil_mode", False):
        return None
    found = _windows(walk, op.reads[0], out, kernel, op.argument("divisor_override"))
    if found is None:
        return None
    groups, taps, coeff = found
    return _scaled(_summed_over(walk.net, walk.terms(op.reads[0], groups, index), taps), coeff)


@step([aten._adaptive_avg_pool2d, aten._adaptive_avg_pool3d, aten.adaptive_avg_pool1d])
def _adaptive_pool(walk: Walk, op: TracedOp, index: int, out: Groups) -> Terms | None:
    """An adaptive average pool whose output size divides its input's: windows of equal size
    that tile it."""
    sizes = list(op.argument("output_size"))
    source = op.reads[0]
    inputs = source.shape[len(source.shape) - len(sizes):]
    if any(n % o for n, o in zip(inputs, sizes, strict=True)):
        return None
    kernel = [n // o for n, o in zip(inputs, sizes, strict=True)]
    found = _windows(walk, source, out, kernel, None)
    if found is None:
        return None
    groups, taps, coeff = found
    return _scaled(_summed_over(walk.net, walk.terms(source, groups, index), taps), coeff)


def _channel_scale(eps: float) -> Callable[..., torch.Tensor]:
    def make(variance: torch.Tensor, *weight: torch.Tensor) -> torch.Tensor:
        scale = torch.rsqrt(variance + eps)
        return scale * weight[0] if weight else scale

    return make


def _channel_shift(eps: float) -> Callable[..., torch.Tensor]:
    def make(mean: torch.Tensor, variance: torch.Tensor, *affine: torch.Tensor) -> torch.Tensor:
        shift = -mean * _channel_scale(eps)(variance, *affine[:1])
        return shift + affine[1] if len(affine) == 2 else shift

    return make


# cudnn's and MIOpen's (a trace on fake CUDA tensors) take the same arguments, ε as ``epsilon``
@step([aten.native_batch_norm, aten._native_batch_norm_legit_no_training, aten.cudnn_batch_norm,
       aten.miopen_batch_norm])
def _batch_norm_eval(walk: Walk, op: TracedOp, index: int, out: Groups) -> Terms | None:
    """A batch norm with running statistics (eval): x·s[c] + t[c], s = γ/√(σ² + ε),
    t = β − μ·s — a per-channel factor and a per-channel term."""
    names = ("weight", "bias", "running_mean", "running_var")
    if op.argument("training", False) or any(
        op.argument(n) is None for n in names[2:]
    ):
        return None
    tensors = iter(op.reads)
    source = next(tensors)
    refs = {n: next(tensors) for n in names if op.argument(n) is not None}
    if len(op.reads) != 1 + len(refs):
        return None
    channel = (out[1],)
    affine = tuple(refs[n] for n in ("weight", "bias") if n in refs)
    if len(affine) == 1:  # a weight without a bias, or the reverse: which one is unclear
        return None
    eps = op.argument("eps", op.argument("epsilon"))
    scale = Factor((refs["running_var"], *affine[:1]), channel, _channel_scale(eps))
    shift = Factor((refs["running_mean"], refs["running_var"], *affine), channel,
                   _channel_shift(eps))
    return _sum(_product(walk.terms(source, out, index), [Term(1.0, (scale,))]),
                [Term(1.0, (shift,))])


@step([aten.eye])
def _eye(walk: Walk, op: TracedOp, index: int, out: Groups) -> Terms | None:
    """eye(n)[i, j] = δᵢⱼ."""
    return [Term(1.0, (Delta(out),))]


#: in-place ops that scale a whole value by a number c: the factor the old value is the new
#: one times (a.mul_(c): a = a'/c; a.div_(c): a = c·a'), c ≠ 0
IN_PLACE_SCALES: dict[object, Callable[[float], float]] = {
    aten.mul_: lambda c: 1 / c, aten.div_: lambda c: c,
}


def _unscaled(op: TracedOp) -> float | None:
    """What the value ``op`` scaled in place was, times the value it wrote; None unless ``op``
    is a known nonzero scale of a whole storage."""
    rule = IN_PLACE_SCALES.get(op.func.overloadpacket) if op.func is not None else None
    number = scalar_argument(op, 1)
    if rule is None or not number or op.argument("rounding_mode") is not None or (
        len(op.writes) != 1 or op.writes[0].elements < op.writes[0].storage_elements
    ):
        return None
    return rule(number)


def _at(graph: Graph, ref: TensorRef, root: int) -> tuple[TensorRef, float] | None:
    """``ref`` read as the value its storage holds when op ``root`` runs, and the number that
    value is multiplied by to give the one ``ref`` reads, where only whole in-place scales
    wrote the storage between; None where nothing did or another op did."""
    value, ratio = ref.value_id, 1.0
    made = graph.producers.get(value, -1)
    for index in graph.writers.get(ref.storage_id, ()):
        if not made < index < root:
            continue
        op = graph.op(index)
        factor = _unscaled(op)
        if factor is None or not op.reads or op.reads[0].value_id != value:
            return None
        value, ratio = op.writes[0].value_id, ratio * factor
    return None if value == ref.value_id else (replace(ref, value_id=value), ratio)


def read_at(graph: Graph, terms: Terms, root: int) -> Terms:
    """``terms`` with each factor that its storage's in-place scales changed before ``root``
    read as the value there, times the ratio: ``y = a @ b; a.mul_(2); y - a @ b`` is
    a'·b/2 − a'·b (a' the doubled a), one product where the old a is no longer held."""
    out = []
    for term in terms:
        coeff, factors = term.coeff, []
        for factor in term.factors:
            found = _at(graph, factor.refs[0], root) if isinstance(factor, Factor) and (
                factor.make is None) else None
            if found is not None:
                factor = replace(factor, refs=(found[0],))
                coeff *= found[1]
            factors.append(factor)
        out.append(Term(coeff, tuple(factors)))
    return out


def _named(names: dict[int, int], label: int) -> int:
    while label in names:
        label = names[label]
    return label


def without_deltas(net: Network, terms: Terms, output: Labels) -> Terms | None:
    """``terms`` with each δ summed out of its own term: Σⱼ δᵢⱼ·f(j) = f(i), the summed label
    named as the other in that term alone, so (I − W)·X + W·X is X − W·X + W·X, which cancels
    to X (the labels made one for the whole network would read W·X as its diagonal). A label
    no factor then carries is summed as |label| ones (Σᵢ δᵢᵢ = n). None where both of a δ's
    labels are the output's (a diagonal output) or a row and a column differ in size."""
    out = []
    for term in terms:
        names: dict[int, int] = {}
        kept = set()
        for delta in (f for f in term.factors if isinstance(f, Delta)):
            rows, columns = (net.atoms(group) for group in delta.dims)
            if [net.sizes[a] for a in rows] != [net.sizes[a] for a in columns]:
                return None
            for row, column in zip(rows, columns, strict=True):
                row, column = _named(names, row), _named(names, column)
                if column in output:
                    row, column = column, row
                if row != column:
                    if column in output:
                        return None
                    names[column] = row
                kept.add(row)
        factors = tuple(
            Factor(f.refs, tuple(tuple(_named(names, a) for a in net.atoms(group))
                                 for group in f.dims), f.make)
            for f in term.factors if isinstance(f, Factor))
        carried = {a for f in factors for group in f.dims for a in group}
        ones = {_named(names, a) for a in kept} - carried - set(output)
        out.append(Term(term.coeff * math.prod(net.sizes[a] for a in ones), factors))
    return out
