"""Stage 3: group ops into kernels — Inductor-style fusion, eager (one kernel per op) and the
compulsory traffic of perfect fusion.

The fused plan follows what ``torch.compile`` (Inductor, CUDA backend, default settings) does
with the same graph, in its order:

1. **FX passes**: common-subexpression elimination (two identical calls on the same input values
   are computed once), no-op removal (a clone, a one-input ``cat``, ``pow(x, 1)``… is its input:
   ``post_grad.remove_noop_ops``), dead-code elimination and ``addmm`` unfusing (the bias add of
   an ``addmm`` whose users are all pointwise becomes a pointwise op those users absorb:
   ``post_grad.unfuse_bias_add_to_pointwise``).
2. **Lowering**: a convolution's bias becomes a pointwise add (``kernel/conv.py``); a matmul over
   an inner dim of 1 and a reduction over fewer than 8 elements become pointwise; ``cat``
   becomes either a pointwise kernel (``pointwise_cat``) or no kernel at all (``ConcatKernel``:
   each producer writes straight into its slice of the output); softmaxes and norms become
   statistics plus a pointwise normalize; pointwise ops are *inlined* into the nodes that read
   them unless Inductor realizes them into a buffer (graph outputs, inputs of extern kernels,
   mutated buffers, values with many reads).
3. **Scheduling**: the realized values define scheduler nodes — ``nop`` (views, no kernel),
   ``extern`` (library calls: cuBLAS, cuDNN, attention, scatter and ops without a rule), and
   ``pointwise`` / ``reduction`` nodes with a loop of ``(numel, rnumel)`` elements. Pairs of nodes
   that share a buffer are fusion candidates, tried best score first; :data:`FUSION_RULES` are
   named functions, each returning why a pair may not fuse (``None``: allowed). Rounds repeat
   until nothing fuses (``Scheduler.fuse_nodes``: at most 10).

Only values that cross a kernel's boundary cost traffic: a kernel reads each value produced
outside it once (the largest view of it that its ops touch) and writes each value it produces
that another kernel reads or that the model keeps (returns, or leaves in a mutated input or
buffer) — a kept storage in full, whatever part of it the kernel's last write covers.
"""

from __future__ import annotations

import functools
import heapq
import itertools
import math
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from enum import Enum

from ..costs import Category, Cost, FlopCount, OpRecord, tensor_bytes
from ..trace.regions import (
    Box,
    Region,
    box_size,
    dense_layout,
    full_box,
    place,
    to_base,
    united_elements,
)
from ..trace.tracer import TensorRef, largest_per_value


@dataclass(frozen=True)
class Refusal:
    """Why a kernel stayed apart from another kernel it shares a buffer with: the other
    kernel's number in execution order (from 1) and name, and the reason the first fusion rule
    that refused the pair gave (:data:`FUSION_RULES`)."""

    kernel: int
    name: str
    reason: str

    def __str__(self) -> str:
        return f"apart from kernel {self.kernel} ({self.name}): {self.reason}"


@dataclass(frozen=True)
class Kernel:
    """One GPU kernel of a plan: the ops it runs and the tensors crossing its boundary.

    ``recomputed`` holds cheap pointwise ops another kernel is charged for that this kernel
    computes again instead of loading their result (Inductor inlines them into every reader);
    their FLOPs count once, in the kernel that lists them in ``ops``. ``refusals`` says why the
    kernel stayed apart from kernels it shares a buffer with."""

    name: str
    category: Category
    ops: tuple[OpRecord, ...]
    reads: tuple[TensorRef, ...]
    writes: tuple[TensorRef, ...]
    recomputed: tuple[OpRecord, ...] = ()
    refusals: tuple[Refusal, ...] = ()

    @property
    def tensor_flops(self) -> int:
        return sum(op.flops.tensor for op in self.ops)

    @property
    def vector_flops(self) -> int:
        return sum(op.flops.vector for op in self.ops)

    @property
    def flops(self) -> int:
        return self.tensor_flops + self.vector_flops

    @property
    def launches(self) -> int:
        """GPU launches: 1, or what a multi-launch library call (an RNN) stands for."""
        return max(op.flops.launches for op in (*self.ops, *self.recomputed))

    def bytes(self, float_bytes: int) -> int:
        """HBM bytes read plus written by this kernel at a float element size of ``float_bytes``."""
        return sum(tensor_bytes(ref, float_bytes) for ref in (*self.reads, *self.writes))

    def cost(self, float_bytes: int) -> Cost:
        """This kernel's FLOPs and HBM bytes at a float element size of ``float_bytes``."""
        return Cost(self.tensor_flops, self.vector_flops, self.bytes(float_bytes))


@dataclass(frozen=True)
class Plan:
    """A list of kernels (a schedule): eager or fused."""

    kernels: tuple[Kernel, ...]

    def bytes(self, float_bytes: int) -> int:
        return sum(kernel.bytes(float_bytes) for kernel in self.kernels)

    @property
    def kernel_count(self) -> int:
        return sum(kernel.launches for kernel in self.kernels)


# --- 1. FX passes ---------------------------------------------------------------------------


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


@dataclass(frozen=True)
class SeparateBias:
    """An op whose bias add runs as a pointwise add after a library call without the bias:
    ``library_op`` is the call that remains, ``bias_position`` the bias's place in its reads."""

    library_op: str
    bias_position: int
    #: Inductor moves the bias out only when every user is pointwise (else it stays in the call)
    only_before_pointwise: bool
    #: eager ATen runs the bias add as a kernel of its own too
    in_eager: bool


#: Ops whose bias add Inductor (and for convolutions eager ATen) runs apart from the library call:
#: ``addmm`` → ``mm`` + add (``post_grad.unfuse_bias_add_to_pointwise``: on GPU, when every user
#: is pointwise); a convolution always, on GPU (``kernel/conv.py`` ``convolution``: "peel off the
#: bias, cudnn is slower with it") — and eager cuDNN has no bias either (``Convolution.cpp``:
#: ``cudnn_convolution`` then ``output.add_(reshape_bias(…))``).
SEPARATE_BIAS = {
    "aten.addmm.default": SeparateBias("aten.mm.default", 0, only_before_pointwise=True,
                                       in_eager=False),
    "aten.convolution.default": SeparateBias("aten.convolution.default", 2,
                                             only_before_pointwise=False, in_eager=True),
}
#: Inductor keeps ``addmm`` whole in half precision (``config.keep_addmm_fused_for_half_dtypes``).
_KEEP_ADDMM_DTYPES = frozenset({"float16", "bfloat16"})


def unfuse_bias_add(graph: _Graph) -> None:
    """Each op of :data:`SEPARATE_BIAS` that Inductor splits becomes its library call and a
    pointwise bias add (see :func:`split_bias`), which the users then absorb: one epilogue
    kernel reads the bias instead of cuBLAS or cuDNN."""
    readers = graph.readers()
    graph.ops = [
        part for op in graph.ops
        for part in (split_bias(op, graph.fresh_id)
                     if _inductor_splits_bias(op, readers, graph.kept) else (op,))
    ]


def split_bias(op: OpRecord, fresh_id: Callable[[], int]) -> tuple[OpRecord, ...]:
    """``(library call, bias add)`` for an op of :data:`SEPARATE_BIAS` given a bias, else
    ``(op,)``. The library call keeps the op's FLOPs; the add (which ``flop_counter`` does not
    count) reads the bias and the call's product and writes the op's output."""
    rule = SEPARATE_BIAS.get(op.name)
    if rule is None or len(op.reads) <= rule.bias_position or len(op.writes) != 1:
        return (op,)
    bias = op.reads[rule.bias_position]
    (out,) = op.writes
    product = replace(out, value_id=fresh_id(), storage_id=fresh_id())
    operands = tuple(ref for k, ref in enumerate(op.reads) if k != rule.bias_position)
    return (
        replace(op, name=rule.library_op, reads=operands, writes=(product,), call_key=()),
        replace(op, name="aten.add.Tensor", category=Category.POINTWISE, fusible=True,
                flops=FlopCount(), reads=(bias, product), writes=(out,), call_key=(),
                reduced_dims=None),
    )


def _inductor_splits_bias(op: OpRecord, readers: dict[int, list[OpRecord]],
                          kept: set[int]) -> bool:
    """``should_prefer_unfused_addmm`` for ``addmm`` (every user pointwise, the output not
    returned; not in half precision); always for a convolution."""
    rule = SEPARATE_BIAS.get(op.name)
    if rule is None or len(op.writes) != 1:
        return False
    if not rule.only_before_pointwise:
        return True
    (out,) = op.writes
    users = readers.get(out.value_id, [])
    return (
        out.dtype not in _KEEP_ADDMM_DTYPES
        and out.value_id not in kept
        and bool(users)
        and all(map(_pointwise_use, users))
    )


# --- 2. Lowering: node kinds, cat, inlining --------------------------------------------------


class NodeKind(str, Enum):
    """Inductor's scheduler node classes."""

    NOP = "nop"  #: ``NopKernelSchedulerNode``: views, ``ConcatKernel`` — no kernel
    EXTERN = "extern"  #: ``ExternKernelSchedulerNode``: a library call; never fused
    POINTWISE = "pointwise"  #: ``SchedulerNode`` over a pointwise loop
    REDUCTION = "reduction"  #: ``SchedulerNode`` over a reduction loop


def _node_kind(op: OpRecord) -> NodeKind:
    if op.category is Category.ZERO_COPY:
        return NodeKind.NOP
    if not op.fusible and not _is_outer_product(op):
        return NodeKind.EXTERN
    # gathers, pads, cat and resampling are pointwise loops with indexed loads in Inductor; a
    # "reduction" that folds no dim (batch norm in eval) only scales and shifts, and one that
    # folds fewer than 8 elements per output is unrolled into a pointwise expression
    if (
        op.category is Category.REDUCTION
        and op.reduced_dims != ()
        and _reduced_loop(op).rnumel >= UNROLL_REDUCTIONS_THRESHOLD
    ):
        return NodeKind.REDUCTION
    return NodeKind.POINTWISE


#: Matmuls Inductor's decompositions (``decomposition.py`` ``mm``, ``addmm``, ``bmm``) turn into
#: a broadcast multiply on GPU when the inner dim is 1: op → (positions of the two matrices
#: among its reads, whether a single-row or single-column product stays a matmul).
OUTER_PRODUCTS = {
    "aten.mm.default": (0, 1, True),
    "aten.addmm.default": (1, 2, True),
    "aten.bmm.default": (0, 1, False),
}


def _is_outer_product(op: OpRecord) -> bool:
    """A matmul over an inner dim of 1 (see :data:`OUTER_PRODUCTS`): a pointwise node."""
    rule = OUTER_PRODUCTS.get(op.name)
    if rule is None or len(op.reads) <= max(rule[:2]):
        return False
    a, b = op.reads[rule[0]].shape, op.reads[rule[1]].shape
    if len(a) < 2 or len(b) < 2 or a[-1] != 1:
        return False
    return not rule[2] or (a[-2] != 1 and b[-1] != 1)


#: ``config.unroll_reductions_threshold``: ``Reduction.create`` lowers a reduction over fewer
#: elements per output than this as a ``Pointwise`` (on GPU even a full reduction).
UNROLL_REDUCTIONS_THRESHOLD = 8


#: Ops that Inductor lowers as a concatenation of their inputs along one dim.
CAT_OPS = frozenset({"aten.cat.default", "aten.stack.default"})
#: ``config.max_complex_pointwise_cat_inputs``: more inputs than this → ``ConcatKernel``.
MAX_POINTWISE_CAT_INPUTS = 8


def lower_cat(graph: _Graph) -> None:
    """``lowering.cat``: a ``pointwise_cat`` when every input is a pointwise value with no other
    reader or a value that would need a copy anyway (one kernel loads each input where its
    slice lies), else a ``ConcatKernel``: no kernel of its own; inputs computed in the graph are
    written straight into their slices by their producers (pointwise kernels and reductions),
    others (graph inputs, extern outputs) are copied in by a pointwise kernel
    (see :func:`_into_slice`)."""
    if not any(op.name in CAT_OPS for op in graph.ops):
        return
    readers = graph.readers()
    producers = {ref.value_id: op for op in graph.ops for ref in op.writes}
    ops: list[OpRecord] = []
    for op in graph.ops:
        if op.name not in CAT_OPS or len(op.writes) != 1 or _is_pointwise_cat(
            op, readers, producers, graph.kept
        ):
            ops.append(op)
            continue
        (out,) = op.writes
        # a ConcatKernel's buffer has a fixed layout (no producer can write it into another
        # cat's slice): a later cat reading it copies it, as it copies a graph input
        del producers[out.value_id]
        parts: list[TensorRef] = []
        for ref in op.reads:
            if not _into_slice(ref, producers, graph.kept) or ref.value_id in graph.must_realize:
                copy = replace(ref, value_id=graph.fresh_id(), storage_id=out.storage_id)
                ops.append(replace(op, reads=(ref,), writes=(copy,), call_key=(),
                                   category=Category.POINTWISE))
                parts.append(copy)
            else:
                graph.must_realize.add(ref.value_id)
                parts.append(ref)
        graph.renamed[out.value_id] = Concat(out, tuple(parts), _slice_boxes(op))
        if out.value_id in graph.kept:
            graph.kept |= {part.value_id for part in parts}
    graph.ops = [
        replace(op, reads=graph.rename(op.reads))
        if any(ref.value_id in graph.renamed for ref in op.reads) else op
        for op in ops
    ]


@dataclass(frozen=True)
class Concat:
    """A ``ConcatKernel`` output and the values standing for it, each written into its slice:
    ``boxes[k]`` is where ``parts[k]`` lies in ``out``, in ``out``'s coordinates (None: not
    known)."""

    out: TensorRef
    parts: tuple[TensorRef, ...]
    boxes: tuple[Box, ...] | None

    def read(self, ref: TensorRef) -> tuple[TensorRef, ...]:
        """The slices a read of view ``ref`` of the output loads, each at the elements of it
        the view covers: ``cat([a, b], 1)[:, :1]`` loads a column of ``a`` and nothing of
        ``b``, as Inductor's reader of the concatenated buffer does (loading every slice in
        full would move more than eager's reader). Every slice in full where the view is not
        an index box of the output. Each load keeps the view's shape: the reader's loop (a
        softmax's rows) is that of the whole view, not of a slice."""

        def load(part: TensorRef, elements: int) -> TensorRef:
            return replace(ref, value_id=part.value_id, storage_id=part.storage_id,
                           elements=elements)

        layout = dense_layout(self.out)
        out_at = place(self.out, layout) if layout is not None else None
        view_at = place(ref, layout) if layout is not None else None
        if self.boxes is None or out_at is None or view_at is None or (
            ref.itemsize != self.out.itemsize
        ):
            return tuple(load(part, part.elements) for part in self.parts)
        read = to_base(view_at, ref, Region.of([full_box(ref.shape)]))
        left = ref.elements  # a read narrowed by demand loads no more than it did
        loads = []
        for part, box in zip(self.parts, self.boxes, strict=True):
            covered = sum(
                read.intersect_box(piece, box_size(piece), self.out.storage_elements).count
                for piece in to_base(out_at, self.out, Region.of([box])).boxes
            )
            if covered:
                loads.append(load(part, min(covered, left)))
                left -= loads[-1].elements
        return tuple(loads)


def _slice_boxes(op: OpRecord) -> tuple[Box, ...] | None:
    """Where each input of a ``cat`` or ``stack`` lies in its output (None: not known)."""
    (out,) = op.writes
    arguments = _call_arguments(op)
    keywords = dict(op.call_key[1][1]) if len(op.call_key) == 2 and op.call_key[1] else {}
    dim = arguments[1] if len(arguments) > 1 else keywords.get("dim", 0)
    if type(dim) is not int or not out.shape:
        return None
    dim %= len(out.shape)
    shapes = [ref.shape for ref in op.reads]
    if op.name == "aten.stack.default":
        if any(shape != out.shape[:dim] + out.shape[dim + 1:] for shape in shapes):
            return None
        starts, sizes = range(len(shapes)), [1] * len(shapes)
    else:
        if any(len(shape) != len(out.shape) for shape in shapes):
            return None  # a legacy empty input, skipped by ``cat``
        sizes = [shape[dim] for shape in shapes]
        starts = list(itertools.accumulate(sizes, initial=0))
    whole = full_box(out.shape)
    boxes = tuple(
        (*whole[:dim], (range(start, start + size),), *whole[dim + 1:])
        for start, size in zip(starts, sizes, strict=False)
    )
    if sum(map(box_size, boxes)) != math.prod(out.shape):
        return None
    return boxes


def _into_slice(ref: TensorRef, producers: dict[int, OpRecord], kept: set[int]) -> bool:
    """Whether the producer of ``ref`` can write it straight into a slice of a ``ConcatKernel``
    (``ConcatKernel.can_realize_into_without_copy``: a buffer whose layout is still flexible):
    not a graph input, a kept value or an in-place write, and not an extern call other than
    ``mm`` and ``addmm`` (see :data:`FLEXIBLE_LAYOUT_EXTERNS`) — a batched GEMM's
    ``ExternKernelOut`` has a fixed layout and a convolution or attention allocates its own
    output (``ExternKernelAlloc``), so their outputs are copied in."""
    producer = producers.get(ref.value_id)
    return (
        producer is not None
        and ref.value_id not in kept
        and not _mutates(producer)
        and (_node_kind(producer) is not NodeKind.EXTERN
             or producer.name in FLEXIBLE_LAYOUT_EXTERNS)
    )


#: Library calls whose output layout Inductor leaves flexible without max-autotune
#: (``InductorChoices._need_to_fix_layout``: "the historical implementation for mm and addmm
#: allowed flexible layouts"), so a ``ConcatKernel`` has cuBLAS write them into their slices.
FLEXIBLE_LAYOUT_EXTERNS = frozenset({"aten.mm.default", "aten.addmm.default"})


def _pointwise_use(op: OpRecord) -> bool:
    """``is_pointwise_use``: an elementwise op (``Tag.pointwise``: our pointwise cost category)
    reads it — not a gather, pad, resampling or ``cat``, though Inductor lowers those as
    pointwise loops too."""
    return _node_kind(op) is NodeKind.POINTWISE and op.category is Category.POINTWISE


#: ``cat``'s ``additional_pointwise_ops``: users that count as pointwise for ``pointwise_cat``.
CAT_POINTWISE_USERS = CAT_OPS | {"aten.constant_pad_nd.default"}


def _mutates(op: OpRecord) -> bool:
    """The op writes into storage one of its inputs lives in (an in-place op)."""
    return bool({ref.storage_id for ref in op.writes} & {ref.storage_id for ref in op.reads})


def _is_pointwise_cat(
    op: OpRecord,
    readers: dict[int, list[OpRecord]],
    producers: dict[int, OpRecord],
    kept: set[int],
) -> bool:
    inputs = largest_per_value(op.reads)
    if len(inputs) > MAX_POINTWISE_CAT_INPUTS:
        return False

    def lowered_in_place(ref: TensorRef) -> bool:  # ``should_lower_cat_input``
        producer = producers.get(ref.value_id)
        unrealized = producer is not None and _node_kind(producer) is NodeKind.POINTWISE
        return (unrealized and ref.value_id not in kept) or not _into_slice(ref, producers, kept)

    def shared(ref: TensorRef) -> bool:  # ``any_input_has_multi_consumers``
        others = [user for user in readers.get(ref.value_id, []) if user is not op]
        producer = producers.get(ref.value_id)
        return any(_pointwise_use(user) for user in others) or bool(others) and (
            producer is not None and _node_kind(producer) is NodeKind.POINTWISE
        )

    if any(map(shared, inputs)):
        return False  # realized once into its slice rather than recomputed by each reader
    (out,) = op.writes
    users = readers.get(out.value_id, [])
    pointwise_use = bool(users) and out.value_id not in kept and all(
        _pointwise_use(user) or user.name in CAT_POINTWISE_USERS for user in users
    )
    lowered = [lowered_in_place(ref) for ref in inputs]
    return (any(lowered) and pointwise_use) or (
        all(lowered) and not any(_reads_a_reduction(ref, producers) for ref in inputs)
    )


def _reads_a_reduction(ref: TensorRef, producers: dict[int, OpRecord]) -> bool:
    """``cat``'s ``can_fuse_reduction``: the value is a reduction's output, or a pointwise value
    computed from one (a softmax's normalize reads its statistics). A ``pointwise_cat`` of it
    would recompute its expression for every output element, so a ``cat`` with no pointwise
    user keeps such inputs in their own kernels (``ConcatKernel``)."""
    pending, seen = [ref.value_id], {ref.value_id}
    while pending:
        producer = producers.get(pending.pop())
        if producer is None or producer.name in CAT_OPS:
            continue
        kind = _node_kind(producer)
        if kind is NodeKind.REDUCTION:
            return True
        if kind is NodeKind.POINTWISE:
            fresh = {read.value_id for read in producer.reads} - seen
            seen |= fresh
            pending.extend(fresh)
    return False


#: Ops Inductor decomposes into statistics (a reduction) and a pointwise normalize that reads
#: the input again: softmaxes and the norms (``torch/_decomp``, ``torch/_refs``).
NORMALIZATIONS = frozenset({
    "_softmax", "softmax", "_safe_softmax", "_log_softmax", "log_softmax", "native_layer_norm",
    "native_group_norm", "native_batch_norm", "_native_batch_norm_legit",
    "_native_batch_norm_legit_functional", "cudnn_batch_norm", "miopen_batch_norm",
    "_fused_rms_norm", "rms_norm",
})


def split_normalizations(graph: _Graph) -> None:
    """Each normalization becomes its statistics reduction and a pointwise normalize (see
    :func:`split_normalization`); the normalize is then inlined or fused like any pointwise value
    (into a row-wise statistics kernel, or recomputed by a reader over other dims)."""
    graph.ops = [part for op in graph.ops for part in split_normalization(op, graph.fresh_id)]


def split_normalization(op: OpRecord, fresh_id: Callable[[], int]) -> tuple[OpRecord, ...]:
    """``(statistics, normalize)`` for a normalization, else ``(op,)``: the statistics
    reduction keeps the op's FLOPs and writes the per-row statistics — a norm's own small
    outputs (mean and rstd; an RMS norm's rstd), a softmax's row max and row sum (the buffers
    its decomposition stores: ``amax``, then ``sum(exp(x - amax))``); the normalize reads the
    input and the statistics and writes the normalized output. A batch norm's updated running
    statistics (written over its inputs' storage) are the statistics kernel's too; the
    normalize does not read them."""
    if (
        op.category is not Category.REDUCTION  # the cheap test first: most ops are not
        or _short_op_name(op) not in NORMALIZATIONS
        or _node_kind(op) is not NodeKind.REDUCTION
    ):
        return (op,)
    rows = _loop(op, NodeKind.REDUCTION).numel
    out, *small = op.writes
    stats = tuple(small) or tuple(
        replace(out, value_id=fresh_id(), storage_id=fresh_id(), shape=(rows,), strides=(1,),
                offset=0, storage_elements=rows, elements=rows)
        for _ in ("max", "sum")
    )
    updated = {ref.storage_id for ref in op.reads}
    return (
        replace(op, writes=stats),
        replace(op, category=Category.POINTWISE,
                reads=(*op.reads, *(ref for ref in stats if ref.storage_id not in updated)),
                writes=(out,), flops=FlopCount(), call_key=(), reduced_dims=None),
    )


@dataclass(frozen=True)
class Loop:
    """A scheduler node's ``group``: ``numel`` output points × ``rnumel`` reduced elements each;
    a reduction's ``order`` tells reductions over different dims of one input apart (None: a
    pointwise loop)."""

    numel: int
    rnumel: int = 1
    order: tuple | None = None
    #: the reduction folds the innermost dims of its input (rows, not columns)
    inner: bool = True


@dataclass(frozen=True)
class SchedulerNode:
    """One realized value and what computes it: its op, after the pointwise ops inlined into it
    (in execution order). Extern nodes have no loop."""

    kind: NodeKind
    ops: tuple[OpRecord, ...]
    loop: Loop | None

    @property
    def op(self) -> OpRecord:
        return self.ops[-1]

    @functools.cached_property
    def loads(self) -> tuple[TensorRef, ...]:
        """The values it loads from memory (made outside its ops), each once at its largest
        view: asked for both its dependencies and its buffers, so found once."""
        return _external_reads(self.ops)


def _loop(op: OpRecord, kind: NodeKind) -> Loop | None:
    if kind is NodeKind.EXTERN:
        return None
    if kind is NodeKind.POINTWISE:
        return Loop(max((ref.elements for ref in op.writes), default=0))
    return _reduced_loop(op)


def _reduced_loop(op: OpRecord) -> Loop:
    """The loop of a reduction op: its output points × the elements each folds."""
    if not op.reads:
        return Loop(max((ref.elements for ref in op.writes), default=0))
    source = op.reads[0]
    total = math.prod(source.shape)
    if op.reduced_dims is None:
        points = max(min((ref.elements for ref in op.writes), default=1), 1)
        return Loop(points, max(total // points, 1), (source.shape, None),
                    _points_are_outer_dims(source.shape, points))
    reduced = max(math.prod(source.shape[d] for d in op.reduced_dims), 1)
    return Loop(total // reduced, reduced, _reduced_layout(source, op.reduced_dims),
                _folds_innermost(source, op.reduced_dims))


def _points_are_outer_dims(shape: Sequence[int], points: int) -> bool:
    """Whether a reduction of ``shape`` to ``points`` outputs keeps whole outer dims. A group
    norm's (N, G) statistics over (N, C, …) do not (1 < G < C): its normalize loop reads them at
    ``n·G + c // (C/G)``, an index that is not a prefix of its own loop, so the scheduler cannot
    match it with the statistics' store (``Scheduler.fusable_read_and_write``) and the
    normalize stays a kernel of its own."""
    return any(math.prod(shape[:k]) == points for k in range(len(shape) + 1))


def _folds_innermost(ref: TensorRef, dims: tuple[int, ...]) -> bool:
    """Every reduced dim lies inside every kept dim in memory (size-1 dims aside)."""
    strides = ref.strides or tuple(math.prod(ref.shape[d + 1:]) for d in range(len(ref.shape)))
    reduced = [strides[d] for d in dims if ref.shape[d] > 1]
    kept = [strides[d] for d in range(len(ref.shape)) if d not in dims and ref.shape[d] > 1]
    return not reduced or not kept or max(reduced) < min(kept)


def _reduced_layout(ref: TensorRef, dims: tuple[int, ...]) -> tuple:
    """The (size, stride) of each reduced dim: ``x.sum(0)`` and ``x.t().sum(1)`` load ``x``
    in the same order (one loop), ``x.sum(0)`` and ``x.sum(1)`` do not."""
    strides = ref.strides or (None,) * len(ref.shape)
    return tuple(sorted(((ref.shape[d], strides[d]) for d in dims), key=repr))


#: ``config.realize_reads_threshold``: a value with several users is stored, not recomputed,
#: once its expression loads more buffers than this.
REALIZE_READS_THRESHOLD = 4
#: ``config.realize_acc_reads_threshold``: an expression loading more buffers is stored.
REALIZE_ACC_READS_THRESHOLD = 8


def _external_reads(ops: Sequence[OpRecord]) -> tuple[TensorRef, ...]:
    produced = {ref.value_id for op in ops for ref in op.writes}
    return largest_per_value(ref for op in ops for ref in op.reads if ref.value_id not in produced)


def _inlined(op: OpRecord, expression: Sequence[OpRecord], graph: _Graph,
             readers: dict[int, list[OpRecord]], kinds: dict[int, NodeKind],
             kept_storages: set[int], born: set[int]) -> bool:
    """Whether Inductor's lowering leaves this pointwise value unrealized (``StorageBox`` not
    stored), so every reader recomputes it: it is not kept, not mutated, not read by an extern
    kernel, loads few enough buffers (``mark_reuse``, ``has_exceeded_max_reads``), and —
    our addition, so that a plan never moves more than eager — recomputing it in each reader
    loads no more than storing it once and loading it in each would. ``kinds``: the node kind
    of each op of the graph, by ``id``."""
    if len(op.writes) != 1:
        return False
    (out,) = op.writes
    users = readers.get(out.value_id, [])
    if (
        not users
        or out.value_id in graph.kept
        or out.value_id in graph.must_realize
        or out.storage_id in kept_storages
        or out.storage_id in born
        or any(kinds[id(user)] in (NodeKind.NOP, NodeKind.EXTERN) for user in users)
        or any(_mutates(user) and out.storage_id in {r.storage_id for r in user.writes}
               for user in users)
    ):
        return False
    loads = _external_reads(expression)
    if len(loads) > REALIZE_ACC_READS_THRESHOLD:
        return False
    if len(users) == 1:
        return True
    loaded = sum(ref.elements for ref in loads)
    return len(loads) <= REALIZE_READS_THRESHOLD and (
        (len(users) - 1) * loaded <= (len(users) + 1) * out.elements
    )


@dataclass
class _Expressions:
    """What a node computes for its op: the inlined producers of what it loads, each narrowed
    to the view of its output the reader loads (``x.cos()[:, :4]`` loads ``x[:, :4]``), then the
    op itself."""

    inlined: dict[int, OpRecord] = field(default_factory=dict)  # inlined value → its op
    _memo: dict[tuple, tuple[OpRecord, ...]] = field(default_factory=dict)

    def __call__(self, op: OpRecord, view: TensorRef | None = None) -> tuple[OpRecord, ...]:
        key = (id(op), view and (view.shape, view.strides, view.offset, view.elements))
        if key not in self._memo:
            op = _narrowed(op, view) if view is not None else op
            parts: list[OpRecord] = []
            for ref in largest_per_value(op.reads):
                producer = self.inlined.get(ref.value_id)
                if producer is not None:
                    parts.extend(self(producer, ref))
            # each op once, in first-use order (by identity: hashing records is slow)
            self._memo[key] = tuple({id(part): part for part in (*parts, op)}.values())
        return self._memo[key]


def _narrowed(op: OpRecord, view: TensorRef) -> OpRecord:
    """A pointwise op computing only ``view`` of its output: each input laid out as the output
    is loaded through the same view (a broadcast or differently strided input stays whole), and
    FLOPs shrink in proportion."""
    out = op.writes[0]
    if view.elements >= out.elements or not view.strides or not out.strides:
        return op

    def through_view(ref: TensorRef) -> TensorRef:
        if (ref.shape, ref.strides) != (out.shape, out.strides):
            return ref
        return replace(ref, shape=view.shape, strides=view.strides, elements=view.elements,
                       offset=ref.offset + view.offset - out.offset)

    share = view.elements / out.elements
    flops = replace(op.flops, vector=math.ceil(op.flops.vector * share),
                    tensor=math.ceil(op.flops.tensor * share))
    return replace(op, reads=tuple(map(through_view, op.reads)),
                   writes=(replace(view, value_id=out.value_id), *op.writes[1:]), flops=flops)


def _kept_through_metadata_ops(ops: Sequence[OpRecord], kept: frozenset[int]) -> frozenset[int]:
    """``kept`` plus what an in-place metadata op (``transpose_``, ``unsqueeze_``: zero-copy, yet
    recorded as a new version) made a kept value from: that version's data is what is kept
    (stft returns its FFT's output transposed in place)."""
    grown = set(kept)
    for op in reversed(ops):
        if op.category is Category.ZERO_COPY and any(ref.value_id in grown for ref in op.writes):
            grown |= {ref.value_id for ref in op.reads}
    return frozenset(grown)


def lower(ops: Sequence[OpRecord], kept_values: frozenset[int]) -> tuple[list[SchedulerNode],
                                                                         _Graph]:
    """The scheduler nodes Inductor builds for ``ops``: FX passes, ``cat`` lowering, inlining."""
    kept_values = _kept_through_metadata_ops(ops, kept_values)
    unique, duplicates = common_subexpressions(ops, kept_values)
    kept = set(kept_values)
    unique = remove_noop_ops(unique, kept)
    graph = _Graph(ops=eliminate_dead_code(unique, kept), kept=kept, duplicates=duplicates)
    unfuse_bias_add(graph)
    split_normalizations(graph)
    lower_cat(graph)
    readers = graph.readers()
    # a reduction's kind takes its loop to find: found once per op, not once per reader too
    kinds = {id(op): _node_kind(op) for op in graph.ops}
    kept_storages = _kept_storages(graph.ops, graph.kept)
    expression = _Expressions()
    born: set[int] = set()  # storages seen so far: a later write into one is a mutation
    nodes: list[SchedulerNode] = []
    for op in graph.ops:
        kind = kinds[id(op)]
        if kind is NodeKind.POINTWISE and _inlined(op, expression(op), graph, readers, kinds,
                                                   kept_storages, born):
            expression.inlined[op.writes[0].value_id] = op
        elif kind is not NodeKind.NOP:
            nodes.append(SchedulerNode(kind, expression(op), _loop(op, kind)))
        born |= {ref.storage_id for ref in (*op.reads, *op.writes)}
    return nodes, graph


def _kept_storages(ops: Iterable[OpRecord], kept: set[int]) -> set[int]:
    return {ref.storage_id for op in ops for ref in op.writes if ref.value_id in kept}


# --- 3. Fusion rules ------------------------------------------------------------------------
# Each rule returns why two nodes may not fuse (after Inductor's ``WhyNoFuse`` texts), or None.


@dataclass
class _Group:
    """A scheduler node while fusion runs — one node, or a ``FusedSchedulerNode`` of several —
    with its place in the dependency graph (``ancestors``: bit i set when original node i must
    run before it)."""

    members: list[int]
    mask: int
    ancestors: int
    loop: Loop | None
    extern: bool
    first: int
    last: int
    used: dict[int, TensorRef]  #: values it loads or stores (``used_buffer_names``)
    #: how many entries of ``_Scheduler.merges`` ``ancestors`` already reflects
    merges_seen: int = 0

    @property
    def reduction(self) -> bool:
        return self.loop is not None and self.loop.order is not None


def _without(bits: int, mask: int) -> int:
    """``bits & ~mask`` in non-negative ints: ``~`` makes a negative int, and ``&`` with one
    costs ~10× more on the 10⁴-bit masks of a deep model."""
    return bits ^ (bits & mask)


@dataclass
class _Scheduler:
    groups: list[_Group]
    group_of: list[int]  # original node → index of its group in ``groups``
    live: set[int]  # indices of the groups not fused into another
    bytes_of: Callable[[TensorRef], int]
    #: every fusion so far: (the fused node's mask, its mask and ancestors)
    merges: list[tuple[int, int]] = field(default_factory=list)
    #: for each size of :data:`MERGE_RUNS`, per run of that many consecutive entries of
    #: :attr:`merges`: their masks and their closures, each united
    merge_runs: tuple[list[tuple[int, int]], ...] = field(
        default_factory=lambda: tuple([] for _ in MERGE_RUNS))

    def merged(self, mask: int, closure: int) -> None:
        """Log a fusion: the fused node's ``mask``, and ``closure``, its mask and ancestors."""
        for size, runs in zip(MERGE_RUNS, self.merge_runs, strict=True):
            if len(self.merges) % size:
                masks, closures = runs[-1]
                runs[-1] = (masks | mask, closures | closure)
            else:
                runs.append((mask, closure))
        self.merges.append((mask, closure))

    def ancestors(self, group: _Group) -> int:
        """``group``'s ancestors with every fusion so far applied — a group that depends on a
        fused node follows all the fused node depends on. Fusions are replayed from
        :attr:`merges` when a group is asked, not pushed to every group at each fusion."""
        ancestors = self._replay(group.ancestors, 0, group.merges_seen, len(self.merges))
        if ancestors != group.ancestors:  # the stored ancestors leave out the group's own nodes
            group.ancestors = _without(ancestors, group.mask)
        group.merges_seen = len(self.merges)
        return group.ancestors

    def _replay(self, ancestors: int, level: int, start: int, stop: int) -> int:
        """``ancestors`` after the fusions ``merges[start:stop]``, in order. A run of them (of
        the size ``MERGE_RUNS[level]``) changes nothing when the ancestors meet none of their
        nodes, or already hold all their closures (in a deep stack, a late node follows almost
        all before it); a run that may change them is replayed in the runs of the next size,
        and the last size one fusion at a time."""
        if level == len(MERGE_RUNS):
            for mask, closure in self.merges[start:stop]:
                if ancestors & mask:
                    ancestors |= closure
            return ancestors
        size, runs = MERGE_RUNS[level], self.merge_runs[level]
        while start < stop:
            end = min((start // size + 1) * size, stop)
            masks, closures = runs[start // size]
            if ancestors & masks and closures & ancestors != closures:
                ancestors = self._replay(ancestors, level + 1, start, end)
            start = end
        return ancestors

    def depends(self, later: _Group, earlier: _Group) -> bool:
        """Whether ``later`` must run after ``earlier`` (two live groups). Ancestors only grow as
        fusions are replayed, so ancestors not brought up to date already settle a yes."""
        return bool(later.ancestors & earlier.mask or self.ancestors(later) & earlier.mask)


def extern_never_fuses(s: _Scheduler, a: _Group, b: _Group) -> str | None:
    """Either node is an extern kernel (cuBLAS, cuDNN, attention, scatter, ops without a rule):
    without max-autotune templates Inductor fuses nothing into a library call
    (``ExternKernelSchedulerNode``)."""
    if a.extern or b.extern:
        return "extern kernel (library call) is never fused"
    return None


def max_fusion_size(s: _Scheduler, a: _Group, b: _Group) -> str | None:
    """More than 64 nodes in one kernel (``config.max_fusion_size``)."""
    if len(a.members) + len(b.members) > MAX_FUSION_SIZE:
        return f"exceeds max fusion ({MAX_FUSION_SIZE} nodes)"
    return None


def shares_data(s: _Scheduler, a: _Group, b: _Group) -> str | None:
    """Two independent nodes load fewer than 10 bytes in common or lie more than 64 nodes
    apart (``choices.can_fuse_horizontal``: ``score_fusion_memory_threshold``,
    ``are_long_distant_nodes``): horizontal fusion exists to load shared inputs once."""
    # both tests first: they are cheaper than the dependency walk, and a pair that passes
    # them fuses whether or not one depends on the other
    if _shared_bytes(s, a, b) < SCORE_FUSION_MEMORY_THRESHOLD:
        reason = "no shared data (score_fusion_memory_threshold)"
    elif max(abs(a.first - b.last), abs(b.first - a.last)) > MAX_FUSION_DISTANCE:
        reason = "nodes are too far apart"
    else:
        return None
    return None if s.depends(a, b) or s.depends(b, a) else reason


def loops_match(s: _Scheduler, a: _Group, b: _Group) -> str | None:
    """The loops differ (``codegen/simd.py`` ``can_fuse``, one generated kernel has one loop
    nest): pointwise nodes need the same element count; reductions the same ``(numel, rnumel)``
    and the same reduced dims (mix-order reduction pairs other dims only from 5 M elements up);
    a pointwise node joins a reduction over ``numel`` elements (an epilogue) or over
    ``numel × rnumel`` (a prologue; or an epilogue on a broadcast result as in softmax, only
    when the reduction folds the innermost dims — a column reduction completes no point
    before the end)."""
    if a.loop is None or b.loop is None:
        return None
    if a.reduction and b.reduction:
        if (a.loop.numel, a.loop.rnumel) != (b.loop.numel, b.loop.rnumel):
            return "numel/rnumel mismatch (reduce)"
        if a.loop.order != b.loop.order:
            return "reductions over different dims"
        return None
    if not a.reduction and not b.reduction:
        return None if a.loop.numel == b.loop.numel else "numel mismatch (non-reduce)"
    (pointwise, p), (reduction, r) = ((a.loop, a), (b.loop, b)) if b.reduction else (
        (b.loop, b), (a.loop, a))
    if pointwise.numel == reduction.numel:
        return None
    if pointwise.numel != reduction.numel * reduction.rnumel:
        return "numel/rnumel incompatibility (pointwise and reduction)"
    if s.depends(p, r) and not reduction.inner:
        # each point of the epilogue needs a whole column of the reduction first
        return "full-size epilogue on a reduction over outer dims"
    return None


def no_cycle(s: _Scheduler, a: _Group, b: _Group) -> str | None:
    """A node outside the pair depends on one and feeds the other: the fused kernel would have
    to run both before and after it (``will_fusion_create_cycle``, "intermediate nodes between
    node1 & node2")."""
    for src, dst in ((a, b), (b, a)):
        # a node on such a path follows ``src``: nodes are numbered in a topological order
        after_src = src.first + 1
        # bit k: node ``after_src + k`` (shifted down, the walk works on a few-bit int)
        between = _without(s.ancestors(dst), src.mask | dst.mask) >> after_src
        seen: set[int] = set()
        while between:
            low = between & -between
            between ^= low
            group_index = s.group_of[after_src + low.bit_length() - 1]
            if group_index in seen:
                continue
            seen.add(group_index)
            if s.depends(s.groups[group_index], src):
                return "will create cycle"
    return None


#: Sizes of the runs of consecutive fusions :meth:`_Scheduler.ancestors` tests together before
#: it replays them in smaller runs, then one by one
MERGE_RUNS = (64, 16, 4)
#: ``config.max_fusion_size``
MAX_FUSION_SIZE = 64
#: ``config.score_fusion_memory_threshold`` (bytes both nodes load, for horizontal fusion)
SCORE_FUSION_MEMORY_THRESHOLD = 10
#: ``Scheduler.are_long_distant_nodes``: 64 nodes apart in program order
MAX_FUSION_DISTANCE = 64
#: ``Scheduler.fuse_nodes``: at most this many rounds of ``fuse_nodes_once``
FUSION_ROUNDS = 10

Rule = Callable[[_Scheduler, _Group, _Group], "str | None"]
#: The rules in the order Inductor's ``can_fuse`` and ``_try_fusion_pairs`` apply them.
FUSION_RULES: tuple[Rule, ...] = (
    extern_never_fuses, shares_data, max_fusion_size, loops_match, no_cycle
)


def refusal(s: _Scheduler, a: _Group, b: _Group) -> str | None:
    """The first rule of :data:`FUSION_RULES` that refuses the pair (None: they fuse)."""
    return next((reason for rule in FUSION_RULES if (reason := rule(s, a, b))), None)


def _shared_bytes(s: _Scheduler, a: _Group, b: _Group) -> int:
    return sum(s.bytes_of(a.used[v]) for v in a.used.keys() & b.used.keys())


# --- 4. Scheduling: fuse_nodes ---------------------------------------------------------------


def _dependencies(nodes: Sequence[SchedulerNode]) -> list[set[int]]:
    """Node → nodes it must follow: producers of what it loads, and — for a node writing a new
    version into existing storage — the readers and writers of the earlier versions."""
    producer: dict[int, int] = {}
    storage_users: dict[int, set[int]] = {}
    deps: list[set[int]] = []
    for index, node in enumerate(nodes):
        mine = {producer[ref.value_id] for ref in node.loads if ref.value_id in producer}
        for ref in node.op.writes:
            mine |= storage_users.get(ref.storage_id, set())
        mine.discard(index)
        deps.append(mine)
        for ref in node.op.writes:
            producer[ref.value_id] = index
        for ref in (*node.loads, *node.op.writes):
            storage_users.setdefault(ref.storage_id, set()).add(index)
    return deps


def _node_values(node: SchedulerNode) -> dict[int, TensorRef]:
    """Values a node loads from or stores to memory (Inductor's ``used_buffer_names``)."""
    return {ref.value_id: ref for ref in (*node.loads, *node.op.writes)}


def schedule(nodes: Sequence[SchedulerNode], bytes_of: Callable[[TensorRef], int]
             ) -> tuple[list[list[int]], dict[tuple[int, int], str]]:
    """Inductor's ``fuse_nodes``: groups of node indices, and why pairs of groups that share a
    buffer stayed apart (by final group index)."""
    deps = _dependencies(nodes)
    ancestors: list[int] = []
    for node_deps in deps:
        mask = 0
        for dep in node_deps:
            mask |= ancestors[dep] | (1 << dep)
        ancestors.append(mask)
    s = _Scheduler(
        groups=[
            _Group([i], 1 << i, ancestors[i], node.loop, node.kind is NodeKind.EXTERN, i, i,
                   _node_values(node))
            for i, node in enumerate(nodes)
        ],
        group_of=list(range(len(nodes))),
        live=set(range(len(nodes))),
        bytes_of=bytes_of,
    )
    refused: dict[frozenset[int], str] = {}
    for _ in range(FUSION_ROUNDS):
        if not _fuse_once(s, refused):
            break
    alive = _topological(s, deps)
    position = {g: k for k, g in enumerate(alive)}
    reasons = {}
    for pair, reason in refused.items():
        first, second = sorted(position[s.group_of[i]] for i in pair)
        if first != second:
            reasons[(first, second)] = reason
    return [sorted(s.groups[g].members) for g in alive], reasons


def _topological(s: _Scheduler, deps: Sequence[set[int]]) -> list[int]:
    """The live groups in an order that runs every producer first, the earliest first
    (``topological_sort_schedule``)."""
    successors: dict[int, set[int]] = {g: set() for g in s.live}
    waiting = dict.fromkeys(s.live, 0)
    for node, node_deps in enumerate(deps):
        for dep in node_deps:
            before, after = s.group_of[dep], s.group_of[node]
            if before != after and after not in successors[before]:
                successors[before].add(after)
                waiting[after] += 1
    ready = [(s.groups[g].first, g) for g, count in waiting.items() if count == 0]
    heapq.heapify(ready)
    order = []
    while ready:
        _, group = heapq.heappop(ready)
        order.append(group)
        for after in successors[group]:
            waiting[after] -= 1
            if not waiting[after]:
                heapq.heappush(ready, (s.groups[after].first, after))
    return order


def _candidates(s: _Scheduler) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """``get_possible_fusions``: pairs of live groups that load or store the same value — those
    of two fusible groups best first (``score_fusion``: reduction pairs of the same kind, then
    shared bytes, then the closer pair in program order), and those with an extern kernel,
    which :func:`extern_never_fuses` refuses whatever their place in that order."""
    by_value: dict[int, list[int]] = {}
    for index in s.live:
        for value in s.groups[index].used:
            by_value.setdefault(value, []).append(index)
    pairs = set()
    for groups in by_value.values():
        if len(groups) == 1:  # most values: no pair to make
            continue
        unique = sorted(groups, key=lambda g: s.groups[g].first)
        for i, a in enumerate(unique):
            pairs |= {(a, b) for b in unique[i + 1: i + 1 + MAX_FUSION_SIZE]}
    fusible, with_extern = [], []
    for pair in pairs:
        extern = s.groups[pair[0]].extern or s.groups[pair[1]].extern
        (with_extern if extern else fusible).append(pair)

    def score(pair: tuple[int, int]) -> tuple:
        a, b = s.groups[pair[0]], s.groups[pair[1]]
        distance = max(abs(a.first - b.last), abs(b.first - a.last))
        return (a.reduction == b.reduction, _shared_bytes(s, a, b), -distance, -a.first)

    return sorted(fusible, key=score, reverse=True), with_extern


def _fuse_once(s: _Scheduler, refused: dict[frozenset[int], str]) -> bool:
    """``fuse_nodes_once``: try every candidate pair in score order on the current groups."""
    fusible, with_extern = _candidates(s)
    # an extern kernel never joins a group, so its pairs are refused here (about two thirds
    # of the candidates in a transformer) rather than scored; the refusals reach the same
    # final groups whenever they are noted
    for first, second in with_extern:
        a, b = s.groups[first], s.groups[second]
        refused[frozenset((a.members[0], b.members[0]))] = extern_never_fuses(s, a, b)
    fused = False
    for first, second in fusible:
        a_index = s.group_of[s.groups[first].members[0]]
        b_index = s.group_of[s.groups[second].members[0]]
        if a_index == b_index:
            continue
        a, b = s.groups[a_index], s.groups[b_index]
        reason = refusal(s, a, b)
        pair = frozenset((a.members[0], b.members[0]))
        if reason:
            refused[pair] = reason
            continue
        refused.pop(pair, None)
        _merge(s, a_index, b_index)
        fused = True
    return fused


def _merge(s: _Scheduler, keep: int, gone: int) -> None:
    a, b = s.groups[keep], s.groups[gone]
    ancestors = s.ancestors(a) | s.ancestors(b)
    a.members += b.members
    a.mask |= b.mask
    a.ancestors = _without(ancestors, a.mask)
    if a.loop is None or (b.reduction and not a.reduction):
        a.loop = b.loop
    a.first, a.last = min(a.first, b.first), max(a.last, b.last)
    a.used = {**a.used, **b.used}
    for member in b.members:
        s.group_of[member] = keep
    s.live.discard(gone)
    s.merged(a.mask, a.ancestors | a.mask)
    a.merges_seen = len(s.merges)


# --- 5. Kernel boundaries -------------------------------------------------------------------


_CATEGORY_RANK = {
    Category.COMPUTE: 4,
    Category.REDUCTION: 3,
    Category.POINTWISE: 2,
    Category.DATA_MOVEMENT: 1,
    Category.ZERO_COPY: 0,
}


def _category_of(ops: Sequence[OpRecord]) -> Category:
    """A kernel is named by its heaviest op kind: a pointwise chain with a sum is a reduction."""
    return max((op.category for op in ops), key=_CATEGORY_RANK.__getitem__,
               default=Category.ZERO_COPY)


def uninitialised_values(ops: Sequence[OpRecord]) -> frozenset[int]:
    """Values that zero-copy ops create (``empty``, ``new_empty``): memory with nothing in it
    yet. An op that fills one (``empty_like(x).copy_(y)``, dropout's ``bernoulli_``) is traced as
    reading it, but no kernel has anything to load from it, so no plan charges that read."""
    return frozenset(
        ref.value_id for op in ops if op.category is Category.ZERO_COPY for ref in op.writes
    )


def _untouched_loads(
    ops: Sequence[OpRecord], mine: set[int], uninitialised: frozenset[int]
) -> list[TensorRef]:
    """Loads of what partial writes inside a kernel leave untouched: ``c[:, 10] = k`` then
    ``c[:, :12].sum()`` in one kernel still loads the old ``c[:, :10]``. A read of a version
    made here by writes smaller than the read loads the rest from the version before them."""
    latest: dict[int, int] = {}
    previous: dict[int, int] = {}
    written_here: dict[int, int] = {}  # storage → elements the kernel's writes there cover
    refs_by_value: dict[int, TensorRef] = {}
    for op in ops:
        for ref in op.reads:
            latest.setdefault(ref.storage_id, ref.value_id)
            refs_by_value.setdefault(ref.value_id, ref)
        for ref in op.writes:
            if latest.get(ref.storage_id, ref.value_id) != ref.value_id:
                previous[ref.value_id] = latest[ref.storage_id]
            latest[ref.storage_id] = ref.value_id
            written_here[ref.storage_id] = written_here.get(ref.storage_id, 0) + ref.elements
    loads = []
    for op in ops:
        for ref in op.reads:
            if ref.value_id not in mine or ref.value_id not in previous:
                continue
            before, seen = previous[ref.value_id], {ref.value_id}
            while before in mine and before in previous and before not in seen:
                seen.add(before)
                before = previous[before]
            if before in mine or before in uninitialised or before not in refs_by_value:
                continue
            untouched = ref.elements - written_here.get(ref.storage_id, 0)
            if untouched > 0:
                loads.append(replace(refs_by_value[before], elements=untouched))
    return loads


def _boundary(
    ops_by_kernel: Sequence[Sequence[OpRecord]],
    kept_values: set[int],
    uninitialised: frozenset[int],
) -> list[tuple[tuple[TensorRef, ...], tuple[TensorRef, ...]]]:
    """(reads, writes) of each kernel: values from outside it once each; values another kernel
    reads or the model keeps; for a kept storage, its last version in the kernel at the size of
    the largest write any of its versions made there (what every version wrote must reach
    memory)."""
    produced = [{ref.value_id for op in ops for ref in op.writes} for ops in ops_by_kernel]
    loads = [
        [ref for op in ops for ref in op.reads
         if ref.value_id not in mine and ref.value_id not in uninitialised]
        + _untouched_loads(ops, mine, uninitialised)
        for ops, mine in zip(ops_by_kernel, produced, strict=True)
    ]
    loaded_elsewhere = {ref.value_id for refs in loads for ref in refs}
    kept_storages = _kept_storages(itertools.chain(*ops_by_kernel), kept_values)
    united = _UnitedViews()
    boundaries = []
    for ops, refs in zip(ops_by_kernel, loads, strict=True):
        stores = [ref for op in ops for ref in op.writes]
        by_value = [ref for ref in stores if ref.storage_id not in kept_storages
                    and ref.value_id in loaded_elsewhere]
        versions: dict[int, list[TensorRef]] = {}
        for ref in stores:
            if ref.storage_id in kept_storages:
                versions.setdefault(ref.storage_id, []).append(ref)
        in_full = (
            replace(max(refs, key=lambda r: r.elements), value_id=refs[-1].value_id,
                    elements=united(refs))
            for refs in versions.values()
        )
        boundaries.append((united.per_value(refs), united.per_value(by_value) + tuple(in_full)))
    return boundaries


@dataclass
class _UnitedViews:
    """:func:`~torchroofline.regions.united_elements` remembered by the views' geometry (the
    storage aside): uniting two strided views costs ~0.3 ms, and a deep model's kernels read
    the same views of their own buffers layer after layer."""

    _memo: dict[tuple, int] = field(default_factory=dict)

    def __call__(self, refs: Sequence[TensorRef]) -> int:
        """Distinct elements of ``refs``, views of one storage."""
        key = tuple((ref.shape, ref.strides, ref.offset, ref.elements, ref.storage_elements,
                     ref.itemsize, ref.dtype) for ref in refs)
        if key not in self._memo:
            self._memo[key] = united_elements(refs)
        return self._memo[key]

    def per_value(self, refs: Iterable[TensorRef]) -> tuple[TensorRef, ...]:
        """:func:`~torchroofline.trace.largest_per_value` with its views united here."""
        views: dict[int, list[TensorRef]] = {}
        for ref in refs:
            views.setdefault(ref.value_id, []).append(ref)
        return tuple(
            group[0] if len(group) == 1
            else replace(max(group, key=lambda ref: ref.elements), elements=self(group))
            for group in views.values()
        )


def _short_op_name(op: OpRecord) -> str:
    return op.name.split(".")[1] if op.name.count(".") >= 1 else op.name


def _kernel_name(ops: Sequence[OpRecord]) -> str:
    """``module: op1+op2+…``: every distinct op in order of first use, never cut (as Inductor
    names a kernel ``triton_poi_fused_add_mul_…``), so kernels of different ops never read alike."""
    names = list(dict.fromkeys(_short_op_name(op) for op in ops))
    module = next((op.module_path for op in ops if op.module_path), "")
    label = "+".join(names)
    return f"{module}: {label}" if module else label


def fused_plan(ops: Sequence[OpRecord], kept_values: frozenset[int]) -> Plan:
    """Inductor-style plan: see the module docstring and :data:`FUSION_RULES`."""
    nodes, graph = lower(ops, kept_values)
    groups, refused = schedule(nodes, lambda ref: ref.elements * ref.itemsize)
    run: list[list[OpRecord]] = []
    charged: set[int] = set()  # ids of ops whose FLOPs a kernel already counts
    owned: list[list[OpRecord]] = []
    for members in groups:
        # by identity: an op inlined into several nodes is one record (hashing records is slow)
        kernel_ops = list({id(op): op for m in members for op in nodes[m].ops}.values())
        kernel_ops.sort(key=lambda op: op.index)
        run.append(kernel_ops)
        owned.append([op for op in kernel_ops if id(op) not in charged])
        charged |= {id(op) for op in kernel_ops}
    kernel_of_op: dict[int, int] = {}  # op index → the first kernel that runs it
    for k, kernel_ops in enumerate(run):
        for op in kernel_ops:
            kernel_of_op.setdefault(op.index, k)
    for twin, duplicate in graph.duplicates:  # CSE: a duplicate runs where its twin runs
        home = kernel_of_op.get(twin.index)
        if home is not None:
            owned[home].append(duplicate)
    boundaries = _boundary(run, graph.kept, uninitialised_values(ops))
    names = [_kernel_name(kernel_ops) for kernel_ops in run]
    apart: list[list[Refusal]] = [[] for _ in run]
    for (first, second), reason in sorted(refused.items()):
        apart[first].append(Refusal(second + 1, names[second], reason))
        apart[second].append(Refusal(first + 1, names[first], reason))
    kernels = []
    for k, (kernel_ops, (reads, writes)) in enumerate(zip(run, boundaries, strict=True)):
        mine_ids = {id(op) for op in owned[k]}
        kernels.append(Kernel(
            name=names[k],
            category=_category_of(kernel_ops),
            ops=tuple(owned[k]),
            reads=reads,
            writes=writes,
            recomputed=tuple(op for op in kernel_ops if id(op) not in mine_ids),
            refusals=tuple(apart[k]),
        ))
    return Plan(tuple(kernels))


def eager_plan(ops: Sequence[OpRecord]) -> Plan:
    """One kernel per non-view op; each reads its distinct inputs (except uninitialised
    memory, see :func:`uninitialised_values`) and writes all its outputs. A normalization over
    outer dims (batch norm in training, group norm) is two kernels, as ATen runs it: statistics,
    then normalize (``batch_norm_stats`` and ``batch_norm_elemt``); a convolution with a bias is
    the cuDNN call and an in-place bias add (:data:`SEPARATE_BIAS`)."""
    uninitialised = uninitialised_values(ops)
    fresh = itertools.count(-1, -1)
    return Plan(
        tuple(
            Kernel(
                name=_kernel_name([op]),
                category=op.category,
                ops=(part,),
                reads=tuple(r for r in part.distinct_reads if r.value_id not in uninitialised),
                writes=part.writes,
            )
            for op in ops
            if op.category is not Category.ZERO_COPY
            for part in _eager_parts(op, fresh.__next__)
        )
    )


def _eager_parts(op: OpRecord, fresh_id: Callable[[], int]) -> tuple[OpRecord, ...]:
    rule = SEPARATE_BIAS.get(op.name)
    if rule is not None and rule.in_eager:
        return split_bias(op, fresh_id)
    loop = _loop(op, _node_kind(op))
    return (op,) if loop is None or loop.inner else split_normalization(op, fresh_id)
